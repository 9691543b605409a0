"""Secrets the 2026-12-05 hunt (1205c) found kept: a key right after a `\\uXXXX` (or
`\\b`, `\\f`) JSON escape in `state_json` / `arguments_json`; an unquoted value holding
brackets, commas or `;` in a dotenv or shell assignment line; the secret key and session
token of `aws ... --output table`. Real detect-secrets, the rules as shipped."""

from __future__ import annotations

import json
import random
import string

import pytest
from worldtrace.collectors.synthetic import build
from worldtrace.schemas.records import Action, Observation
from worldtrace.schemas.redact import Redactor, redact_trajectory

from .test_redact_review_1203c import assert_pass1_redacts_as_whole
from .test_redact_review_1203d import assert_screen_flags

rng = random.Random(1205)
B62 = string.ascii_letters + string.digits


def _rand(n: int, alphabet: str = B62) -> str:
    return "".join(rng.choice(alphabet) for _ in range(n))


# -- 1: a key after a JSON escape ---------------------------------------------------------------
# keys of the rules anchored at the key's start (no key character before it), which
# detect-secrets does not find anywhere else
ANCHORED = {
    "openai_key": "sk-proj-F6DmEvD5CqiSJKRLnCdgfu9R3HBIzCNSkVt5o4kG5FoeC2Wd",
    "openai_legacy": "sk-" + _rand(40),
    "anthropic_key": "sk-ant-api03-" + _rand(60, B62 + "_-"),
    "google_api_key": "AIzaSyA1b2C3d4E5f6G7h8I9j0KlMnOpQrStUvW",
    "huggingface_token": "hf_" + "aBcDeFgHiJkLmNoPqRsTuVwXyZaBcDeFgH",
    "npm_token": "npm_" + _rand(36),
    "digitalocean_token": "dop_v1_" + _rand(64, "0123456789abcdef"),
    "stripe_test": "sk_test_" + _rand(40),
    "slack_app": "xapp-1-" + _rand(30),
    "google_oauth_token": "ya29.a0" + _rand(60),
    "docker_token": "dckr_pat_" + _rand(27),
    "shopify_token": "shpat_" + _rand(32, "0123456789abcdef"),
    "github_pat": "github_pat_11" + _rand(20) + "_" + _rand(59),
}
ESCAPES = [
    r"\u201c",
    r"\u2192",
    r"\u0007",
    r"\u0000",
    r"\u00C9",
    r"\u00e9",
    r"\u201C",
    r"\b",
    r"\f",
]


@pytest.mark.parametrize("escape", ESCAPES)
@pytest.mark.parametrize("kind", sorted(ANCHORED))
def test_a_key_right_after_a_json_escape_is_redacted(kind, escape):
    """`_start` took only `\\n`, `\\r`, `\\t` for a boundary; `\\uXXXX` ends in a hex
    digit, `\\b` and `\\f` in a letter: key characters. The JSON stays valid."""
    key = ANCHORED[kind]
    text = '{"raw": "x ' + escape + key + r'\u201d\r\n$ "}'
    out, n = Redactor().text(text)
    assert n == 1 and key not in out and key[8:20] not in out, out
    assert json.loads(out)["raw"].startswith("x " + json.loads(f'"{escape}"') + "<secret:")


