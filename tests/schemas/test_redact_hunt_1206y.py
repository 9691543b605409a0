"""Gaps a secret-redaction hunt found (2026-12-06, y), each through the path that let it
through, with real Redactors, the real batch screen and the real CLI:

1. a credential option written as list items (`["server", "--token", "V"]`, a registry
   login's `"-p", "V"`, a Claude Desktop config's `"args": [..., "--api-key", "V"]`) was
   kept, the same option with spaces redacted: the rules took only blanks after it;
2. `--token=V`, `--token="V"`, `--secret=V` were kept (`--api-key=V`, `--password=V`
   were not): only some names read `=` after an option;
3. values of credential options in a sandbox's command were no values handed over
   (`env_secrets`: the real MCP server's case is `tests/sandboxes/test_mcp_redact_1206y.py`);
4. a pre-signed S3 or GCS URL kept its STS token and its signature (`X-Amz-Security-Token`,
   `X-Amz-Signature`, `X-Goog-Signature`, `X-Goog-Credential`), also as a header;
5. `redact --check` reported `0 secret(s) found` under rules that redact nothing
   (`enabled: false`, `allow: [".*"]`);
6. a web page's key split over inline elements reached the store in pieces, one
   `StaticText` line each (Chromium's case: `tests/sandboxes/test_web_redact_1206y.py`);
7. a YAML tag (`password: !secret V`) was read as the value and the value kept.
"""

from __future__ import annotations

import json
import subprocess

import pyarrow as pa
import pytest
from worldtrace.schemas.redact import Redactor, env_secrets, find_secrets
from worldtrace.schemas.redact_rules import RedactConfig

from ..conftest import VENV_BIN
from .test_redact_hunt_1206c import assert_pass1_redacts_as_whole
from .test_redact_review_1203d import assert_screen_flags

V = "Xq9vLm2pRt9sKw4zB7"
BRAVE = "BSAq7vLm2pRt9sKw4zB7Yx3"
GHP = "ghp_Zx8Kq2Lm5Np7Rt1Vw3Yb6Cd9Fg4Hj0Ks2Mn5"


def redacted(text: str, red: Redactor | None = None) -> str:
    return (red or Redactor()).text(text)[0]


# -- 1. credential options as list items ---------------------------------------------
LIST_ITEMS = [
    (f'{{"command": ["server", "--token", "{V}"]}}', "token"),
    (f'["docker", "login", "-p", "{V}", "registry.local"]', "password"),
    (f'["docker","login","--password","{V}","registry.local"]', "password"),
    (f'subprocess.run(["mysql", "--password", "{V}"])', "password"),
    (f"subprocess.run(['mysql', '--password', '{V}'])", "password"),
    (f"subprocess.run(['mysql', '-p{V}', 'app'])", "password"),
    (f'{{"command": "curl", "args": ["-u", "alice:{V}", "http://127.0.0.1/"]}}', "password"),
    (f'{{"args": ["-u", "alice:{V}", "http://127.0.0.1/"]}}', "password"),
    (f'["curl","--user","alice:{V}","http://127.0.0.1/"]', "password"),
    (f'{{"command": ["server", "--secret", "{V}"]}}', "secret_key"),
    (f"['server', '--client-secret', '{V}']", "secret_key"),
    (
        '{"mcpServers": {"brave": {"command": "npx", "args": ["-y", "brave-search-mcp", '
        f'"--api-key", "{BRAVE}"]}}}}',
        "api_key",
    ),
    ('{"db": {"command": "pg-mcp", "args": ["--password", "Pg9wLm2pRt9sKw4zB7Yx3"]}}', "password"),
]


@pytest.mark.parametrize(("text", "kind"), LIST_ITEMS)
def test_a_credential_option_written_as_list_items_is_redacted(text, kind):
    """JSON, a Python list's repr and compact JSON: the option's closing quote, a comma,
    blanks and the value's opening quote between them; the value runs to its quote."""
    out = redacted(text)
    assert V not in out and BRAVE not in out and "Pg9wLm2p" not in out, out
    assert f"<secret:{kind}>" in out, out
    inner = json.dumps({"arguments_json": text})  # a tool call's arguments, in a JSON string
    assert V not in redacted(inner) and BRAVE not in redacted(inner), inner


