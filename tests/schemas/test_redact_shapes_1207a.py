"""Credentials in table shapes the cell and column rules missed (2026-12-07, a), printed
by the real tools where they are installed (the sqlite3 shell, rich), with real
Redactors and the real batch screen:

1. tab-separated rows under a header (`mysql -B`, typed as it prints: `\\N` for NULL;
   `psql -A -F $'\\t'`; sqlite3's `-separator $'\\t' -header`), and `aws ... --output
   text`'s credentials row, whose secret key and session token followed the key id kept
   (`redact_rules._TAB`, `_AWS_TEXT_ROW`);
2. a box-drawing bar written `\\u2502` in a JSON string (`redact_rules._BAR_ESCAPES`);
3. a cell's value holding `(`, `,` or `;` (`redact_rules._cell_value`);
4. a value rich wraps over lines in its cell (`overflow="fold"`): every piece
   (`redact_rules._wrapped`, `_pieces`).

What a world model must learn stays: masks, NULLs, placeholders, dates, counts, types
and code in cells, `ls -C`'s tab-padded columns, `aws configure list`.
"""

from __future__ import annotations

import json
import subprocess

import pytest
from rich.console import Console
from rich.table import Table
from worldtrace.schemas.redact import Redactor

from .test_redact_review_1203c import assert_pass1_redacts_as_whole
from .test_redact_review_1203d import assert_screen_flags
from .test_redact_tables_1206u import KEPT as KEPT_1206U

PW, PW2 = "S3cr3t-Pw!x9", "pa(ss,wo;rd9X"
AWS_ID = "ASIAQ3EGRVQWXK7YB2NM"
AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYzEXAMPLEKY"
AWS_TOKEN = (
    "IQoJb3JpZ2luX2VjEJr//////////wEaCXVzLWVhc3QtMSJHMEUCIQD" + "aB3dEfGh1jKlMn0pQrStUvWxYz" * 5
)
FOLDED = "hunter2-Xy9abcdefghijklmnopQRSTUVWXYZ0123456789"
SECRETS = (PW, PW2, AWS_SECRET, AWS_TOKEN)


def redacted(text: str) -> str:
    return Redactor().text(text)[0]


def rich_table(*rows: tuple[str, ...], width: int = 30, box: bool = True) -> str:
    console = Console(width=width, color_system=None, force_terminal=False)
    table = Table(**({} if box else {"box": None}))
    for i, name in enumerate(rows[0]):
        table.add_column(name, overflow="fold" if i == len(rows[0]) - 1 else "ellipsis")
    for row in rows[1:]:
        table.add_row(*row)
    with console.capture() as out:
        console.print(table)
    return out.get()


# -- 1. tab-separated ---------------------------------------------------------------------------
MYSQL_B = (
    f"user\tpassword\nalice\t{PW}\nbob\t\\N\n"  # mysql -B -e "SELECT user, password FROM users"
)
MYSQL_B_MID = f"id\tpassword\tcreated\n1\t{PW}\t2024-01-02\n2\t\\N\t2024-03-04\n"
PSQL_A_TAB = f"user\tpassword\nalice\t{PW}\n(1 row)\n"  # psql -A -F $'\t'
AWS_STS = (  # aws sts get-session-token --output text
    f"CREDENTIALS\t{AWS_ID}\t2026-12-07T01:00:00+00:00\t{AWS_SECRET}\t{AWS_TOKEN}\n"
)
AWS_QUERY = f"{AWS_ID}\t{AWS_SECRET}\t{AWS_TOKEN}\n"  # --query 'Credentials.[AccessKeyId,...]'
AWS_IAM = f"ACCESSKEY\t{AWS_ID}\t2026-12-07T01:00:00+00:00\t{AWS_SECRET}\tActive\talice\n"
# -- 2. escaped bars (a tool's JSON result, `ensure_ascii`) --------------------------------------
BOX_COLUMN = "┌─────────────┐\n│  password   │\n├─────────────┤\n│ " + PW + " │\n└─────────────┘\n"
BOX_KV = "│ DB_PASSWORD │ " + PW + " │\n│ LOG_LEVEL   │ info │\n"
PSQL_UNICODE_KV = (
    "     key     │    value     \n─────────────┼──────────────\n db_password │ " + PW + "\n"
)
# -- 3. punctuation in a cell --------------------------------------------------------------------
PUNCT = [
    f"| DB_PASSWORD | {PW2} |",
    f"│ DB_PASSWORD │ {PW2} │",
    f"| id | password |\n|----|----------|\n| 1 | {PW2} |\n",
    f"DB_PASSWORD   {PW2}\nLOG_LEVEL     info\n",
    f"password | {PW2}\n",
    "| api_token | tok9;Abc(def)gh |",
]
TABBED = [MYSQL_B, MYSQL_B_MID, PSQL_A_TAB, AWS_STS, AWS_QUERY, AWS_IAM]
ESCAPED = [json.dumps({"out": t}) for t in (BOX_COLUMN, BOX_KV, PSQL_UNICODE_KV)]

# -- kept ----------------------------------------------------------------------------------------
KEPT = [
    "user\tpassword\nalice\t********\nbob\t\\N\ncarol\t<redacted>\ndave\t${DB_PASSWORD}\n",
    "user\tpassword_changed_at\ttoken_count\nalice\t2024-01-02\t12\n",
    "aaaaaaaaaaa\tdata.txt  secret9xyz\nbbbbbbbbbbbbbb\tpassword  zz\nconfig\t\treadme\n",  # ls -C
    "| token | varchar(64) |\n| password | decimal(10,2) |\n| api_key | Optional[str] |",
    "| password | get_password() |\n| secret_key | os.environ['SECRET_KEY'] |",
    "| token | read,write,admin |\n| password | (hidden) |\n| password | (not set) |",
    "| id | password |\n|----|----------|\n| 1 | varchar(64) |\n| 2 | \\N |\n",
    json.dumps({"out": "│ password │ ******** │\n│ api_key │ NULL │\n"}),
    *KEPT_1206U,
]


