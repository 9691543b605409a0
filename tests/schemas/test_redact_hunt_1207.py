"""Secrets the 2026-12-07 hunt found kept, with the real Redactor, detect-secrets and the
batch screen:

1. a key of known shape after `/`, `+`, `-` or a `%XX` escape (a clone URL's user, a
   diff's line, a path, URL-encoded JSON): `redact_rules._start` refused every key
   character before a key (`_SEPARATED`, `GENERATED`);
2. a JWT there lost its header and payload and kept its signature: detect-secrets' rule
   is lazy after the payload's `.` (`redact._token_end`);
3. a private key written as string literals kept its body (`redact_rules._JOINED`), a
   PuTTY key file all of it;
4. a value of several lines handed over, printed by a tty (`\\r\\n`), was kept
   (`redact.written_forms`);
5. `aws configure`'s prompt kept the secret key (`redact_rules._AWS_PROMPT`);
6. a credential in a name/value pair (Kubernetes' `env`, HAR headers) was kept
   (`redact_rules._pair`).

What must stay is checked too: the hunter's benign texts, and slugs, paths, diffs and
flags near key prefixes."""

from __future__ import annotations

import base64
import hashlib
import json
import random
import string
import uuid

import pytest
from worldtrace.schemas.redact import Redactor
from worldtrace.schemas.redact_rules import example_secrets

from .test_redact_review_1203c import assert_pass1_redacts_as_whole
from .test_redact_review_1203d import assert_screen_flags

B62 = string.ascii_letters + string.digits

# -- 1 and 2: after a separator ------------------------------------------------------------------
CONTEXTS = {
    "url_user": "git clone https://{}@github.com/org/repo.git",
    "url_user_and_name": "https://x-access-token:{}@github.com/o/r.git",
    "diff_added": "@@ -0,0 +1 @@\n+{}\n",
    "diff_removed": "@@ -1 +0,0 @@\n-{}\n",
    "path": "cat /run/secrets/{}",
    "url_encoded_json": "?body=%7B%22key%22%3A%20%22{}%22%7D",
    "url_encoded_equals": "?next=%2Fcb%3Ftoken%3D{}&x=1",
    "json_string": json.dumps({"cmd": "find / -name x\n/root/.cache/{}"})
    .replace("{", "{{")
    .replace("}", "}}")
    .replace("{{}}", "{}"),
}
OWN_CONTEXT = {"aws_secret_key", "aws_session_token", "bearer_token", "url_password"}
"""Kinds found only by the name before them (`example_secrets` plants them so)."""


@pytest.mark.parametrize("seed", [3, 11])
@pytest.mark.parametrize("context", sorted(CONTEXTS))
def test_a_key_of_known_shape_after_a_slash_plus_minus_or_percent_escape_is_redacted(seed, context):
    red = Redactor()
    kept = []
    for kind, (value, _) in example_secrets(seed).items():
        if kind in OWN_CONTEXT or kind == "private_key":
            continue
        out, n = red.text("result: " + CONTEXTS[context].format(value) + " done")
        if n == 0 or any(value[i : i + 8] in out for i in range(len(value) - 7)):
            kept.append(kind)
    assert kept == []


def test_the_hunters_clone_url_diff_and_path_keys_are_redacted():
    pat = (
        "github_pat_11EDT2SYWB3WKH5DNSIPZZ_63FfkQ2Lm9Xr4Tz8Vb1Nc7Hd5Jq3Wp6Ks0Ay2Ee4Gg8Uu1Oo9NPRVdD5"
    )
    ant = "sk-ant-api03-Y7Zkuvqdt7s8" + "Xa9Kp2Lm4Qw8Er6Ty1Ui3Op5As7Df9Gh0Jk2Zx4Cv6Bn8Mq1" + "-uAA"
    oai = "sk-proj-YYZYn9ZhyiA4" + "Rt5Yu7Io9Pa1Sd3Fg5Hj7Kl9Zx1Cv3Bn5Mq7We9" + "9w3Ql"
    hf = "hf_cjnCqaXNv1syeefnLOpaMxxNDi9LE1Ki3y"
    texts = [
        json.dumps({"cmd": f"git clone https://{pat}@github.com/acme/app.git"}),
        f"origin\thttps://{pat}@github.com/acme/app.git (fetch)",
        f"diff --git a/.env b/.env\n-ANTHROPIC={ant}\n-{ant}\n+{oai}\n",
        f"/root/.cache/huggingface/stored_tokens/{hf}\n",
        f"GET /v1/x?body=%7B%22key%22%3A%20%22{oai}%22%7D",
    ]
    red = Redactor()
    for text in texts:
        out, n = red.text(text)
        assert n >= 1 and not any(s in out for s in (pat, ant, oai, hf)), out