def test_list_items_redact_as_the_spaced_command_does():
    """The placeholder takes the value only: quotes, commas and the rest stay."""
    assert redacted(f'["server", "--token", "{V}", "--port", "8080"]') == (
        '["server", "--token", "<secret:token>", "--port", "8080"]'
    )
    assert redacted(f"['docker', 'login', '-p', '{V}', 'r.local']") == (
        "['docker', 'login', '-p', '<secret:password>', 'r.local']"
    )


LIST_KEPT = [
    '["server", "--token", "--verbose"]',
    '["server", "--token", "$GITHUB_TOKEN"]',
    '["server", "--api-key", "${API_KEY}"]',
    '["server", "--password-file", "/run/secrets/pw"]',
    '["server", "--token", "tok"]',
    '["docker", "run", "--name", "mysql", "-p", "3306:3306", "mysql:8"]',
    '["mysql", "-p", "app"]',
    '["docker", "run", "-u", "1000:1000", "img"]',
    '["docker", "exec", "-u", "www-data:www-data", "c", "ls"]',
    '{"args": ["-u", "root:root"]}',
    '["train.py", "--eos-token", "</s>", "--max-tokens", "4096"]',
    '["server", "--token", "your-token-here"]',
    '["python", "-u", "serve.py"]',
]


@pytest.mark.parametrize("text", LIST_KEPT)
def test_list_items_that_hold_no_credential_are_kept(text):
    assert redacted(text) == text


# -- 2. `=` after every credential option ---------------------------------------------
EQUALS = [
    (f"mcp-server-x --token={V}", "token"),
    (f'mcp-server-x --token="{V}"', "token"),
    (f"mcp-server-x --token='{V}'", "token"),
    (f"mcp-server-x --secret={V}", "secret_key"),
    (f"mcp-server-x --client-secret={V}", "secret_key"),
    (f"mcp-server-x --bot-token={V} --port 8080", "token"),
    (f'["server", "--token={V}"]', "token"),
]


@pytest.mark.parametrize(("text", "kind"), EQUALS)
def test_every_credential_option_reads_its_value_after_equals(text, kind):
    out = redacted(text)
    assert V not in out and f"<secret:{kind}>" in out, out


@pytest.mark.parametrize(
    "text",
    [
        "--token=$TOKEN",
        "--token=${{ secrets.GH_TOKEN }}",
        "--token-file=/run/secrets/token",
        "--max-tokens=4096",
        "--eos-token=</s>",
        "--secret=changeme",
        "--token=",
        "--token= value",
    ],
)
def test_an_option_with_equals_and_no_credential_is_kept(text):
    assert redacted(text) == text


# -- 3. a sandbox's command: values of credential options are handed over ------------
def test_credential_option_values_of_a_command_are_values_handed_over():
    """Only those: the script, ports, paths, file names and other options' values stay
    ordinary text (each would be cut out of every observation that shows it)."""
    from worldtrace.sandboxes.mcp import MCPConfig

    cfg = MCPConfig(
        command=(
            "{python}", "srv.py", "--api-key", "Kq7vLm2pRt9sKw4zB7Yx", "--token=Tz8wPn3qSu0tLx5aC8Zy",
            "--port", "8080", "--db", "/tmp/app.db", "--password-file", "/run/pw",
            "--key-file", "./server.key", "--auth-token", "$MY_TOKEN", "--secret", "--verbose",
            "--client-secret", "short", "--private-key", "id_rsa.pem", "--repository", "{workdir}",
        )
    )  # fmt: skip

    class Sandbox:
        config = cfg

    assert env_secrets(Sandbox()) == ["Kq7vLm2pRt9sKw4zB7Yx", "Tz8wPn3qSu0tLx5aC8Zy"]
    red = Redactor(literals=env_secrets(Sandbox()))
    said = "authenticated with key Kq7vLm2pRt9sKw4zB7Yx ok; port 8080, /tmp/app.db"
    assert (
        red.text(said)[0] == "authenticated with key <secret:env_value> ok; port 8080, /tmp/app.db"
    )


