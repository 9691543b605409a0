"""The gaps docs/security.md listed under "What is not caught" (2026-12-07, b), closed,
with the real Redactor, detect-secrets, the batch screen and, where they are installed,
the real tools (kubectl, openssl):

1. a name/value pair's `value` before its `name`, and a pair in JSON escaped twice (a
   tool's arguments holding a JSON text) (`redact_rules._pair`);
2. a private key written as string literals and cut short, no `-----END` line
   (`redact_rules._KEY_LITERAL`);
3. an XML element named for a credential, `<password>X</password>` (`_element`);
4. a kubeconfig user's `token`, and base64 of a private key (`client-key-data`)
   (`_KUBE_USER`, `_BASE64_PRIVATE_KEY`);
5. a client's short password option, `redis-cli -a X` (`PASSWORD_FLAGS`), and gpg's
   `--passphrase X` (`CREDENTIAL_OPTIONS`);
6. providers' prefixes without a rule: `lsv2_pt_`, `whsec_`, `ATATT3`, `tgp_v1_`, ...
   (`SERVICE_KEYS`).

What each new rule must leave is checked too: `mysql -p` prompting, other commands' `-a`,
empty and self-closing elements, `token: null`, a tokenizer's tokens, names such as
`password_reset_url`, placeholders and metavars."""

from __future__ import annotations

import json
import random
import string
import subprocess

import pyarrow as pa
import pytest
from worldtrace.schemas import redact_rules
from worldtrace.schemas.redact import RedactConfig, Redactor
from worldtrace.schemas.redact_rules import CUT_SHAPES, RedactPattern, example_secrets

from .test_redact_review_1203c import assert_pass1_redacts_as_whole
from .test_redact_review_1203d import assert_screen_flags

PW = "Vq94ufIfBKKF0RDt0X"
HEX = "2c3967d2a1b0c9e8f7a6b5c4d3e2f1a0"
_rng = random.Random(12072)
B64 = string.ascii_letters + string.digits + "+/"
PEM_LINES = ["".join(_rng.choice(B64) for _ in range(64)) for _ in range(6)]


def _twice(text: str) -> str:
    """`text` in a JSON string inside a JSON string (a tool's `arguments_json`)."""
    return json.dumps({"arguments": json.dumps({"out": text})})


# -- 1. pairs --------------------------------------------------------------------------------
PAIRS = {
    "value_first_json": (f'{{"value": "{PW}", "name": "DB_PASSWORD"}}', "password"),
    "value_first_compact": (f'{{"value":"{HEX}","name":"x-api-key"}}', "api_key"),
    "value_first_key": (f'[{{"value": "{PW}", "key": "GITHUB_TOKEN"}}]', "token"),
    "value_first_yaml": (f"- value: {PW}\n  name: CLIENT_SECRET\n", "secret_key"),
    "value_first_pretty": (
        json.dumps({"env": [{"value": PW, "name": "DB_PASSWORD"}]}, indent=2),
        "password",
    ),
    "value_first_in_json": (
        json.dumps({"o": f'{{"value": "{PW}", "name": "DB_PASSWORD"}}'}),
        "password",
    ),
    "twice": (_twice(f'{{"name": "DB_PASSWORD", "value": "{PW}"}}'), "password"),
    "twice_value_first": (_twice(f'{{"value": "{PW}", "name": "DB_PASSWORD"}}'), "password"),
    "twice_har": (_twice(f'{{"name":"x-api-key","value":"{HEX}"}}'), "api_key"),
    "twice_pretty": (
        _twice(json.dumps({"env": [{"name": "DB_PASSWORD", "value": PW}]}, indent=2)),
        "password",
    ),
}
PAIRS_KEPT = [
    '{"value": "259200", "name": "PASSWORD_RESET_TIMEOUT"}',
    '{"value": "/run/secrets/db", "name": "DB_PASSWORD_FILE"}',
    f'{{"value": "{PW}", "name": "LOG_LEVEL"}}',
    '{"value": "${API_KEY}", "name": "API_KEY"}',
    '{"value": "", "name": "DB_PASSWORD"}',
    '{"value": "string", "name": "password"}',
    f'{{"value": "{PW}", "username": "DB_PASSWORD"}}',
    f'{{"value": "{PW}", "name": "DB_PASSWORD_HASH"}}',
    '- value: "1000"\n  name: MAX_NEW_TOKENS\n',
    '{"value": "production", "name": "NODE_ENV"}',
    _twice('{"name": "DB_PASSWORD", "value": "changeme"}'),
    _twice('{"name": "DB_PASSWORD", "value": "${DB_PASSWORD}"}'),
    _twice('{"name": "password_reset_url", "value": "https://x.example/r?id=42"}'),
]