def test_a_jwt_after_a_slash_or_an_encoded_equals_is_one_placeholder_with_its_signature():
    jwt = example_secrets(3)["jwt"][0]
    signature = jwt.rsplit(".", 1)[1]
    red = Redactor()
    for text in (
        f"Reset your password: https://app.example.com/reset-password/{jwt}",
        json.dumps({"url": f"https://app.example.com/reset-password/{jwt}"}),
        f"https://app.example.com/cb?next=%2Fx%3Faccess_token%3D{jwt}&y=1",
    ):
        out, n = red.text(text)
        assert n == 1 and signature not in out and "<secret:jwt>" in out, out


@pytest.mark.parametrize("first", ["A", "-", "_"])
def test_detect_secrets_jwt_match_goes_on_over_the_signature(first):
    """Inside a word, where only detect-secrets' rule finds a JWT (lazy after `.`)."""
    head, _, _ = example_secrets(3)["jwt"][0].rpartition(".")
    jwt = f"{head}.{first}Kx9mZ2pQ7rT4vW1yB3nD5fH8jL0sU6c"
    out, n = Redactor().text(f"token_{jwt} ok")
    assert (out, n) == ("token_<secret:json_web_token> ok", 1)


def test_a_key_cut_after_a_slash_is_taken_by_the_cut_tail():
    red = Redactor()
    assert red.cut_tail("x" * 100 + " /run/secrets/hf_cjnCqaXNv1sy") == (
        "x" * 100 + " /run/secrets/<secret:huggingface_token>",
        1,
    )
    kept = "x" * 100 + " ls ~/.cache/hf_home"
    assert red.cut_tail(kept) == (kept, 0)


# -- 3: a private key as string literals ---------------------------------------------------------
_rng = random.Random(1207)
PEM_LINES = ["".join(_rng.choice(B62 + "+/") for _ in range(64)) for _ in range(12)]


def _literals(begin: str, end: str, between: str, indent: str = "    ") -> str:
    lines = [begin, *PEM_LINES, end]
    return between.join(f'{indent}"{line}\\n"' for line in lines)


PY_KEY = (
    "KEY = (\n"
    + _literals("-----BEGIN RSA PRIVATE KEY-----", "-----END RSA PRIVATE KEY-----", "\n")
    + '\n)\nOTHER = "x"\n'
)
JS_KEY = (
    "const key =\n"
    + _literals("-----BEGIN PRIVATE KEY-----", "-----END PRIVATE KEY-----", " +\n")
    + ";\n"
)
LIST_KEY = json.dumps(
    {
        "lines": [
            "-----BEGIN OPENSSH PRIVATE KEY-----",
            *PEM_LINES,
            "-----END OPENSSH PRIVATE KEY-----",
        ]
    }
)
PUTTY_KEY = (
    "PuTTY-User-Key-File-3: ssh-rsa\nEncryption: none\nComment: rsa-key-20261207\n"
    f"Public-Lines: 2\n{PEM_LINES[0]}\n{PEM_LINES[1]}\nPrivate-Lines: 3\n"
    + "\n".join(PEM_LINES[2:5])
    + f"\nPrivate-MAC: {'3f' * 32}\n"
)


@pytest.mark.parametrize(
    "text",
    [
        PY_KEY,
        JS_KEY,
        LIST_KEY,
        json.dumps({"content": PY_KEY}),
        json.dumps({"x": json.dumps({"content": PY_KEY})}),
        PUTTY_KEY,
    ],
    ids=["python", "javascript", "json_list", "in_json", "in_json_twice", "putty"],
)
def test_a_private_key_written_as_string_literals_is_redacted_whole(text):
    out, n = Redactor().text(text)
    assert n == 1 and "<secret:private_key>" in out
    assert [line for line in PEM_LINES if line[:8] in out] == []
    if text.startswith("{"):  # the JSON around it stays JSON
        json.loads(out)


def test_code_after_a_private_key_in_literals_is_kept():
    out, _ = Redactor().text(PY_KEY)
    assert out.endswith('\\n"\n)\nOTHER = "x"\n')


# -- 4: a value of several lines, as a tty prints it --------------------------------------------
MULTI = "user=svc-deploy\nsecret=Qx7pL2mZr9mK4Wv3nB8tY6\nregion=eu-west-1"