# -- 4. pre-signed URLs ------------------------------------------------------------------
STS = (
    "IQoJb3JpZ2luX2VjriGp%2F58WAm%2BdX3a5IDnOdcdbWB2dC4%2FDSDC6Lc1mxLpQ2yMK%2FYe9FZ1wUVl4nuYV"
    "%2Bd8fNYvvDbzDZST6IaXqA2h9Uz0%2BT1SaQ6dDwxlGejkc5bJFIoxSLivuGvIL6P%2F8odNXR1yHnGA3cCcY"
    "seu52C5CdYP2hMqBgNjjNMu1GqbeB6veWzSmA3y%2FnXL%2FcPZKcuzPrR2BImWS%2BEifkrvvBIQGVRRoLE%3D%3D"
)
STS_PLAIN = STS.replace("%2F", "/").replace("%2B", "+").replace("%3D", "=")
AMZ_SIG = "37caf3511061fea83537c7fec5779ec6e8af362100fac96c5400c41c842e9011"
GOOG_SIG = AMZ_SIG * 8
S3_URL = (
    "https://bucket.s3.us-east-1.amazonaws.com/report.csv?X-Amz-Algorithm=AWS4-HMAC-SHA256"
    "&X-Amz-Credential=ASIAQWERTYUIOPASDFGH%2F20250101%2Fus-east-1%2Fs3%2Faws4_request"
    f"&X-Amz-Date=20250101T000000Z&X-Amz-Expires=3600&X-Amz-Security-Token={STS}"
    f"&X-Amz-SignedHeaders=host&X-Amz-Signature={AMZ_SIG}"
)
GCS_URL = (
    "https://storage.googleapis.com/b/o?X-Goog-Algorithm=GOOG4-RSA-SHA256"
    "&X-Goog-Credential=sa%40proj.iam.gserviceaccount.com%2F20250101%2Fauto%2Fstorage"
    "%2Fgoog4_request&X-Goog-Date=20250101T000000Z&X-Goog-Expires=900"
    f"&X-Goog-SignedHeaders=host&X-Goog-Signature={GOOG_SIG}"
)
PRESIGNED_SECRETS = (STS[:40], STS_PLAIN[:40], STS[-60:], AMZ_SIG, GOOG_SIG[:64], "sa%40proj")


def test_a_presigned_s3_url_keeps_no_credential():
    out = redacted(S3_URL)
    for secret in PRESIGNED_SECRETS:
        assert secret not in out, secret
    assert out == (
        "https://bucket.s3.us-east-1.amazonaws.com/report.csv?X-Amz-Algorithm=AWS4-HMAC-SHA256"
        "&X-Amz-Credential=<secret:aws_access_key>%2F20250101%2Fus-east-1%2Fs3%2Faws4_request"
        "&X-Amz-Date=20250101T000000Z&X-Amz-Expires=3600"
        "&X-Amz-Security-Token=<secret:aws_session_token>"
        "&X-Amz-SignedHeaders=host&X-Amz-Signature=<secret:url_signature>"
    )


def test_a_presigned_gcs_url_keeps_no_credential():
    out = redacted(GCS_URL)
    assert GOOG_SIG[:64] not in out and "sa%40proj" not in out, out
    assert "X-Goog-Credential=<secret:gcs_credential>%2F20250101%2Fauto%2Fstorage" in out, out
    assert out.endswith("&X-Goog-SignedHeaders=host&X-Goog-Signature=<secret:url_signature>")


@pytest.mark.parametrize(
    "text",
    [
        f"X-Amz-Security-Token: {STS_PLAIN}",
        f"x-amz-security-token: {STS_PLAIN}",
        f'{{"X-Amz-Security-Token": "{STS_PLAIN}"}}',
        f"{{'X-Amz-Security-Token': '{STS_PLAIN}', 'x-amz-date': '20250101T000000Z'}}",
        "https://b.s3.amazonaws.com/f.txt?X-Amz-Security-Token=IQoJb3JpZ2luX2VjEJr%2F%2F%2F%2F"
        "%2F%2F%2F%2F%2F%2FwEaCXVzLWVhc3QtMSJHMEUCIQDx&X-Amz-Signature=3f1c",
        json.dumps({"url": S3_URL}),
        json.dumps({"url": GCS_URL}),
    ],
)
def test_a_security_token_or_signature_is_redacted_as_header_and_parameter(text):
    out = redacted(text)
    for secret in (*PRESIGNED_SECRETS, "IQoJb3JpZ2luX2VjEJr"):
        assert secret not in out, out
    assert "<secret:" in out