def test_the_hunt_s_terminal_records_keep_no_key_in_state_or_arguments():
    """The hunt's job (r1): `printf` a key between curly quotes, `echo "→KEY"`; the
    observation text was redacted, `state_json` and `arguments_json` were not."""
    openai, google = ANCHORED["openai_key"], ANCHORED["google_api_key"]
    typed = [
        "printf '\\342\\200\\234%s\\342\\200\\235\\n' " + openai + "\n",
        'echo "\u2192' + google + '"\n',
    ]
    shown = [f"\u201c{openai}\u201d", f"\u2192{google}"]
    pairs = [
        (
            Action("keystrokes", keys, arguments_json=json.dumps({"keystrokes": keys})),
            Observation(text, state_json=json.dumps({"raw": f"$ {keys}\r\n{text}\r\n$ "})),
        )
        for keys, text in zip(typed, shown, strict=True)
    ]
    t = redact_trajectory(build("terminal", pairs))
    every = json.dumps([[x.action.text, x.action.arguments_json, x.observation.text,
                         x.observation.state_json] for x in t.turns])  # fmt: skip
    assert openai[8:20] not in every and google[4:20] not in every, every
    assert r"\u2192<secret:google_api_key>" in t.turns[1].observation.state_json
    assert r"\u2192<secret:google_api_key>" in t.turns[1].action.arguments_json
    for x in t.turns:
        json.loads(x.observation.state_json), json.loads(x.action.arguments_json)


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        (r'{"k": "ls\ncurl -u bob:s3cretPw9 http://x"}', "s3cretPw9"),
        (r'{"k": "\u2192curl -u bob:s3cretPw9 http://x"}', "s3cretPw9"),
        (r'{"k": "ls\nmysql -uroot -ps3cretPw9 db"}', "s3cretPw9"),
        (r'{"k": "x\nTOKEN=abcdef123456"}', "abcdef123456"),
        (r'{"k": "machine h\nlogin bob password s3cretPw9"}', "s3cretPw9"),
        (r'{"h": "x\nBearer abcdef1234567890abcdef"}', "abcdef1234567890abcdef"),
    ],
)
def test_a_command_or_name_a_rule_reads_as_a_word_starts_after_a_json_escape(text, secret):
    """The same cause in the rules that refuse a word character before a command or a
    name (`curl`, `mysql`, `login`, a bare `TOKEN`, `Bearer`): after `\\n` in JSON."""
    out, n = Redactor().text(text)
    assert n == 1 and secret not in out, out


@pytest.mark.parametrize(
    "text",
    [
        "u201csk-proj-F6DmEvD5CqiSJKRLnCdgfu9R3HBIzCNSkVt5o4kG5FoeC2Wd",  # no backslash
        "deadbeefAIzaSyA1b2C3d4E5f6G7h8I9j0KlMnOpQrStUvW",
        r"\u201x" + "sk-proj-F6DmEvD5CqiSJKRLnCdgfu9R3HBIzCNSkVt5o4kG5FoeC2Wd",  # 3 hex digits
        "task-runner-" + "a" * 40,
        "xcurl -u bob:s3cretPw9 http://x",
        "myBearer abcdef1234567890abcdef",
    ],
)
def test_a_hex_run_that_is_no_escape_is_no_boundary(text):
    assert Redactor().text(text) == (text, 0)


def test_a_key_cut_after_a_json_escape_is_taken_by_the_cut_tail():
    """`Redactor.cut_tail` takes a key's start where `_start` does."""
    out, n = Redactor().cut_tail(r'{"raw": "x \u201csk-proj-F6Dm')
    assert (out, n) == (r'{"raw": "x \u201c<secret:openai_key>', 1)
    assert Redactor().cut_tail("x u201csk-proj-F6Dm") == ("x u201csk-proj-F6Dm", 0)


# -- 2: an unquoted value in a dotenv or shell assignment line ----------------------------------
HUNT_ENV = {
    "DB_PASSWORD": "k3vQ9xZp(2mT7wR4s9aB",
    "SECRET_KEY": "8)b6&dk$i1c4o@tyxd4k!_55$yl$^04ca^*)_kr8)bc1gprzcw",
    "REDIS_PASSWORD": "Xy7#pQ2,LmN8vB4k",
    "API_TOKEN": "Ab3dE9xY;fGh1jKlMn0pQr7",
}


def _pieces(value: str, n: int = 6) -> list[str]:
    return [value[i : i + n] for i in range(len(value) - n + 1)]


def test_the_hunt_s_env_file_is_redacted_whole():
    """`cat .env` (r2): each value up to the end of its line was kept whole or after a
    `;`, since `_value` stops at brackets, commas and shell operators."""
    env = "".join(f"{k}={v}\n" for k, v in HUNT_ENV.items())
    out, n = Redactor().text(env)
    assert n == 4, out
    assert out == (
        "DB_PASSWORD=<secret:password>\nSECRET_KEY=<secret:secret_key>\n"
        "REDIS_PASSWORD=<secret:password>\nAPI_TOKEN=<secret:token>\n"
    )
    raw = json.dumps({"raw": "$ cat .env\r\n" + env.replace("\n", "\r\n") + "$ "})
    out, n = Redactor().text(raw)
    assert n == 4 and not any(p in out for v in HUNT_ENV.values() for p in _pieces(v)), out
    assert json.loads(out)["raw"].endswith("API_TOKEN=<secret:token>\r\n$ ")