@pytest.mark.parametrize("name", sorted(PAIRS))
def test_a_pair_with_its_value_first_or_in_json_escaped_twice_is_redacted(name):
    text, kind = PAIRS[name]
    out, n = Redactor().text(text)
    assert n == 1 and PW not in out and HEX not in out and f"<secret:{kind}>" in out, out
    if text.startswith(("{", "[")):
        json.loads(out)  # the JSON around it stays JSON
    if name.startswith("twice"):
        inner = json.loads(json.loads(out)["arguments"])["out"]
        assert f"<secret:{kind}>" in inner and PW not in inner


# -- 2. a private key as string literals, cut short -------------------------------------------
def _literals(lines: list[str], between: str = "\n") -> str:
    return between.join(f'    "{line}\\n"' for line in lines)


CUT_PY = "KEY = (\n" + _literals(["-----BEGIN RSA PRIVATE KEY-----", *PEM_LINES])
CUT_MID = CUT_PY + '\n    "' + PEM_LINES[0][:20]  # cut inside a literal
CUT_JS = "const key =\n" + _literals(["-----BEGIN PRIVATE KEY-----", *PEM_LINES], " +\n")
CUT_KEYS = {
    "python": CUT_PY,
    "python_mid_literal": CUT_MID,
    "javascript": CUT_JS,
    "json_list": json.dumps({"lines": ["-----BEGIN OPENSSH PRIVATE KEY-----", *PEM_LINES]})[:-2],
    "in_json": json.dumps({"content": CUT_MID}),
    "in_json_twice": json.dumps({"x": json.dumps({"content": CUT_PY})}),
}


@pytest.mark.parametrize("name", sorted(CUT_KEYS))
def test_a_private_key_in_literals_cut_short_is_redacted_to_its_last_line(name):
    text = CUT_KEYS[name]
    out, n = Redactor().text(text)
    assert n == 1 and "<secret:private_key>" in out, out
    assert [line for line in PEM_LINES if line[:8] in out] == [], out
    if name.startswith("in_json"):
        json.loads(out)


def test_code_and_prose_after_a_key_literal_without_its_end_are_kept():
    markers = '["-----BEGIN RSA PRIVATE KEY-----", "-----BEGIN EC PRIVATE KEY-----", "Proc-Type"]'
    prose = '("-----BEGIN PRIVATE KEY-----\\n", "is the line a PEM key starts with")'
    code = CUT_PY + '\n)\nOTHER = "abcdefgh"\nNAME = "Zq8Lm3vX9pR"\n'
    assert Redactor().text(markers)[0] == (
        '["<secret:private_key>", "<secret:private_key>", "Proc-Type"]'
    )  # each BEGIN line, as before
    assert Redactor().text(prose)[0] == (
        '("<secret:private_key>", "is the line a PEM key starts with")'
    )
    assert Redactor().text(code) == (
        'KEY = (\n    "<secret:private_key>"\n)\nOTHER = "abcdefgh"\nNAME = "Zq8Lm3vX9pR"\n',
        1,
    )