@pytest.mark.parametrize(
    "text",
    [
        "Pass the X-Amz-Security-Token header with temporary credentials.",
        "X-Amz-Signature=<signature>",
        "X-Amz-Security-Token=$AWS_SESSION_TOKEN",
        "the X-Goog-Signature query parameter",
        "X-Amz-SignedHeaders=host;x-amz-date&X-Amz-Date=20250101T000000Z",
    ],
)
def test_names_of_presigned_parameters_without_a_value_are_kept(text):
    assert redacted(text) == text


def test_the_screen_flags_and_pass1_redacts_every_new_shape(tmp_path):
    """`process` redacts whole only what its batch screen flags: each new shape of items
    1, 2, 4, 6 and 7, among random neighbours."""
    lines = [
        *(t for t, _ in LIST_ITEMS[:6]),
        *(t for t, _ in EQUALS[:4]),
        S3_URL,
        GCS_URL,
        f"X-Amz-Security-Token: {STS_PLAIN}",
        f"  password: !secret {V}",
        AXTREE,
    ]
    kept = [*LIST_KEPT[:4], "ok", PROSE_TREE]
    assert_screen_flags(lines, kept, seed=12061)
    assert_pass1_redacts_as_whole(tmp_path, lines, (V, STS[:40], AMZ_SIG, *AX_PIECES))


# -- 5. `redact --check` under rules that redact nothing -----------------------------
def check(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(VENV_BIN / "worldtrace"), "redact", "--check", *args],
        env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("rules", "said"),
    [
        ("enabled: false\n", "enabled: false"),
        ('allow: [".*"]\n', "allow '.*'"),
        ("allow: ['[A-Za-z0-9_]+']\nbuiltin: false\ndetect_secrets: []\n", "builtin: false"),
    ],
)
@pytest.mark.parametrize("by", ["env", "option"])
def test_check_audits_with_the_rules_on_whatever_the_config_turns_off(
    tmp_path, wt_env, rules, said, by
):
    """The hunt's repro: `WORLDTRACE_REDACT_CONFIG` naming `enabled: false` or `allow:
    [".*"]` made the audit report `0 secret(s) found`, exit 0, on a file holding a token.
    The audit certifies the data whatever collection used: it checks with the built-in
    rules and the default plugins, without an allow entry that keeps keys of known
    shape, and says so in one line."""
    rules_file = tmp_path / "rules.yaml"
    rules_file.write_text(rules)
    log = tmp_path / "s.log"
    log.write_text(f"x {GHP}\n")
    if by == "env":
        r = check({**wt_env, "WORLDTRACE_REDACT_CONFIG": str(rules_file)}, str(log))
    else:
        r = check(wt_env, "--config", str(rules_file), str(log))
    assert r.returncode == 1, r.stdout + r.stderr
    assert f"{log}: line 1: text: github_token" in r.stdout
    assert GHP[4:] not in r.stdout + r.stderr
    [note] = [line for line in r.stderr.splitlines() if line.startswith("note:")]
    assert said in note and str(rules_file) in note, note
    assert "1 secret(s) found in 1 file(s)" in r.stderr


def test_check_keeps_an_allow_entry_for_a_known_example(tmp_path, wt_env):
    """An allow entry that keeps one known value (AWS's documented example key) is what
    `allow` is for: the audit honours it, and says nothing."""
    rules_file = tmp_path / "rules.yaml"
    rules_file.write_text("allow: ['AKIAIOSFODNN7EXAMPLE']\n")
    log = tmp_path / "doc.log"
    log.write_text("aws_access_key_id = AKIAIOSFODNN7EXAMPLE\n")
    r = check({**wt_env, "WORLDTRACE_REDACT_CONFIG": str(rules_file)}, str(log))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "note:" not in r.stderr
    assert "0 secret(s) found in 1 file(s)" in r.stderr


