"""Credentials in tables the cell rules missed (2026-12-06, u), as real tools print them,
with real Redactors, the real batch screen and a real docker sandbox:

1. a name's cell and its value's in a box-drawing table (`│`: sqlite3's `-box`, duckdb,
   rich, tabulate's `fancy_grid`, psql's `linestyle unicode`) or in backticks or quotes
   (a Markdown table's `` `DB_PASSWORD` ``) (`redact_rules._CELL_LEADS`);
2. a whitespace-aligned `NAME   VALUE` listing (`env | column -t -s=`, rich's borderless
   table) (`redact_rules._ALIGNED_LEADS`);
3. a column whose header names a credential, its values in the rows below (psql, mysql's
   and sqlite3's `-table` boxes, sqlite3's `-box`, `-column`, `-markdown`, duckdb, rich,
   `kubectl get secret -o custom-columns`) (`redact_rules._column_cells`).

What a world model must learn stays: masks, NULLs, placeholders, types, dates and counts
in columns of other names. Printed by the tools themselves where they are installed here
(duckdb, rich, the sqlite3 shell); psql's captured from psql 15.18 against a PostgreSQL 15
server; tabulate's and kubectl's typed as they print.
"""

from __future__ import annotations

import json
import subprocess

import duckdb
import pyarrow.parquet as pq
import pytest
from rich.console import Console
from rich.table import Table
from worldtrace.collectors.jobs import JobSpec, run_job
from worldtrace.schemas.redact import Redactor

from .test_redact_review_1203c import assert_pass1_redacts_as_whole
from .test_redact_review_1203d import assert_screen_flags

PW, PW2, TOK, KEY = "hunter2xyz", "s3cr3tValue9", "tok9Abcdefgh12", "k3yAbcdEfgh9"
SECRETS = (PW, PW2, TOK, KEY)


def dumps(value: dict) -> str:
    return json.dumps(value, ensure_ascii=False)


def redacted(text: str) -> str:
    return Redactor().text(text)[0]


def rich_table(*rows: tuple[str, ...], header: bool = True, box: bool = True) -> str:
    console = Console(width=100, color_system=None, force_terminal=False)
    table = Table(show_header=header, **({} if box else {"box": None}))
    for name in rows[0]:
        table.add_column(name)
    for row in rows[1:]:
        table.add_row(*row)
    with console.capture() as out:
        console.print(table)
    return out.get()


def duckdb_box(sql: str) -> str:
    return str(duckdb.connect().sql(sql))


USERS = (
    "select * from (values (1, 'alice', '" + PW + "', '" + KEY + "'), (2, 'bob', '" + PW2 + "', NULL))"
    " t(id, username, password, api_key)"
)  # fmt: skip

# -- 1. a name's cell, then its value's: box-drawing, backticked, quoted ---------------------
SQLITE_BOX_KV = (  # sqlite3 -box "select 'DB_PASSWORD' as name, '...' as value"
    "┌─────────────┬──────────────┐\n"
    "│    name     │    value     │\n"
    "├─────────────┼──────────────┤\n"
    "│ DB_PASSWORD │ s3cr3tValue9 │\n"
    "└─────────────┴──────────────┘\n"
)
PSQL_UNICODE_KV = (  # psql -P linestyle=unicode -c "select 'db_password' as key, ..."
    "     key     │    value     \n"
    "─────────────┼──────────────\n"
    " db_password │ s3cr3tValue9\n"
    "(1 row)\n"
)
PSQL_UNICODE_X = "─[ RECORD 1 ]────────\nusername │ alice\npassword │ hunter2xyz\n"  # psql -x
PSQL_UNICODE_X2 = (  # psql -x -P linestyle=unicode -P border=2
    "┌─[ RECORD 1 ]──────────┐\n│ username │ alice      │\n│ password │ hunter2xyz │\n"
    "└──────────┴────────────┘\n"
)
FANCY_GRID_KV = (  # tabulate(rows, headers=["name", "value"], tablefmt="fancy_grid")
    "╒═════════════╤════════════════╕\n"
    "│ name        │ value          │\n"
    "╞═════════════╪════════════════╡\n"
    "│ DB_PASSWORD │ s3cr3tValue9   │\n"
    "├─────────────┼────────────────┤\n"
    "│ API_TOKEN   │ tok9Abcdefgh12 │\n"
    "├─────────────┼────────────────┤\n"
    "│ LOG_LEVEL   │ info           │\n"
    "╘═════════════╧════════════════╛"
)
MARKDOWN_TICKS = (  # a README's settings table
    "| Variable | Value |\n|---|---|\n| `DB_PASSWORD` | `s3cr3tValue9` |\n"
    "| `GITHUB_TOKEN` | `tok9Abcdefgh12` |\n| `LOG_LEVEL` | `info` |\n"
)
NAME_VALUE = [
    SQLITE_BOX_KV,
    PSQL_UNICODE_KV,
    PSQL_UNICODE_X,
    PSQL_UNICODE_X2,
    FANCY_GRID_KV,
    MARKDOWN_TICKS,
    '| "password" | "hunter2xyz" |',
    "| 'api_key' | 'k3yAbcdEfgh9' |",
    "┃ client_secret ┃ s3cr3tValue9 ┃",
    "║ DB_PASSWORD ║ s3cr3tValue9 ║",
]

