"""Three redaction gaps the 2026-12-06 notes left (t), each as a user hits it, with real
Redactors, the real batch screen and a real docker sandbox:

1. a credential's name in a table's cell and its value in the next (a Markdown table,
   mysql's boxes, psql's rows and `\\x` records, `psql -A`) kept the value: no `=` or `:`
   lies between them (`redact_rules._cells`);
2. a credential option in a compact list (`[--token,V,--port]`, `[ --token , V ]`) kept
   its value: a value ended at a `,` only when a blank followed (`_OPT_END`, `_FLOW`);
3. `--pass V`, `--pwd V`, `--db-pass V` kept V: only `--password`, `--passwd` and their
   owners' names were credential options (`CREDENTIAL_OPTIONS`).
"""

from __future__ import annotations

import json
import random

import pyarrow.parquet as pq
import pytest
from worldtrace.collectors.jobs import JobSpec, run_job
from worldtrace.schemas.redact import Redactor

from .test_redact_review_1203c import assert_pass1_redacts_as_whole
from .test_redact_review_1203d import assert_screen_flags

V = "Xq9vLm2pRt9sKw4zB7"


def redacted(text: str) -> str:
    return Redactor().text(text)[0]


# -- 1. a name's cell, then its value's --------------------------------------------------
PSQL_X = "-[ RECORD 1 ]------------\nid          | 1\nusername    | alice\npassword    | hunter2xyz\napi_token   | tok9Abcdefgh12\n"  # fmt: skip
PSQL = "     key      |    value\n--------------+--------------\n db_password  | s3cr3tValue9\n api_token    | abc123def456\n(2 rows)\n"  # fmt: skip
MYSQL = "+-------------+--------------+\n| name        | value        |\n+-------------+--------------+\n| db_password | s3cr3tValue9 |\n| api_key     | k3yAbcdEfgh9 |\n+-------------+--------------+"  # fmt: skip
TABLES = [
    ("| password | hunter2xyz |", "| password | <secret:password> |"),
    ("| DB_PASSWORD | s3cr3tValue9 |", "| DB_PASSWORD | <secret:password> |"),
    ("password    | hunter2xyz", "password    | <secret:password>"),
    ("db_password|s3cr3tValue9", "db_password|<secret:password>"),
    ("| spring.datasource.password | P4ssw0rd! |", "| spring.datasource.password | <secret:password> |"),
    ("| SECRET_KEY | dj4ngo-s3cr3t-k3y |\n| client_secret | cl13ntS3cr3tXyz |",
     "| SECRET_KEY | <secret:secret_key> |\n| client_secret | <secret:secret_key> |"),
    ("password | hunter2xyz\r\nnext | row", "password | <secret:password>\r\nnext | row"),
    (PSQL_X, PSQL_X.replace("hunter2xyz", "<secret:password>").replace("tok9Abcdefgh12", "<secret:token>")),
    (PSQL, PSQL.replace("s3cr3tValue9", "<secret:password>").replace("abc123def456", "<secret:token>")),
    (MYSQL, MYSQL.replace("s3cr3tValue9", "<secret:password>").replace("k3yAbcdEfgh9", "<secret:api_key>")),
]  # fmt: skip
AWS_CONFIGURE_LIST = (  # what `aws configure list` prints: awscli masks both keys itself
    "      Name                    Value             Type    Location\n"
    "      ----                    -----             ----    --------\n"
    "   profile                <not set>             None    None\n"
    "access_key     ****************ABCD shared-credentials-file    \n"
    "secret_key     ****************wxyz shared-credentials-file    \n"
)
TABLES_KEPT = [
    "| password | required |",
    "| token | string | the API token |",
    "| access_token | string | The access token |",
    "| DB_PASSWORD | The database password | yes |",
    "| DB_PASSWORD | postgres |",
    "| SECRET_KEY | Django secret key (50+ chars) |",
    "| PASSWORD | ******** |",
    "| password | <your-password> |",
    "| API_TOKEN | $API_TOKEN |",
    "| password | self.password |",
    "| api_key | settings.API_KEY |",
    "| password | PASSWORD_2 |",
    "| password | /run/secrets/db |",
    "| password | varchar(255) |",
    " password      | character varying(255) |           | not null |",
    "| password_hash | $2b$12$abcdefghijklmnopqrstuv |",
    "| token_limit | 4096 |",
    "| --password | -p | Password to use |",
    "echo $password | base64",
    "echo password | sha256sum",
    'grep -E "user|password|secret2|token" app.log',
    AWS_CONFIGURE_LIST,
]