# -- 6. a key split over inline elements of a web page -------------------------------
AXTREE = (
    "## Accessibility tree\n"
    "RootWebArea 'Setup', focused, url='http://127.0.0.1:8765/index.html'\n"
    "\t[4] heading 'Configure'\n"
    "\t[6] paragraph ''\n"
    "\t\tStaticText 'Search results:'\n"
    "\t\t[7] mark ''\n"
    "\t\t\tStaticText 'sk-ant-'\n"
    "\t\tStaticText 'api03-Rz5Xq9vLm2pRt9sKw4zB7Ab3dE9xYfGh1jKlMn0pQ'\n"
    "\t[9] code ''\n"
    "\t\tStaticText 'export'\n"
    "\t\tStaticText 'GITHUB_TOKEN'\n"
    "\t\tStaticText '='\n"
    "\t\tStaticText 'ghp_Zx8Kq2Lm5Np7'\n"
    "\t\tStaticText 'Rt1Vw3Yb6Cd9Fg4Hj0Ks2Mn5'\n"
    "\t[14] paragraph ''\n"
    "\t\tStaticText 'Key:'\n"
    "\t\tStaticText 'sk-proj-Ab12Cd34Ef56Gh78'\n"
    "\t\tStaticText 'Ij90Kl12Mn34Op56Qr78St90Uv12Wx34'\n"
    "\t[17] paragraph ''\n"
    "\t\tStaticText 'AWS:'\n"
    "\t\tStaticText 'AKIA'\n"
    "\t\tStaticText 'QWERTYUIOPASDFGH'\n"
    "\t[20] paragraph ''\n"
    "\t\tStaticText 'Your key'\n"
    "\t\t[21] strong ''\n"
    "\t\t\tStaticText 'ghp_Wq2Lm5'\n"
    "\t\tStaticText 'Np7Rt1Vw3Yb6Cd9Fg4Hj0Ks2Mn5Zx8K'\n"
    "\t[26] link 'next', url='http://127.0.0.1:8765/page2.html'"
)
AX_PIECES = (
    "api03-Rz5Xq9", "ghp_Zx8Kq2Lm5Np7", "Rt1Vw3Yb6Cd9", "sk-proj-Ab12Cd34", "Ij90Kl12Mn34",
    "QWERTYUIOPASDFGH", "ghp_Wq2Lm5", "Np7Rt1Vw3Yb6Cd9Fg4Hj0Ks2Mn5Zx8K",
)  # fmt: skip


def test_a_key_split_over_inline_elements_is_redacted_piece_by_piece():
    """Each piece of a key the page shows split (syntax highlighting, a search hit's
    `<mark>`, `<b>` and `<i>`) becomes a placeholder on its own line: the tree keeps its
    lines, and no piece is left."""
    out, n = Redactor().text(AXTREE)
    for piece in AX_PIECES:
        assert piece not in out, piece
    lines = out.splitlines()
    assert len(lines) == len(AXTREE.splitlines())
    assert "\t\t\tStaticText '<secret:anthropic_key>'" in lines  # `sk-ant-` in the mark
    assert lines.count("\t\tStaticText '<secret:github_token>'") == 3  # 2 + 1 after `strong`
    assert "\t\tStaticText 'AKIA'" not in lines and "\t\tStaticText 'AWS:'" in lines
    assert "\t\tStaticText 'Your key'" in lines and "\t\tStaticText 'Key:'" in lines
    assert n == 10  # 5 keys, 2 pieces each
    assert Redactor().text(out) == (out, 0)  # redacting again changes nothing


def test_check_names_every_piece_of_a_split_key(tmp_path, wt_env):
    page = tmp_path / "obs.jsonl"
    page.write_text(json.dumps({"id": "w1", "observation": AXTREE}) + "\n")
    found = list(find_secrets({"observation": AXTREE}))
    assert ("observation", "anthropic_key") in found and len(found) == 10
    r = check(wt_env, str(page))
    assert r.returncode == 1 and "10 secret(s) found" in r.stderr, r.stdout + r.stderr