# -- 2. a whitespace-aligned listing -----------------------------------------------------------
COLUMN_T = "DB_PASSWORD   s3cr3tValue9\nLOG_LEVEL     info\nGITHUB_TOKEN  tok9Abcdefgh12\n"
ALIGNED = [
    COLUMN_T,  # printf 'DB_PASSWORD=...\n...' | column -t -s=
    "  DB_PASSWORD        s3cr3tValue9\n  API_KEY            k3yAbcdEfgh9\n",  # a docker-style KEY VALUE listing
    "DB_PASSWORD\ts3cr3tValue9\n",
    "password      hunter2xyz    (set 2024-01-02)\n",
]

# -- 3. a column under its header --------------------------------------------------------------
PSQL = (  # psql -c "select id, username, password, api_token from users"
    " id | username |   password   |   api_token    \n"
    "----+----------+--------------+----------------\n"
    "  1 | alice    | hunter2xyz   | tok9Abcdefgh12\n"
    "  2 | bob      | s3cr3tValue9 | \n"
    "(2 rows)\n\n"
)
PSQL_UNICODE = (  # psql -P linestyle=unicode
    " id │ username │   password   \n"
    "────┼──────────┼──────────────\n"
    "  1 │ alice    │ hunter2xyz\n"
    "  2 │ bob      │ s3cr3tValue9\n"
    "(2 rows)\n\n"
)
PSQL_ONE = "   password   \n--------------\n hunter2xyz\n s3cr3tValue9\n(2 rows)\n\n"  # one column
SQLITE_TABLE = (  # sqlite3 -table (mysql's boxes are the same)
    "+----+----------+--------------+\n"
    "| id | username |   password   |\n"
    "+----+----------+--------------+\n"
    "| 1  | alice    | hunter2xyz   |\n"
    "| 2  | bob      | s3cr3tValue9 |\n"
    "+----+----------+--------------+\n"
)
SQLITE_BOX = (
    "┌────┬──────────┬──────────────┐\n"
    "│ id │ username │   password   │\n"
    "├────┼──────────┼──────────────┤\n"
    "│ 1  │ alice    │ hunter2xyz   │\n"
    "│ 2  │ bob      │ s3cr3tValue9 │\n"
    "└────┴──────────┴──────────────┘\n"
)
SQLITE_COLUMN = (  # sqlite3 -column -header
    "id  username  password    \n"
    "--  --------  ------------\n"
    "1   alice     hunter2xyz  \n"
    "2   bob       s3cr3tValue9\n"
)
SQLITE_MARKDOWN = (
    "| id | username |   password   |\n"
    "|----|----------|--------------|\n"
    "| 1  | alice    | hunter2xyz   |\n"
    "| 2  | bob      | s3cr3tValue9 |\n"
)
FANCY_GRID = (  # tabulate(rows, headers=["id", "username", "password"], tablefmt="fancy_grid")
    "╒══════╤════════════╤══════════════╕\n"
    "│   id │ username   │ password     │\n"
    "╞══════╪════════════╪══════════════╡\n"
    "│    1 │ alice      │ hunter2xyz   │\n"
    "├──────┼────────────┼──────────────┤\n"
    "│    2 │ bob        │ s3cr3tValue9 │\n"
    "╘══════╧════════════╧══════════════╛"
)
KUBECTL = "NAME   PASSWORD\ndb     czNjcjN0VmFsdWU5\n"  # -o custom-columns=NAME:...,PASSWORD:.data.password
COLUMNS = [PSQL, PSQL_UNICODE, PSQL_ONE, SQLITE_TABLE, SQLITE_BOX, SQLITE_COLUMN, SQLITE_MARKDOWN,
           FANCY_GRID, KUBECTL]  # fmt: skip