@pytest.mark.parametrize(("text", "out"), TABLES)
def test_a_value_in_the_cell_after_a_credentials_name_is_redacted(text, out):
    """As a tool prints it, and inside a JSON string (a raw stream in `state_json`)."""
    assert redacted(text) == out
    assert redacted(json.dumps({"raw": text})) == json.dumps({"raw": out})


@pytest.mark.parametrize("text", TABLES_KEPT)
def test_tables_of_prose_types_code_and_placeholders_are_kept(text):
    """A header or type row, a description, code, a placeholder, a variable, a shell's
    pipe and a regex's alternatives are no name and value."""
    assert redacted(text) == text
    assert redacted(json.dumps({"raw": text})) == json.dumps({"raw": text})


NAMES = ["password", "db_passwd", "smtp_pass", "mysql_pwd", "access_token", "GITHUB_TOKEN",
         "client_secret", "SECRET_KEY", "api_key", "x-api-key"]  # fmt: skip


def test_any_case_of_a_name_and_any_padding_of_its_cell_are_read():
    """The rules open on how a name ends before its `|` (`_cell_gates`), in any case,
    with no blank, one or a padding of blanks and tabs: every such row is found."""
    rng = random.Random(12061)

    def blanks(least: int) -> str:
        return "".join(rng.choice(" \t") for _ in range(rng.randint(least, 4)))

    for _ in range(400):
        name = "".join(c.upper() if rng.random() < 0.5 else c for c in rng.choice(NAMES))
        if rng.random() < 0.5:
            row = f"|{blanks(1)}{name}{blanks(1)}|{blanks(1)}{V}{blanks(0)}|"
        else:
            row = f"{rng.choice(['', ' '])}{name}{blanks(0)}|{blanks(0)}{V}"
        text = rng.choice(["", "x | y\n", "-[ RECORD 1 ]-\n"]) + row + rng.choice(["", "\n"])
        assert V not in redacted(text), text


# -- 2. compact list forms of a credential option -----------------------------------------
LISTS = [
    ("[--token,abcdEFGH1234xyz,--port]", "[--token,<secret:token>,--port]"),
    ("[--token,abcdEFGH1234xyz,--port,8080]", "[--token,<secret:token>,--port,8080]"),
    ("args: [--api-key,abcdefghijk,--verbose]", "args: [--api-key,<secret:api_key>,--verbose]"),
    ("[srv,--password,hunterlong,--port,8080]", "[srv,--password,<secret:password>,--port,8080]"),
    ("[--db-token,abc123secretx,-v]", "[--db-token,<secret:token>,-v]"),
    ("[ --token , abcdEFGH1234xyz ]", "[ --token , <secret:token> ]"),
    ('["--token","abcdEFGH1234xyz","--port","8080"]', '["--token","<secret:token>","--port","8080"]'),
    ("['--client-secret','abcdefghijk']", "['--client-secret','<secret:secret_key>']"),
]  # fmt: skip
LISTS_KEPT = [
    "docker buildx build --secret id=mytoken,src=/run/x,type=file .",
    "docker buildx build --secret id=mytoken,src=/run/x .",
    "[--token,$API_TOKEN,--port]",
    "[--eos-token,endoftext,--port]",
    "[--token,--verbose,--port]",
    "[--password-file,/run/secrets/pw,-v]",
]


@pytest.mark.parametrize(("text", "out"), LISTS)
def test_a_credential_option_in_a_compact_list_is_redacted(text, out):
    assert redacted(text) == out
    assert redacted(json.dumps({"args": text})) == json.dumps({"args": out})


@pytest.mark.parametrize("text", LISTS_KEPT)
def test_compact_lists_without_a_credential_are_kept(text):
    assert redacted(text) == text