PROSE_TREE = (
    "RootWebArea 'Docs', focused\n"
    "\t[3] paragraph ''\n"
    "\t\tStaticText 'Set'\n"
    "\t\t[4] code ''\n"
    "\t\t\tStaticText 'api_key'\n"
    "\t\tStaticText 'to your key, then call'\n"
    "\t\t[5] code ''\n"
    "\t\t\tStaticText 'client.token'\n"
    "\t\tStaticText '(). The'\n"
    "\t\t[6] emphasis ''\n"
    "\t\t\tStaticText 'password'\n"
    "\t\tStaticText 'field is optional; see'\n"
    "\t\t[7] link 'sk-learn docs', url='http://127.0.0.1/docs'\n"
    "\t\tStaticText 'and AKIA'\n"
    "\t[8] paragraph ''\n"
    "\t\tStaticText 'sha256:'\n"
    "\t\tStaticText '3f1c9e5a7b2d4f6e8a0c1b3d5f7e9a1c3b5d7f9e1a3c5b7d9f1e3a5c7b9d1f3e'\n"
    "\t\tStaticText 'commit'\n"
    "\t\tStaticText '9fceb02d0ae598e95dc970b74767f19372d61af8'\n"
)


def test_prose_over_inline_elements_is_kept():
    """Words and names split by code and emphasis, sums and commits: no piece joined
    with its neighbours reads as a secret."""
    assert Redactor().text(PROSE_TREE) == (PROSE_TREE, 0)


@pytest.mark.parametrize(
    ("pieces", "out"),
    [
        # a whole key in its element, then words: the words stay (read joined, the key's
        # rule runs on into them: `ghp_…is`, `secr3t.`)
        ((GHP, "is invalid"), ("<secret:github_token>", "is invalid")),
        ((GHP, "now"), ("<secret:github_token>", "now")),
        (("password=secr3t", "."), ("password=<secret:password>", ".")),
        (("ghp_Zx8Kq2Lm5Np7", "Rt1Vw3Yb6Cd9Fg4Hj0Ks2Mn5", "is"),
         ("<secret:github_token>", "<secret:github_token>", "is")),
        # a key's tail in the next element, though the first piece is one to the rules
        (("sk-proj-Ab12Cd34Ef56Gh78Ij90", "Kl12Mn34Op56Qr78"),
         ("<secret:openai_key>", "<secret:openai_key>")),
        # a value whose name is in the element before
        (("Password:", "Hn4$kQ9!wLp2"), ("Password:", "<secret:password>")),
    ],
)  # fmt: skip
def test_pieces_of_one_paragraph_are_read_joined(pieces, out):
    def tree(texts):
        lines = "".join(
            f"\t\t[{9 + i}] code ''\n\t\t\tStaticText '{t}'\n" for i, t in enumerate(texts)
        )
        return f"\t[8] paragraph ''\n{lines}\t[20] paragraph ''\n\t\tStaticText 'next'"

    assert Redactor().text(tree(pieces))[0] == tree(out)


def test_the_screen_flags_a_record_whose_tree_holds_a_split_key():
    red = Redactor()
    batch = pa.RecordBatch.from_pylist(
        [{"obs": PROSE_TREE}, {"obs": AXTREE}, {"obs": PROSE_TREE.replace("Docs", "Other")}]
    )
    assert red.screen.rows(batch).tolist() == [False, True, False]


# -- 7. a YAML tag before the value ---------------------------------------------------
@pytest.mark.parametrize(
    ("text", "out"),
    [
        (f"  password: !secret {V}", "  password: !secret <secret:password>"),
        (f"api_key: !!str {V}", "api_key: !!str <secret:api_key>"),
        (f"db_password: !vault {V}  # x", "db_password: !vault <secret:password>  # x"),
        ("password: !secret wifi_password", "password: !secret wifi_password"),
        ("password: !secret", "password: !secret"),
        ("password: !ENV ${DB_PASSWORD}", "password: !ENV ${DB_PASSWORD}"),
    ],
)
def test_a_yaml_tag_before_a_value_is_no_value(text, out):
    assert redacted(text) == out


def test_the_audit_rules_are_the_active_ones_everywhere_else():
    """Collection with `enabled: false` redacts nothing (what the setting is for); only
    the audit reads with the rules on."""
    off = Redactor(RedactConfig(enabled=False))
    assert off.text(f"x {GHP}") == (f"x {GHP}", 0)