def _assert_redacted(text: str) -> None:
    out = redacted(text)
    assert "<secret:" in out, out
    for secret in (*SECRETS, FOLDED, *(FOLDED[i : i + 12] for i in range(12, 40, 12))):
        assert secret not in out, out
    assert out.count("\n") == text.count("\n")
    for word in ("alice", "bob", "info", "LOG_LEVEL", "\\N", "2024-01-02", "CREDENTIALS"):
        assert text.count(word) == out.count(word), out
    if not text.startswith("{"):  # in a JSON string, as `state_json` keeps a raw stream
        for ascii in (False, True):
            raw = json.dumps({"raw": text}, ensure_ascii=ascii)
            assert json.loads(redacted(raw)) == {"raw": out}, ascii


@pytest.mark.parametrize("text", TABBED)
def test_values_in_tab_separated_rows_under_a_header_and_aws_text_credentials_are_redacted(text):
    _assert_redacted(text)


def test_aws_text_credentials_keep_their_kinds_and_the_rest_of_the_row():
    out = redacted(AWS_STS)
    assert out == (
        "CREDENTIALS\t<secret:aws_access_key>\t2026-12-07T01:00:00+00:00\t"
        "<secret:aws_secret_key>\t<secret:aws_session_token>\n"
    )
    assert redacted(AWS_IAM).endswith("\t<secret:aws_secret_key>\tActive\talice\n")
    digest = f"AKIAIOSFODNN7EXAMPLE\t{'a1b2c3d4' * 5}\n"  # a hex digest after a key id: one case
    assert redacted(digest) == f"<secret:aws_access_key>\t{'a1b2c3d4' * 5}\n"


def test_tab_separated_output_of_the_sqlite3_shell_is_redacted(tmp_path):
    db = tmp_path / "t.db"
    create = (
        "create table users(id int, user text, password text, created text);"
        f" insert into users values (1, 'alice', '{PW}', '2024-01-02'), (2, 'bob', NULL, '2024-01-02');"
    )  # fmt: skip
    subprocess.run(["sqlite3", db, create], check=True)
    for query in ("select user, password from users", "select id, password, created from users"):
        shown = subprocess.run(
            ["sqlite3", "-separator", "\t", "-header", db, query],
            capture_output=True, text=True, check=True,
        ).stdout  # fmt: skip
        assert f"\t{PW}" in shown
        _assert_redacted(shown)
    other = subprocess.run(
        ["sqlite3", "-separator", "\t", "-header", db, "select user, created from users"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    assert redacted(other) == other


@pytest.mark.parametrize("text", ESCAPED)
def test_a_table_whose_bars_are_json_escapes_is_read_as_with_the_bars(text):
    assert "\\u2502" in text
    _assert_redacted(text)


@pytest.mark.parametrize("text", PUNCT)
def test_a_cell_value_holding_brackets_commas_or_semicolons_is_redacted(text):
    _assert_redacted(text)
    assert "tok9;Abc(def)gh" not in redacted(text)


def test_every_piece_of_a_value_rich_wraps_in_its_cell_is_redacted():
    """rich's `overflow="fold"` cuts a long value into lines of its cell's width: the
    first piece was redacted, the others kept."""
    settings = rich_table(("Name", "Value"), ("DB_PASSWORD", FOLDED), ("LOG_LEVEL", "info"))
    column = rich_table(("id", "user", "password"), ("1", "alice", FOLDED), ("2", "bob", "NULL"))
    listing = rich_table(
        ("Name", "Value"), ("DB_PASSWORD", FOLDED), ("LOG_LEVEL", "info"), box=False
    )
    for shown in (settings, column, listing):
        pieces = [w for w in shown.replace("│", " ").split() if len(w) > 1 and w in FOLDED]
        assert len(pieces) == 4 and FOLDED.startswith(pieces[0]), shown
        out = redacted(shown)
        assert out.count("<secret:password>") == 4, out
        assert not [w for w in out.replace("│", " ").split() if len(w) > 1 and w in FOLDED], out
        assert ("NULL" in out) == ("NULL" in shown) and ("info" in out) == ("info" in shown), out
        assert json.loads(redacted(json.dumps({"o": shown}))) == {"o": out}
        assert json.loads(redacted(json.dumps({"o": shown}, ensure_ascii=False))) == {"o": out}
    # a first piece that reads as no value alone (letters only) is read joined with the rest
    joined = rich_table(
        ("id", "password"), ("1", "Hunterabcdefghijkl" + "9xyzKLMN"), ("2", "NULL"), width=20
    )
    assert "│ Hunterabcde │" in joined, joined
    out = redacted(joined)
    assert out.count("<secret:password>") == 3 and "Hunter" not in out and "NULL" in out, out


@pytest.mark.parametrize("text", KEPT)
def test_masks_nulls_placeholders_dates_code_and_file_listings_are_kept(text):
    assert redacted(text) == text
    assert redacted(json.dumps({"raw": text})) == json.dumps({"raw": text})


def test_the_screen_flags_and_pass1_redacts_every_new_shape(tmp_path):
    lines = [*TABBED, *ESCAPED, *PUNCT]
    assert_screen_flags(lines, [*KEPT[:6], "ok"], seed=12071)
    # (an escaped bar in a JSON string inside a JSON string, `arguments_json`, is not read)
    assert_pass1_redacts_as_whole(tmp_path, [*TABBED, *PUNCT], SECRETS)