# -- 3. XML elements -------------------------------------------------------------------------
XML = {
    "maven": (
        "<server><id>repo</id><username>u</username><password>s3cr3tPW!</password></server>",
        "password",
    ),
    "word_and_digit": ("<password>hunter2</password>", "password"),
    "nuget": (f"<ClearTextPassword>{PW}</ClearTextPassword>", "password"),
    "passphrase": ("<passphrase>k3y-phrase-99</passphrase>", "password"),
    "secret": (f"<secret>{PW}</secret>", "secret_key"),
    "client_secret": (f"<client_secret>{PW}</client_secret>", "secret_key"),
    "sts": (
        "<Credentials><AccessKeyId>ASIAQ3EGRVQWXK7YB2NM</AccessKeyId><SecretAccessKey>"
        "wJalrXUtnFEMI/K7MDENG/bPxRfiCYzEXAMPLEKY</SecretAccessKey></Credentials>",
        "api_key",
    ),
    "token": (f"<token>{PW}</token>", "token"),
    "access_token": (f"<access_token>{PW}</access_token>", "token"),
    "api_key": (f"<apiKey>{HEX}</apiKey>", "api_key"),
    "access_key": (f"<access_key>{HEX}</access_key>", "api_key"),
    "namespaced": (f"<ns:password>{PW}</ns:password>", "password"),
    "in_json": (
        json.dumps({"out": f"<config>\n  <password>{PW}</password>\n</config>"}),
        "password",
    ),
}
XML_KEPT = [
    "<password/>",
    "<password></password>",
    "<password />",
    "<password>${DB_PASSWORD}</password>",
    "<password>********</password>",
    "<password>{{ db_password }}</password>",
    "<password>changeme</password>",
    "<password_reset_url>https://x.example/reset?id=42</password_reset_url>",
    "<passwordHash>$2b$12$abcdefghijklmnopqrstuv</passwordHash>",
    "<token>the</token><token>COVID-19</token><token>2019-nCoV</token>",
    '<token id="3">Hello</token>',
    "<maxTokens>4096</maxTokens><max_token>4096</max_token><tokens>12345678</tokens>",
    "<key>CFBundleIdentifier</key><string>com.example.app9</string>",
    "<secret>false</secret><apiKey>YOUR_API_KEY</apiKey>",
    "<AccessKeyId>not-a-key-1234</AccessKeyId>",
]


@pytest.mark.parametrize("name", sorted(XML))
def test_an_xml_element_named_for_a_credential_is_redacted(name):
    text, kind = XML[name]
    out, n = Redactor().text(text)
    assert n >= 1 and f"<secret:{kind}>" in out, out
    for secret in (PW, HEX, "s3cr3tPW!", "hunter2", "k3y-phrase-99", "wJalrXUtnFEMI"):
        assert secret not in out
    assert out.count("</") == text.count("</")  # the closing tags stay


# -- 4. kubeconfig --------------------------------------------------------------------------
KUBE_TOKEN = "kubeadm.0123456789abcdef"
KUBE_CONFIG_KEY = (  # `client-key-data` of an ed25519 key, as kubectl embeds it
    "LS0tLS1CRUdJTiBQUklWQVRFIEtFWS0tLS0tCk1DNENBUUF3QlFZREsyVndCQ0lFSUNqYzd0VzlrbHJuME5UaGR2K0pk"
    "bU9JTDdmTmMvaUVrQnlYQXZEeEo0WE4KLS0tLS1FTkQgUFJJVkFURSBLRVktLS0tLQo="
)
KUBE_YAML = (
    "users:\n- name: admin\n  user:\n    client-certificate-data: DATA+OMITTED\n"
    f"    token: {KUBE_TOKEN}\n- name: sa\n  user:\n    token: 31ada4fd-adec-460c-809a-9e56ceb75269\n"
)
KUBE_KEPT = [
    "users:\n- name: admin\n  user:\n    client-key-data: DATA+OMITTED\n    token: REDACTED\n",
    "users:\n- name: a\n  user:\n    token: null\n- name: b\n  user:\n    token: ~\n",
    'users:\n- name: a\n  user:\n    token: ""\n- name: b\n  user:\n    token: ${KUBE_TOKEN}\n',
    "contexts:\n- context:\n    cluster: demo\n    user: sa\n  name: demo\n",
    "token: Hello_world99\ntoken: abc12345def\n",  # a bare `token:`: a tokenizer's as often
    "{'token': 'hello', 'id': 5}\n{'token': '##ing', 'id': 6}\n",
    '{"user": {"name": "alice", "token_count": 12345678}}',
    # base64 of what is no private key: a certificate, a public key
    "certificate-authority-data: LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1JSUM=\n"
    "LS0tLS1CRUdJTiBQVUJMSUMgS0VZLS0tLS0KTUNvd0JRWURLMlZ3QXlFQQ==\n",
]