# -- kept ---------------------------------------------------------------------------------------
PSQL_OTHER_NAMES = (  # select username, password_changed_at, token_count from users
    " username | password_changed_at | token_count \n"
    "----------+---------------------+-------------\n"
    " alice    | 2024-01-02          |          12\n"
    " bob      | 2024-03-04          |           7\n"
    "(2 rows)\n\n"
)
PSQL_MASKED = (  # select username, '********' as password, null as api_key, '<redacted>' ...
    " username | password | api_key | client_secret \n"
    "----------+----------+---------+---------------\n"
    " alice    | ******** |         | <redacted>\n"
    " bob      | ******** |         | <redacted>\n"
    "(2 rows)\n\n"
)
SQLITE_COLUMN_OTHER = (
    "username  password_changed_at  token_count\n"
    "--------  -------------------  -----------\n"
    "alice     2024-01-02           12         \n"
    "bob       2024-03-04           7          \n"
)
SQLITE_MARKDOWN_NULL = (
    "| id | username | password |\n|----|----------|----------|\n| 1  | alice    |          |\n"
    "| 2  | bob      |          |\n"
)
DUCKDB_NULLS = (
    "┌──────────┬──────────────┬───────────────┐\n"
    "│ username │   password   │ api_key       │\n"
    "│ varchar  │   varchar    │ varchar       │\n"
    "├──────────┼──────────────┼───────────────┤\n"
    "│ alice    │ NULL         │ ${API_KEY}    │\n"
    "│ bob      │ <redacted>   │ [FILTERED]    │\n"
    "│ carol    │ ******       │ /run/secrets/ │\n"
    "└──────────┴──────────────┴───────────────┘\n"
)
SCHEMA = (  # psql \d users: the column's type, not its value
    '                 Table "public.users"\n'
    "   Column   |  Type   | Collation | Nullable | Default \n"
    "------------+---------+-----------+----------+---------\n"
    " id         | integer |           |          | \n"
    " password   | text    |           | not null | \n"
    " api_token  | text    |           |          | \n"
)
PIP_LIST = (
    "Package            Version\n------------------ ---------\ndjango-secret-key  2.10.0rc1\n"
)
AWS_CONFIGURE_LIST = (  # `aws configure list`: awscli masks both keys itself
    "      Name                    Value             Type    Location\n"
    "      ----                    -----             ----    --------\n"
    "   profile                <not set>             None    None\n"
    "access_key     ****************ABCD shared-credentials-file    \n"
    "secret_key     ****************wxyz shared-credentials-file    \n"
)
PROSE = (
    "Passwords\n---------\nEvery password  must be 12 characters or more.\n\n"
    "password    required\nAPI_TOKEN   string\n"
    "| Setting | Meaning |\n|---|---|\n| `password` | the database password |\n"
)
KEPT = [PSQL_OTHER_NAMES, PSQL_MASKED, SQLITE_COLUMN_OTHER, SQLITE_MARKDOWN_NULL, DUCKDB_NULLS,
        SCHEMA, PIP_LIST, AWS_CONFIGURE_LIST, PROSE,
        "| `password` | `********` |", "│ password │ <your-password> │",
        "DB_PASSWORD    $DB_PASSWORD\nAPI_KEY        <api-key>\n"]  # fmt: skip


def _assert_redacted(text: str) -> None:
    out = redacted(text)
    assert "<secret:" in out, out
    for secret in (*SECRETS, "czNjcjN0VmFsdWU5"):
        assert secret not in out, out
    # the table's shape and its other cells stay
    assert out.count("\n") == text.count("\n")
    for word in ("alice", "bob", "info", "LOG_LEVEL", "username"):
        assert text.count(word) == out.count(word), out
    # in a JSON string, as `state_json` keeps a raw stream (`steps`: no `\\uXXXX` for
    # what is beyond ASCII)
    assert json.loads(redacted(dumps({"raw": text}))) == {"raw": out}


@pytest.mark.parametrize("text", NAME_VALUE)
def test_a_value_in_a_box_drawn_backticked_or_quoted_cell_after_its_name_is_redacted(text):
    _assert_redacted(text)


@pytest.mark.parametrize("text", ALIGNED)
def test_a_value_aligned_after_its_name_in_a_listing_is_redacted(text):
    _assert_redacted(text)


@pytest.mark.parametrize("text", COLUMNS)
def test_the_values_below_a_credentials_column_header_are_redacted(text):
    _assert_redacted(text)


@pytest.mark.parametrize("text", KEPT)
def test_masks_nulls_placeholders_types_dates_and_counts_are_kept(text):
    assert redacted(text) == text
    assert redacted(dumps({"raw": text})) == dumps({"raw": text})


def test_psql_output_redacts_each_value_in_place():
    """Exactly the values: the padding, the bars and the empty cell stay."""
    assert redacted(PSQL) == PSQL.replace("hunter2xyz", "<secret:password>").replace(
        "s3cr3tValue9", "<secret:password>"
    ).replace("tok9Abcdefgh12", "<secret:token>")
    assert redacted(KUBECTL) == "NAME   PASSWORD\ndb     <secret:password>\n"