@pytest.mark.parametrize(
    "form",
    [
        "DB_PASSWORD={}",
        "  DB_PASSWORD={}  # the db",
        "export DB_PASSWORD={}",
        "root@box:~# export DB_PASSWORD={}",
        "a=1\nDB_PASSWORD={}\nb=2",
        "JSON",
    ],
)
def test_random_passwords_with_symbols_after_an_assignment_are_redacted_whole(form):
    """Passwords of letters, digits and the symbols people put in them (the hunt: 696 of
    812 random 20-character ones kept whole after `DB_PASSWORD=`), with a digit: none
    left, not even 6 characters of one. Starting with a letter or a digit (a value led by a quote, `[`,
    `{`, `<`, `/` or `$NAME` reads as something else: docs/security.md)."""
    r = random.Random(f"1205c-{form}")
    symbols = "!@#%^&*()-_=+[],.;:?~|"
    missed = []
    for _ in range(300):
        pw = r.choice(B62) + "".join(r.choice(B62 + symbols) for _ in range(18))
        at = r.randrange(1, 20)
        pw = pw[:at] + r.choice(string.digits) + pw[at:]  # as password rules ask
        if form == "JSON":
            text = json.dumps(
                {"keystrokes": f"ls\nDB_PASSWORD={pw}\n", "raw": f"\r\nDB_PASSWORD={pw}\r\n"}
            )
        else:
            text = form.format(pw)
        out, n = Redactor().text(text)
        if not n or any(p in out for p in _pieces(pw)):
            missed.append((pw, out))
        if form == "JSON":
            json.loads(out)
    assert missed == []


@pytest.mark.parametrize(
    "text",
    [
        "f(password=pw2)",
        "    conn = connect(password=pw2, host=h)",
        "DB_PASSWORD=get_password()",
        "DB_PASSWORD=hash(pw2)",
        "DB_PASSWORD=os.environ['DB_PASSWORD']",
        'API_KEY=os.getenv("API_KEY", "")',
        "SECRET_KEY=settings.SECRET_KEY,",
        "API_TOKEN=getToken(userName)",
        "TOKEN=token(1),",
        "MASTER_KEY=keys[i]",
        "DB_PASSWORD=admin_123",
        "DB_PASSWORD=${DB_PASSWORD:-postgres}",
        "TOKEN=$(cat /run/secrets/token)",
        "export GITHUB_TOKEN=$(gh auth token)",
        "SECRET_KEY=`cat /etc/secret`",
        "MYSQL_PASSWORD=$MYSQL_ROOT_PASSWORD;",
        "DB_PASSWORD=$DB_PASS;echo",
        "SECRET_KEY=<your-secret-key>",
        "API_TOKEN=[REDACTED]",
        "OPENAI_API_KEY={{ openai_api_key }}",
        "DB_PASSWORD=%(db_password)s",
        "JWT_SECRET=${JWT_SECRET:?required}",
        "TOKEN=$(shell cat token.txt)",
        "ENCRYPTION_KEY=${ENCRYPTION_KEY:-$(openssl rand -base64 32)}",
        "DB_PASSWORD=/run/secrets/db_password",
        "PRIVATE_KEY=~/.ssh/id_rsa",
        "REDIS_PASSWORD= redis-server",
        "DB_PASSWORD=postgres",
        "DB_PASSWORD=***",
        "PWD=/root/a(1)",
        "x DB_PASSWORD=k3v(Q9xZp2m",
        "db_password=k3v(Q9xZp2m",
    ],
)
def test_code_templates_and_other_lines_near_these_names_are_kept_as_before(text):
    """The line form is a dotenv or shell assignment: a name in capitals at a line's
    start or after `export`, an unquoted value that is no code, template, variable, path
    or placeholder. Code (`f(password=pw2)`: docs/security.md) is read as before. The
    last two: not a line's start, a name not in capitals."""
    assert Redactor().text(text) == (text, 0)