def test_a_kubeconfig_users_token_and_a_base64_private_key_are_redacted():
    for text in (KUBE_YAML, json.dumps({"out": KUBE_YAML})):
        out, n = Redactor().text(text)
        assert n == 2 and KUBE_TOKEN not in out and "31ada4fd" not in out, out
        assert out.count("<secret:token>") == 2 and "DATA+OMITTED" in out
    json_config = json.dumps({"users": [{"name": "sa", "user": {"token": KUBE_TOKEN}}]})
    assert Redactor().text(json_config) == (json_config.replace(KUBE_TOKEN, "<secret:token>"), 1)


def test_kubectl_config_view_raw_holds_no_token_or_client_key_once_redacted(tmp_path):
    """A real kubeconfig, as `kubectl config set-credentials` writes it and `kubectl config
    view --raw` prints it (YAML and JSON)."""
    key = tmp_path / "client.pem"
    subprocess.run(["openssl", "genpkey", "-algorithm", "ed25519", "-out", key], check=True)
    env = {"KUBECONFIG": str(tmp_path / "config"), "PATH": "/usr/bin:/bin"}

    def kubectl(*args: str) -> str:
        return subprocess.run(
            ["kubectl", "config", *args], env=env, capture_output=True, text=True, check=True
        ).stdout

    kubectl("set-credentials", "sa", f"--token={KUBE_TOKEN}")
    kubectl("set-credentials", "admin", f"--client-key={key}", "--embed-certs=true")
    for shown in (kubectl("view", "--raw"), kubectl("view", "--raw", "-o", "json")):
        data = shown.split("client-key-data")[1][:80].strip(' :"')[:40]
        assert KUBE_TOKEN in shown and data.startswith("LS0tLS1CRUdJTi"), shown
        out, n = Redactor().text(shown)
        assert n == 2 and KUBE_TOKEN not in out and data not in out, out
        assert "<secret:token>" in out and "<secret:private_key>" in out
    masked = kubectl("view")  # without --raw kubectl masks both itself
    assert Redactor().text(masked) == (masked, 0)


@pytest.mark.parametrize("text", KUBE_KEPT)
def test_kubeconfigs_and_tokens_holding_no_credential_are_kept(text):
    assert Redactor().text(text) == (text, 0)


# -- 5. command lines -----------------------------------------------------------------------
COMMANDS = [
    f"redis-cli -h 127.0.0.1 -p 6379 -a {PW} ping",
    f"redis-cli -a '{PW}' --no-auth-warning info",
    "redis-cli -a hunterpass ping",
    f"$ redis-cli -n 2 -a {PW}\r\n127.0.0.1:6379[2]> ",
    json.dumps({"command": ["redis-cli", "-a", PW, "ping"]}),
    f"mongosh -u admin -p {PW} --authenticationDatabase admin",
    f"mongodump --uri mongodb://db:27017 -u backup -p '{PW}' -o /tmp/dump",
    f'ldapsearch -x -H ldap://ldap:389 -D "cn=admin,dc=example,dc=org" -w {PW} -b dc=example,dc=org',
    f"gpg --batch --pinentry-mode loopback --passphrase {PW} -d secrets.gpg",
    "gpg --batch --passphrase hunterpassword --symmetric notes.txt",
]
COMMANDS_KEPT = [
    "mysql -u root -p",
    "mysql -u root -p mydb < dump.sql",
    "mysql -h db -u app -p\nEnter password: ",
    "ls -a /tmp && git commit -a -m 'fix the token refresh' && uname -a",
    "redis-cli -h 127.0.0.1 ping; ls -a",
    "redis-cli info | grep -a used_memory",
    "  -a <password>      Password to use when connecting to the server.",
    'redis-cli -a "$REDIS_PASSWORD" ping && redis-cli -a $REDIS_PASSWORD info',
    "redis-cli -a PASSWORD ping",
    "redis-cli -a password ping",
    "docker run -d --name mongo -p 27017:27017 mongo:7 && docker run --name mongo2 -p 8080 mongo",
    "mongosh -u admin -p --authenticationDatabase admin",
    "pip install pymongo -p 3 && mongo-express -p 8081",
    "ldapsearch -x -W -D cn=admin,dc=example,dc=org -b dc=example,dc=org",
    "gpg --batch --passphrase-fd 0 -d f.gpg; gpg --passphrase-file pw.txt -d f.gpg",
    "gpg --batch --passphrase '' --quick-gen-key alice; gpg --passphrase \"$GPG_PASS\" -d x",
    "password_reset_url=https://x.example/reset\npassword_reset_timeout: 3600",
]