def test_a_multiline_value_handed_over_is_redacted_as_a_terminal_prints_it():
    red = Redactor(literals=[MULTI])
    shown = MULTI.replace("\n", "\r\n")
    assert red.text(f"$ printf '%s\\n' \"$SVC\"\r\n{shown}\r\n$ ") == (
        "$ printf '%s\\n' \"$SVC\"\r\n<secret:env_value>\r\n$ ",
        1,
    )
    state = json.dumps({"raw": f"\x1b[?2004l\r{shown}\r\n\x1b[?2004h$ "})
    out, n = red.text(state)
    assert n == 1 and "Qx7pL2mZr9mK4Wv3nB8tY6" not in out
    assert red.screen is not None and red.screen.text(state)


# -- 5 and 6: aws configure, name/value pairs ---------------------------------------------------
AWS_SECRET = "2hpChYgCfrL1spNxnyVmihA+2O76UMFxFkM+R5Kj"
PAIRS = {
    "k8s_json": '{"name": "DB_PASSWORD", "value": "Vq94ufIfBKKF0RDt0X"}',
    "k8s_json_pretty": json.dumps(
        {"env": [{"name": "DB_PASSWORD", "value": "Vq94ufIfBKKF0RDt0X"}]}, indent=2
    ),
    "k8s_yaml": '      - name: DB_PASSWORD\n        value: "Vq94ufIfBKKF0RDt0X"\n',
    "k8s_yaml_plain": "- name: DB_PASSWORD\n  value: Vq94ufIfBKKF0RDt0X\n",
    "har": '{"name":"x-api-key","value":"2c3967d2a1b0c9e8f7a6b5c4d3e2f1a0"}',
    "postman": '[{"key": "X-Api-Key", "value": "2c3967d2a1b0c9e8f7a6b5c4d3e2f1a0"}]',
    "ecs_token": '{"name": "GITHUB_TOKEN", "value": "Vq94ufIfBKKF0RDt0X"}',
    "secret": "{'name': 'CLIENT_SECRET', 'value': 'Vq94ufIfBKKF0RDt0X'}",
    "in_json": json.dumps({"out": '{"name": "DB_PASSWORD", "value": "Vq94ufIfBKKF0RDt0X"}'}),
}
AWS_PROMPTS = [
    f"AWS Access Key ID [None]: AKIAQYLPMN5HHHFPZAM2\nAWS Secret Access Key [None]: {AWS_SECRET}\n"
    "Default region name [None]: us-east-1\n",
    f"AWS Secret Access Key [****************R5Kj]: {AWS_SECRET}",
    json.dumps({"raw": f"AWS Secret Access Key [None]: {AWS_SECRET}\r\n"}),
]


@pytest.mark.parametrize("text", AWS_PROMPTS)
def test_the_secret_key_typed_at_aws_configures_prompt_is_redacted(text):
    out, n = Redactor().text(text)
    assert n >= 1 and AWS_SECRET not in out and "<secret:aws_secret_key>" in out, out


@pytest.mark.parametrize("name", sorted(PAIRS))
def test_a_credential_in_a_name_value_pair_is_redacted(name):
    out, n = Redactor().text(PAIRS[name])
    assert n == 1, out
    assert "Vq94ufIfBKKF0RDt0X" not in out and "2c3967d2a1b0c9e8f7a6b5c4d3e2f1a0" not in out


PAIRS_KEPT = [
    '{"name": "DB_PASSWORD", "valueFrom": {"secretKeyRef": {"name": "db", "key": "password"}}}',
    "- name: DB_PASSWORD\n  valueFrom:\n    secretKeyRef:\n      name: db\n      key: password\n",
    '{"name": "DB_PASSWORD_FILE", "value": "/run/secrets/db"}',
    '{"name": "PASSWORD_RESET_TIMEOUT", "value": "259200"}',
    '{"name": "MAX_NEW_TOKENS", "value": "1000000"}',
    '{"name": "API_KEY", "value": "${API_KEY}"}',
    '{"name": "DB_PASSWORD", "value": ""}',
    '{"name": "password", "value": "string"}',
    '{"username": "DB_PASSWORD", "value": "Vq94ufIfBKKF0RDt0X"}',
    "- name: GITHUB_TOKEN\n  value: ${{ secrets.GITHUB_TOKEN }}",
    '{"name": "session_token_ttl", "value": "3600s"}',
    "AWS Secret Access Key [****************wxyz]: \nDefault region name [us-east-1]: ",
]