# -- 3. `--pass`, `--pwd` ------------------------------------------------------------------
SHORT = [
    ("mytool --pass hunter2xyz", "mytool --pass <secret:password>"),
    ("mytool --pwd hunter2xyz -v", "mytool --pwd <secret:password> -v"),
    ("mytool --pass=hunterlong", "mytool --pass=<secret:password>"),
    ("mytool --pwd=hunterlong", "mytool --pwd=<secret:password>"),
    ("mytool --pass hunterlong", "mytool --pass <secret:password>"),
    ("dbtool --db-pass correcthorse --db app", "dbtool --db-pass <secret:password> --db app"),
    ("dbtool --root-pwd correcthorse", "dbtool --root-pwd <secret:password>"),
    ('["srv", "--pwd", "hunterlong"]', '["srv", "--pwd", "<secret:password>"]'),
    ("args: [--pass, hunterlong]", "args: [--pass, <secret:password>]"),
]  # fmt: skip
SHORT_KEPT = [
    "x264 --pass 2 --bitrate 1000 -o out.mkv in.y4m",
    "x264 --pass 1 --stats x264.log in.y4m",
    "mytool --pass-through foobarbaz",
    "ffmpeg-wrap --two-pass output1.mp4",
    "mytool --pwd --verbose",
    "mytool --pass --pwd",
    "apptainer exec --pwd /work/project image.sif python run.py",
    "mytool --pwd $PWD",
    "  -P|--pass  passphrase   passphrase for private key, default none",
    "mytool --pass short",
]


@pytest.mark.parametrize(("text", "out"), SHORT)
def test_a_password_option_by_its_short_name_is_redacted(text, out):
    assert redacted(text) == out
    assert "<secret:password>" in redacted(json.dumps({"command": text}))


@pytest.mark.parametrize("text", SHORT_KEPT)
def test_an_encoders_pass_a_directory_the_next_option_and_help_are_kept(text):
    """x264's `--pass 2` (a pass's number: shorter than a password), `--pass-through`,
    `--two-pass` (other names), `--pwd` then an option, a path or `$PWD`, help text."""
    assert redacted(text) == text


def test_the_screen_flags_and_pass1_redacts_every_new_shape(tmp_path):
    lines = [t for t, _ in TABLES[:7] + LISTS[:6] + SHORT]
    assert_screen_flags(lines, [*TABLES_KEPT[:8], *SHORT_KEPT[:4], "ok"], seed=12067)
    assert_pass1_redacts_as_whole(
        tmp_path, lines, ("hunter2xyz", "s3cr3tValue9", "abcdEFGH1234xyz", "hunterlong")
    )


@pytest.mark.docker
def test_tables_lists_and_short_options_reach_no_shard(docker_engine, store, repo):
    """Through a real SWE sandbox and a real job into the raw store: a README's table and
    a psql record shown by `cat`, a compact list a real shell prints (`IFS=,`), and a
    command run with `--pass` (the action holds it)."""
    readme = "| Name | Value |\n|------|-------|\n| DB_PASSWORD | s3cr3tValue9 |\n"
    record = "-[ RECORD 1 ]-\nusername    | alice\npassword    | hunter2xyz\n"
    show = "sh -c 'IFS=,; echo \"[$*]\"' sh --token abcdEFGH1234xyz --port 8080"
    job = {
        "name": "tables", "retries": 0,
        "sandbox": {"kind": "swe", "repo": str(repo), "docker": {"step_timeout": 20}},
        "tasks": [{"id": "t", "instruction": "Show the settings.", "actions": [
            {"tool": "bash", "arguments": {"command": f"cat > s.md <<'EOF'\n{readme}EOF\ncat > r.txt <<'EOF'\n{record}EOF"}},
            {"tool": "bash", "arguments": {"command": "cat s.md r.txt"}},
            {"tool": "bash", "arguments": {"command": show}},
            {"tool": "bash", "arguments": {"command": ": mytool --pass hunterlong --port 8080; echo started"}},
        ]}],
    }  # fmt: skip
    [t] = run_job(JobSpec.from_dict(job), store.raw).trajectories
    shown = t.turns[1].observation.text
    assert "| DB_PASSWORD | <secret:password> |" in shown, shown
    assert "password    | <secret:password>" in shown, shown
    assert "[--token,<secret:token>,--port,8080]" in t.turns[2].observation.text
    assert "--pass <secret:password>" in t.turns[3].action.text
    rows = [r for f in sorted(store.raw.rglob("*.parquet")) for r in pq.read_table(f).to_pylist()]
    journals = [p.read_text() for p in store.raw.rglob("*.journal.jsonl")]
    text = json.dumps(rows, default=str) + "".join(journals)
    assert rows
    for secret in ("s3cr3tValue9", "hunter2xyz", "abcdEFGH1234xyz", "hunterlong"):
        assert secret not in text, secret