@pytest.mark.parametrize("text", COMMANDS)
def test_a_clients_short_password_option_and_gpgs_passphrase_are_redacted(text):
    out, n = Redactor().text(text)
    assert n == 1 and "<secret:password>" in out, out
    assert PW not in out and "hunterpass" not in out


@pytest.mark.parametrize("text", COMMANDS_KEPT)
def test_prompting_flags_other_commands_and_variables_are_kept(text):
    assert Redactor().text(text) == (text, 0)


# -- 6. providers' prefixes -----------------------------------------------------------------
SERVICE = {
    "langsmith_key": "lsv2_pt_", "langfuse_key": "sk-lf-", "webhook_secret": "whsec_",
    "atlassian_token": "ATATT3", "together_key": "tgp_v1_", "nvidia_key": "nvapi-",
    "tavily_key": "tvly-", "pinecone_key": "pcsk_", "e2b_key": "e2b_", "vercel_token": "vcp_",
    "newrelic_key": "NRAK-", "pulumi_token": "pul-", "aws_bedrock_key": "ABSK",
    "onepassword_token": "ops_eyJ",
}  # fmt: skip
"""Kind -> the start of its example (`example_secrets`)."""
SERVICE_KINDS = sorted(SERVICE)
HUNT_KEYS = {
    "langsmith_key": "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",
    "webhook_secret": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
    "newrelic_key": "NRAK-4Z7QX1V9K2M8P3R6T0W5Y2B8C1D",
    "pulumi_token": "pul-" + "3f9a0c2b7d" * 4,
}


def test_every_service_kind_has_a_rule_a_cut_shape_and_an_example():
    assert {kind for kind, *_ in getattr(redact_rules, "SERVICE_KEYS", ())} == set(SERVICE)
    assert set(SERVICE_KINDS) <= {kind for kind, *_ in CUT_SHAPES}
    assert set(SERVICE_KINDS) <= set(example_secrets(0))
    assert all(example_secrets(0)[kind][0].startswith(start) for kind, start in SERVICE.items())


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("context", ["export K={}", '{{"key": "{}"}}', "key: '{}'", "x {} y"])
def test_service_keys_are_redacted_as_their_kind(seed, context):
    for kind in SERVICE_KINDS:
        value = example_secrets(seed)[kind][0]
        out, n = Redactor().text(context.format(value))
        assert n == 1 and value[:10] not in out and f"<secret:{kind}>" in out, (kind, out)
    for kind, value in HUNT_KEYS.items():
        out, n = Redactor().text(context.format(value))
        assert (n, value in out, f"<secret:{kind}>" in out) == (1, False, True), out


@pytest.mark.parametrize("kind", SERVICE_KINDS)
def test_a_service_key_cut_by_the_output_cap_is_redacted_at_the_cut(kind):
    value = example_secrets(4)[kind][0]
    start = len(SERVICE[kind])
    for n in (start + 1, len(value) - 1):
        out, found = Redactor().cut_tail("x" * 40 + " export T=" + value[:n])
        assert (out, found) == ("x" * 40 + f" export T=<secret:{kind}>", 1), value[:n]