@pytest.mark.parametrize("text", PAIRS_KEPT)
def test_pairs_and_prompts_holding_no_literal_credential_are_kept(text):
    assert Redactor().text(text) == (text, 0)


# -- what stays --------------------------------------------------------------------------------
NEAR_KEYS = [
    "cp /models/sk-learn-regression-model-v2/weights.bin /tmp/",
    "huggingface-cli download meta-llama/Llama-3-8b openai/gpt-4o-mini",
    "git clone https://huggingface.co/hf-internal-testing/tiny-random-gpt2",
    "ls /usr/lib/node_modules/npm/npm_modules/npm-registry-fetch",
    "git checkout feature/ghp-fix && git push origin feature/sk-proj-cleanup-2024",
    "diff --git a/x.py b/x.py\n-    return x\n+    return sk_live_mode(x)\n-sk-learn\n"
    "+xai-sdk==1.2.0\n+pplx-7b-online",
    "python run.py --sk-proj-name demo --hf_token_path ~/.hf -xai-sdk",
    "/root/.cache/huggingface/hub/models--hf-internal-testing--tiny-random-gpt2/snapshots/"
    "5f1b9a3c2d4e6f708192a3b4c5d6e7f8091a2b3c/config.json",
    "~/.cache/hf_home/hub/ /home/user/hf_hub_download/ /opt/fw_version/2.1",
    "https://x.example/search?q=%22pplx-7b-online%22&next=%2Fdocs%2Fsk-learn%3Dxai-sdk",
    "https://github.com/openai/openai-python/blob/main/src/openai/_client.py",
    "https://registry.npmjs.org/@types/node/-/node-20.11.5.tgz",
    "/nix/store/9k8x7v6c5b4n3m2l1k0j9h8g7f6d5s4a-python3-3.11.6/bin/python",
]


def _benign() -> dict[str, str]:
    """The hunter's benign texts (`fp.py`, seeded as there): what must stay."""
    rng = random.Random(1)

    def h(n: int) -> str:
        return "".join(rng.choice("0123456789abcdef") for _ in range(n))

    def b64(n: int) -> str:
        return base64.b64encode(bytes(rng.getrandbits(8) for _ in range(n))).decode()

    def word(n: int, alphabet: str = B62) -> str:
        return "".join(rng.choice(alphabet) for _ in range(n))

    t = {}
    t["gitlog"] = "\n".join(
        f"commit {h(40)}\nAuthor: A <a@x>\nDate: Mon\n\n    fix {i}\n" for i in range(20)
    )
    t["git_oneline"] = "\n".join(f"{h(7)} (HEAD -> main, origin/main) msg {i}" for i in range(20))
    t["ansi_sha"] = (
        f"\x1b[33mcommit {h(40)}\x1b[m\x1b[33m (\x1b[m\x1b[1;36mHEAD -> \x1b[m\x1b[1;32mmain\x1b[m"
    )
    t["docker_pull"] = "\n".join(
        [f"{h(12)}: Pull complete" for _ in range(5)]
        + [f"Digest: sha256:{h(64)}", f"docker.io/library/python@sha256:{h(64)}"]
    )
    t["docker_push"] = f"latest: digest: sha256:{h(64)} size: 1573"
    t["pkg_lock"] = json.dumps(
        {"packages": {f"node_modules/p{i}": {"resolved": f"https://registry.npmjs.org/p{i}/-/p{i}-1.0.0.tgz",
                                              "integrity": "sha512-" + b64(64)} for i in range(10)}},
        indent=2,
    )  # fmt: skip
    t["yarn_lock"] = "\n".join(
        f'p{i}@^1.0.0:\n  resolved "https://registry.yarnpkg.com/p{i}/-/p{i}-1.0.0.tgz#{h(40)}"\n'
        f"  integrity sha512-{b64(64)}\n"
        for i in range(5)
    )
    t["poetry_lock"] = "\n".join(
        f'{{file = "p{i}-1.0-py3-none-any.whl", hash = "sha256:{h(64)}"}},' for i in range(5)
    )
    t["pip_hash"] = "\n".join(f"p{i}==1.0 \\\n    --hash=sha256:{h(64)}" for i in range(5))
    t["cargo_lock"] = "\n".join(f'name = "p{i}"\nchecksum = "{h(64)}"\n' for i in range(5))
    t["go_sum"] = "\n".join(f"github.com/x/p{i} v1.0.0/go.mod h1:{b64(32)}" for i in range(5))
    t["uuids"] = "\n".join(str(uuid.UUID(int=rng.getrandbits(128))) for _ in range(30))
    t["b64_text"] = base64.b64encode(
        ("Lorem ipsum dolor sit amet, consectetur. " * 20).encode()
    ).decode()
    t["b64_wrapped"] = base64.encodebytes(bytes(rng.getrandbits(8) for _ in range(2000))).decode()
    t["sums"] = "\n".join(f"{h(64)}  file{i}.tar.gz\n{h(32)}  f{i}" for i in range(10))
    t["k8s_pods"] = "\n".join(
        f"web-{h(10)}-{word(5, string.ascii_lowercase + string.digits)}   1/1   Running"
        for _ in range(10)
    )
    t["nix"] = "\n".join(
        f"/nix/store/{word(32, '0123456789abcdfghijklmnpqrsvwxyz')}-python3-3.11.6"
        for _ in range(5)
    )
    t["ssh_pub"] = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAI" + b64(32)[:43] + " alice@laptop"
    t["ssh_fpr"] = "ED25519 key fingerprint is SHA256:" + b64(32).rstrip("=") + "."
    t["responses"] = json.dumps(
        {"id": "chatcmpl-" + word(29), "fp": "fp_" + h(10), "msg": "msg_01" + word(22)}
    )
    t["pk_live"] = "pk_live_" + word(99)
    t["integrity_html"] = f'<script src="https://cdn.x/y.js" integrity="sha384-{b64(48)}"></script>'
    t["wheel_record"] = "\n".join(
        f"pkg/m{i}.py,sha256={base64.urlsafe_b64encode(hashlib.sha256(str(i).encode()).digest()).decode().rstrip('=')},1234"
        for i in range(10)
    )
    t["bcrypt"] = "alice:$2b$12$" + word(53, B62 + "./")
    t["shadow"] = f"root:$6${word(16)}${word(86, B62 + './')}:19000:0:99999:7:::"
    t["settings"] = "MAX_NEW_TOKENS=1000000\nPASSWORD_RESET_TIMEOUT=259200\nAPI_TOKEN_TTL=3600"
    t["templates"] = (
        "DB_PASSWORD=\nAPI_KEY=your-api-key-here\nJWT_SECRET=${JWT_SECRET}\ntoken: ${{ secrets.GITHUB_TOKEN }}"
    )
    t["near_misses"] = "pplx-7b-online xai-sdk fw_version hf_hub_download r8_register"
    t["tokenizer"] = 'AutoTokenizer.from_pretrained("meta-llama/Llama-3.1-8B-Instruct")'
    return t