def test_a_quoted_value_or_a_key_of_known_shape_keeps_its_placeholder():
    out, _ = Redactor().text(
        "DB_PASSWORD='k3v(Q9xZp'\nGITHUB_TOKEN=ghp_" + "aB3d" * 9 + "\nSECRET_KEY=8)b6&dk$i1c4o"
    )
    assert out == (
        "DB_PASSWORD='<secret:password>'\nGITHUB_TOKEN=<secret:github_token>\n"
        "SECRET_KEY=<secret:secret_key>"
    )


def test_a_key_of_known_shape_keeps_its_kind_where_the_line_s_value_reads_on():
    """The line's value runs to the first blank, past a key's end: the shape's rule,
    earlier, names the secret (`redact_rules.BUILTIN`: earlier ones win overlaps), and a
    closing tag ends the value (`redact --check page.html`, `<pre>export TOKEN=...</pre>`)."""
    ghp, akia = "ghp_" + "aB3d" * 9, "AKIAZ3TQ7XKWUQ5MHRVN"
    out, n = Redactor().text(f"GITHUB_TOKEN={ghp};x\n<pre>export TOKEN={akia}</pre>")
    assert (out, n) == (
        "GITHUB_TOKEN=<secret:github_token>\n<pre>export TOKEN=<secret:aws_access_key></pre>",
        2,
    )


# -- 3: aws --output table -----------------------------------------------------------------------
AWS_SECRET = "1FewYe4e6jby3XVcxmHrk17qhLly+YXO+UCed6NX"
AWS_TOKEN = (
    "FwoGZXIvYXdzEFtfNRA72w77VTBqzzjeUJHmEjpUvHWAoPkWR1jhTqALutvUm+vpOsvHUM+aCYmdar03R+AQ0kd"
    + _rand(200, B62 + "+/")
)
TABLE = f"""-------------------------------------------------------
|                   GetSessionToken                   |
+-----------------------------------------------------+
||                    Credentials                    ||
|+-------------------+-------------------------------+|
||  AccessKeyId      |  ASIAZ3TQ7XKWUQ5MHRVN         ||
||  Expiration       |  2026-12-06T00:00:00+00:00    ||
||  SecretAccessKey  |  {AWS_SECRET}  ||
||  SessionToken     |  {AWS_TOKEN}  ||
|+-------------------+-------------------------------+|"""


def test_aws_output_table_credentials_are_redacted():
    """Only the key id was: `aws_secret_key` wanted `=`, `:`, `=>` or whitespace after
    the name, `aws_session_token` `=`, `:` or `=>`; a table puts `|` between."""
    out, n = Redactor().text(TABLE)
    assert n == 3, out
    assert "|  <secret:aws_secret_key>  |" in out and "|  <secret:aws_session_token>  |" in out
    raw = json.dumps({"raw": TABLE.replace("\n", "\r\n")})
    out, n = Redactor().text(raw)
    assert n == 3 and AWS_SECRET[:20] not in out and AWS_TOKEN[:40] not in out, out


def test_the_secret_key_after_a_pipe_must_still_be_40_base64_characters():
    for text in ("aws configure get aws_secret_access_key | base64", "| SecretAccessKey | - |"):
        assert Redactor().text(text) == (text, 0)


# -- the batch screen and `process` ------------------------------------------------------------
NEW_LINES = [
    '{"raw": "x \\u201c' + ANCHORED["openai_key"] + '\\u201d"}',
    '{"keystrokes": "echo \\"\\u2192' + ANCHORED["google_api_key"] + '\\"\\n"}',
    *(f"{k}={v}" for k, v in HUNT_ENV.items()),
    json.dumps({"raw": "\r\nSECRET_KEY=" + HUNT_ENV["SECRET_KEY"] + "\r\n"}),
    TABLE,
]


def test_the_screen_flags_the_new_shapes_among_random_neighbours():
    assert_screen_flags(NEW_LINES, ["f(password=pw2)", "DB_PASSWORD=get_password()"], seed=1205)


def test_pass1_redacts_the_new_shapes_as_redacting_every_record_whole(tmp_path):
    secrets = [ANCHORED["openai_key"], ANCHORED["google_api_key"], AWS_SECRET, AWS_TOKEN[:60]]
    secrets += [v[len(v) // 2 :] for v in HUNT_ENV.values()]
    assert_pass1_redacts_as_whole(tmp_path, NEW_LINES, secrets)