SERVICE_KEPT = [
    "set it: lsv2_pt_... (your key), lsv2_pt_xxxxxxxxxxxx, lsv2_sk_<key>",
    "whsec_... and whsec_test_secret in the docs",
    "git pull-request; apul-1234abcd; see pul-",
    "tvly-YOUR_API_KEY nvapi-xxxx e2b_sandbox_template pcsk_example_key",
    "vcp_token_name vercel_project_id=prj_123 vercel_deploy_hook_url",
    "NRAK-XXXXXXXXXXXXXX ATATT3... sk-lf-... tgp_v1_...",
    "ABSKEY ops_eyJ ABSK is a prefix",
]


@pytest.mark.parametrize("text", SERVICE_KEPT)
def test_placeholders_and_names_near_the_service_prefixes_are_kept(text):
    assert Redactor().text(text) == (text, 0)


CUT_KEPT = ["see pul-", "apul-1234abcd", "git pull-request", "whsec_", "x NRAK-", "task_nvapi-x"]


@pytest.mark.parametrize("tail", CUT_KEPT)
def test_a_cut_tail_holding_a_service_prefix_alone_or_inside_a_word_is_kept(tail):
    assert Redactor().cut_tail("x" * 40 + " " + tail) == ("x" * 40 + " " + tail, 0)


# -- the screen, `process`, and the kept texts in JSON ---------------------------------------
KEPT = [*PAIRS_KEPT, *XML_KEPT, *KUBE_KEPT, *COMMANDS_KEPT, *SERVICE_KEPT]


@pytest.mark.parametrize("text", KEPT)
def test_the_look_alikes_are_kept_as_they_are_and_in_a_json_string(text):
    assert Redactor().text(text) == (text, 0)
    wrapped = json.dumps({"raw": text})
    assert Redactor().text(wrapped) == (wrapped, 0)


def _found_lines() -> list[str]:
    ex = example_secrets(6)
    return [
        *(t for t, _ in PAIRS.values()),
        CUT_PY,
        CUT_JS,
        *(t for t, _ in XML.values()),
        KUBE_YAML,
        *COMMANDS,
        *(ex[kind][1] for kind in SERVICE_KINDS),
    ]


def test_the_screen_flags_every_text_these_rules_redact():
    assert_screen_flags(_found_lines(), [*KEPT[:12], "ok"], seed=12072)


def test_the_screen_compiles_these_rules_as_they_stand_beside_a_users_backreference():
    """A user's rule the screen cannot rewrite for UTF-8 (a backreference) makes it compile
    every rule as it stands, for ASCII text: the pair rules holding `_value`'s unquoted
    form twice were refused there as too long, and every record went the full path."""
    rule = RedactPattern(kind="pin", regex=r"(pin)-\1-[0-9]{4}")
    red = Redactor(RedactConfig(patterns=(rule,)))
    assert red.screen is not None and not red.screen.utf8
    for line in _found_lines():
        assert red.screen.text(line), line


def test_a_key_ending_a_string_flags_not_the_string_after_it():
    """The screen reads a column's strings back to back: a rule whose tail runs on over
    base64 or letters (`redact_rules._taken`, a bounded match and `Detector.extend`)
    flagged the clean row after a key that ended a string."""
    red = Redactor()
    ex = example_secrets(7)
    b64_key = KUBE_CONFIG_KEY
    for value in [*(ex[kind][0] for kind in SERVICE_KINDS), b64_key]:
        for after in ("/ok", "abcdef", "+x=", "_-x"):
            rows = [{"s": "key: " + value}, {"s": after}]
            flags = red.screen.rows(pa.RecordBatch.from_pylist(rows)).tolist()
            assert flags == [True, False], (value, after)
        out, n = red.text("key: " + value)
        assert n == 1 and out.startswith("key: <secret:") and value[-6:] not in out, out


def test_pass1_redacts_these_shapes_as_redacting_every_record_whole(tmp_path):
    ex = example_secrets(6)
    # not those in JSON strings: in a tool's arguments they are escaped once more, and a
    # pair or a key in JSON escaped three times is not read ("What is not caught")
    lines = [line for line in _found_lines() if '\\"' not in line]
    secrets = [PW, HEX, KUBE_TOKEN, PEM_LINES[2], "hunter2", *(ex[k][0] for k in SERVICE_KINDS)]
    assert_pass1_redacts_as_whole(tmp_path, lines, secrets)