@pytest.mark.parametrize("text", [*_benign().values(), *NEAR_KEYS])
def test_the_hunters_benign_texts_and_slugs_paths_diffs_and_flags_near_keys_stay(text):
    assert Redactor().text(text) == (text, 0)


def test_random_base64_with_slashes_and_pluses_stays():
    rng = random.Random(7)
    red = Redactor()
    for encode in (base64.b64encode, base64.urlsafe_b64encode, base64.encodebytes):
        for _ in range(40):
            text = encode(rng.randbytes(6000)).decode()
            assert red.text(text) == (text, 0)


# -- the batch screen and `process` -------------------------------------------------------------
def _found_lines() -> list[str]:
    ex = example_secrets(5)
    return [
        f"git clone https://{ex['github_pat'][0]}@github.com/acme/app.git",
        f"-{ex['anthropic_key'][0]}\n+{ex['openai_key'][0]}",
        f"/root/.cache/huggingface/stored_tokens/{ex['huggingface_token'][0]}",
        f"?body=%7B%22key%22%3A%20%22{ex['google_api_key'][0]}%22%7D",
        f"https://app.example.com/reset-password/{ex['jwt'][0]}",
        PY_KEY,
        PUTTY_KEY,
        AWS_PROMPTS[0],
        *(v for k, v in PAIRS.items() if k != "in_json"),  # in a tool's arguments: JSON twice
    ]


def test_the_screen_flags_every_text_these_rules_redact():
    assert_screen_flags(_found_lines(), PAIRS_KEPT + NEAR_KEYS, seed=1207)


def test_pass1_redacts_these_shapes_as_redacting_every_record_whole(tmp_path):
    lines = _found_lines()
    assert_pass1_redacts_as_whole(
        tmp_path,
        lines,
        ["Vq94ufIfBKKF0RDt0X", AWS_SECRET, PEM_LINES[3], example_secrets(5)["jwt"][0]],
    )