def test_tables_printed_by_duckdb_and_rich_are_redacted():
    """Printed here by the libraries themselves: duckdb's box (a type row under the
    header), rich's heavy header (`┃`, `┡━╇━┩`), rich's borderless key/value listing."""
    box = duckdb_box(USERS)
    assert "│ varchar" in box and PW in box
    _assert_redacted(box)
    assert "│ NULL " in redacted(box) and "varchar" in redacted(box)
    _assert_redacted(duckdb_box("select 'DB_PASSWORD' as name, '" + PW2 + "' as value"))
    heavy = rich_table(("id", "username", "password"), ("1", "alice", PW), ("2", "bob", PW2))
    assert "┃ password" in heavy
    _assert_redacted(heavy)
    settings = [("DB_PASSWORD", PW2), ("API_TOKEN", TOK), ("LOG_LEVEL", "info")]
    _assert_redacted(rich_table(("Name", "Value"), *settings))
    _assert_redacted(rich_table(("", ""), *settings, header=False, box=False))
    masked = duckdb_box(
        "select * from (values ('alice', '********', NULL, 42)) t(username, password, api_key, token_count)"
    )  # fmt: skip
    assert redacted(masked) == masked


def test_tables_printed_by_the_sqlite3_shell_are_redacted(tmp_path):
    db = tmp_path / "t.db"
    create = (
        "create table users(id int, username text, password text, password_changed_at text,"
        f" token_count int); insert into users values (1, 'alice', '{PW}', '2024-01-02', 12),"
        f" (2, 'bob', '{PW2}', '2024-03-04', 7);"
    )
    subprocess.run(["sqlite3", db, create], check=True)
    for mode in ("-box", "-table", "-markdown", "-column"):
        shown = subprocess.run(
            ["sqlite3", mode, "-header", db, "select id, username, password from users"],
            capture_output=True, text=True, check=True,
        ).stdout  # fmt: skip
        assert PW in shown, mode
        _assert_redacted(shown)
        other = subprocess.run(
            ["sqlite3", mode, "-header", db, "select username, password_changed_at, token_count from users"],
            capture_output=True, text=True, check=True,
        ).stdout  # fmt: skip
        assert redacted(other) == other, mode


def test_the_screen_flags_and_pass1_redacts_every_new_shape(tmp_path):
    lines = [*NAME_VALUE, *ALIGNED, *COLUMNS]
    assert_screen_flags(lines, [*KEPT[:6], "ok"], seed=12068)
    assert_pass1_redacts_as_whole(tmp_path, lines, SECRETS)


@pytest.mark.docker
def test_tables_reach_no_shard(docker_engine, store, repo):
    """Through a real SWE sandbox and a real job into the raw store: tables shown by
    `cat`, an env file aligned as `column -t -s=` aligns it (by `awk`)."""
    tables = SQLITE_BOX + PSQL + KUBECTL + MARKDOWN_TICKS
    job = {
        "name": "tables", "retries": 0,
        "sandbox": {"kind": "swe", "repo": str(repo), "docker": {"step_timeout": 20}},
        "tasks": [{"id": "t", "instruction": "Show the users.", "actions": [
            {"tool": "bash", "arguments": {"command": f"cat > t.txt <<'EOF'\n{tables}EOF\n"
             f"cat > e.env <<'EOF'\nDB_PASSWORD={PW2}\nLOG_LEVEL=info\nEOF"}},
            {"tool": "bash", "arguments": {"command": "cat t.txt"}},
            {"tool": "bash", "arguments": {"command": "awk -F= '{printf \"%-14s%s\\n\", $1, $2}' e.env"}},
        ]}],
    }  # fmt: skip
    [t] = run_job(JobSpec.from_dict(job), store.raw).trajectories
    shown = t.turns[1].observation.text
    assert "│ <secret:password>" in shown and "alice" in shown, shown
    assert "DB_PASSWORD   <secret:password>" in t.turns[2].observation.text
    rows = [r for f in sorted(store.raw.rglob("*.parquet")) for r in pq.read_table(f).to_pylist()]
    journals = [p.read_text() for p in store.raw.rglob("*.journal.jsonl")]
    text = json.dumps(rows, default=str, ensure_ascii=False) + "".join(journals)
    assert rows
    for secret in (*SECRETS, "czNjcjN0VmFsdWU5"):
        assert secret not in text, secret


def test_redactors_of_one_rule_set_share_their_gates():
    """The table cells' gates are thousands of literals: a redactor made per sandbox (its
    environment's values) built their automaton again, 0.3 -> 3.8 ms a redactor (found
    in the suite's times, 12-06 w: a test making 2,000 redactors went 0.7 -> 11 s). The
    gates are made once per rule set; the values handed over stay each redactor's own."""
    a, b = Redactor(literals=["s3cr3t-value-a"]), Redactor(literals=["s3cr3t-value-b"])
    assert a._lits is b._lits and a._folded is b._folded
    assert a.text("x s3cr3t-value-a y")[1] == 1 and b.text("x s3cr3t-value-a y")[1] == 0
