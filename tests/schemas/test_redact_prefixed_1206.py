"""A `.env` file's lines as tools show them (2026-12-06 hunt): with a line number (`cat
-n`, `nl`, the SWE `read` tool, `less -N`, `grep -n`), a grep path (`./.env:2:`) or a
diff's `+`/`-` before the line, the dotenv rule (`redact_rules._LINE`) read no line's
start, and the name rules (`_value`) stopped at `(`, `,` and `;`: `DB_PASSWORD`,
`REDIS_PASSWORD` and `SECRET_KEY` were kept whole, `API_TOKEN` after its `;`. Real
detect-secrets, the rules as shipped."""

from __future__ import annotations

import json
import re

import pytest
from worldtrace.schemas.redact import Redactor

from .test_redact_review_1203c import assert_pass1_redacts_as_whole
from .test_redact_review_1203d import assert_screen_flags

ENV = {
    "DB_PASSWORD": "k3vQ9xZp(2mT7wR4s9aB",
    "REDIS_PASSWORD": "Xy7#pQ2,LmN8vB4k",
    "API_TOKEN": "Ab3dE9xY;fGh1jKlMn0pQr7",
    "SECRET_KEY": "8)b6&dk$i1c4o@x9z",
}
KIND = {"DB_PASSWORD": "password", "REDIS_PASSWORD": "password", "API_TOKEN": "token",
        "SECRET_KEY": "secret_key"}  # fmt: skip
NEW_PW = "Zz9(newPass)77wq"
LINES = [f"{k}={v}" for k, v in ENV.items()]


def _sep(i: int) -> str:  # grep -C: `:` after a matching line's number, `-` after a context line's
    return ":" if i == 2 else "-"


def _numbered(fmt: str) -> str:
    return "\n".join(fmt.format(i, line) for i, line in enumerate(LINES, 1))


HEADERS = ["diff --git a/.env b/.env", "--- a/.env", "+++ b/.env", "@@ -1,4 +1,4 @@"]
DIFF = "\n".join(
    [*HEADERS, f"-{LINES[0]}", f"+DB_PASSWORD={NEW_PW}", *(f" {line}" for line in LINES[1:])]
)
SHOWN = {
    "read": _numbered("{:6}\t{}"),  # sandboxes/swe.py `_tool_read`
    "cat -n": _numbered("{:6}\t{}"),
    "nl": _numbered("{:6}\t{}") + "\n",
    "less -N": _numbered("{:7} {}"),
    "grep -n": _numbered("{}:{}"),
    "grep -n -C": "\n".join(f"{i}{_sep(i)}{x}" for i, x in enumerate(LINES, 1)),
    "grep -rn": _numbered("./.env:{}:{}"),
    "grep -r": "\n".join(f"./config/.env.local:{x}" for x in LINES),
    "grep -rn -C": "\n".join(f"./.env{_sep(i)}{i}{_sep(i)}{x}" for i, x in enumerate(LINES, 1)),
    "diff": DIFF,
    "cat -n diff": "\n".join(f"{i:6}\t{x}" for i, x in enumerate(DIFF.split("\n"), 1)),
    "diff of export": DIFF.replace("\n-DB", "\n-export DB").replace("\n+DB", "\n+export DB"),
    "compose list": "environment:\n" + "\n".join(f"      - {x}" for x in LINES),
}
SECRETS = [*ENV.values(), NEW_PW]


def _pieces(value: str, n: int = 6) -> list[str]:
    return [value[i : i + n] for i in range(len(value) - n + 1)]


def _assert_redacted_whole(text: str) -> str:
    out, n = Redactor().text(text)
    left = [p for v in SECRETS for p in _pieces(v) if p in out]
    assert left == [], out
    # one placeholder a line, each the line's whole value: no tail after it
    shown = [x for x in out.split("\n") if "=<secret:" in x]
    assert n == len(shown) == sum(k in text for k in SECRETS), out
    for line in shown:
        m = re.search(r"\b([A-Z][A-Z_]*)=<secret:([a-z_]+)>$", line)
        assert m and KIND[m[1]] == m[2], line
    return out


@pytest.mark.parametrize("form", sorted(SHOWN))
def test_every_line_a_tool_shows_is_redacted_whole(form):
    _assert_redacted_whole(SHOWN[form])


@pytest.mark.parametrize("form", sorted(SHOWN))
def test_every_line_a_tool_shows_is_redacted_whole_in_a_json_string(form):
    """An observation in `state_json`, a record's JSON: a line starts after `\\n`, a tab
    is `\\t`, a string's opening quote starts the first."""
    text = json.dumps({"observation": SHOWN[form], "raw": SHOWN[form].replace("\n", "\r\n")})
    out, n = Redactor().text(text)
    assert not [p for v in SECRETS for p in _pieces(v) if p in out], out
    got = json.loads(out)  # the placeholders took no quote
    assert n == 2 * sum(k in SHOWN[form] for k in SECRETS)
    assert _assert_redacted_whole(SHOWN[form]) == got["observation"]


def test_the_read_tool_s_lines_become_placeholders():
    out, _ = Redactor().text(SHOWN["read"])
    assert out == (
        "     1\tDB_PASSWORD=<secret:password>\n     2\tREDIS_PASSWORD=<secret:password>\n"
        "     3\tAPI_TOKEN=<secret:token>\n     4\tSECRET_KEY=<secret:secret_key>"
    )
    out, _ = Redactor().text(SHOWN["grep -rn"])
    assert out.split("\n")[1] == "./.env:2:REDIS_PASSWORD=<secret:password>"


def test_head_s_file_headers_were_read_before_and_still_are():
    """`head -n 5 .env other.env`: the lines themselves carry no prefix (passed before)."""
    _assert_redacted_whole("==> .env <==\n" + "\n".join(LINES) + "\n\n==> other.env <==\nX=1")


@pytest.mark.parametrize(
    "text",
    [
        "  1\tpassword_hint = get_hint(user)",
        "    12\tDB_PASSWORD=get_password()",
        "    13\tDB_PASSWORD=os.environ['DB_PASSWORD']",
        '    14\t    API_KEY=os.getenv("API_KEY", ""),',
        "./settings.py:12:SECRET_KEY=settings.SECRET_KEY,",
        "./app.py:3:    conn = connect(password=pw2, host=h)",
        "app.py:9:TOKEN=token(1),",
        "7:API_TOKEN=getToken(userName)",
        "+assert DB_PASSWORD == os.environ['DB_PASSWORD']",
        "-    f(password=pw2)",
        "+DB_PASSWORD=${DB_PASSWORD:-postgres}",
        "+TOKEN=$(cat /run/secrets/token)",
        "-SECRET_KEY=<your-secret-key>",
        "     5\tDB_PASSWORD=/run/secrets/db_password",
        "     6\tDB_PASSWORD=postgres",
        "--- a/.env\n+++ b/.env",
        "./a.py:4:x DB_PASSWORD=k3v(Q9xZp2m",
        "./a.py:4:db_password=k3v(Q9xZp2m",
        "     2\tx DB_PASSWORD=k3v(Q9xZp2m",
        "12 items: PASSWORD=hash(pw2)",
        "    U_UNEXPECTED_TOKEN=0x10100,       /**< Syntax error in format pattern */",
        "  1021\t    U_UNEXPECTED_TOKEN=0x10100,       /**< Syntax error in format pattern */",
    ],
)
def test_code_and_lines_that_only_look_alike_are_kept(text):
    """Code in a listing or a diff reads as code after the prefix as without it; a name
    not right after the prefix, or not in capitals, is read as elsewhere. In a JSON string
    too, where a string's quote in the code is `\\"` (`os.getenv(\\"API_KEY\\", ...)`)."""
    assert Redactor().text(text) == (text, 0)
    in_json = json.dumps({"observation": "$ x\n" + text + "\n"})
    assert Redactor().text(in_json) == (in_json, 0)


def test_a_prefix_does_not_stretch_a_value_that_is_not_an_assignment():
    """After a word and a blank the line is no assignment: `_value` reads it, stopping at
    `;` (a shell operator), as before."""
    out, n = Redactor().text("     3\tcall DB_PASSWORD=Ab3dE9xY;fGh1jKlMn0pQr7")
    assert (out, n) == ("     3\tcall DB_PASSWORD=<secret:password>;fGh1jKlMn0pQr7", 1)


PREFIXED = [SHOWN[f] for f in ("read", "grep -rn", "diff", "less -N", "grep -r")]
PREFIXED += [json.dumps({"o": SHOWN["read"]}), json.dumps({"o": SHOWN["grep -rn -C"]})]


def test_the_screen_flags_the_prefixed_lines_among_random_neighbours():
    lines = PREFIXED + [f"{i:6}\t{x}" for i, x in enumerate(LINES)] + [f"+{x}" for x in LINES]
    assert_screen_flags(lines, ["  1\tpassword_hint = get_hint(user)", "+f(password=pw2)"], 1206)


def test_pass1_redacts_the_prefixed_lines_as_redacting_every_record_whole(tmp_path):
    assert_pass1_redacts_as_whole(tmp_path, PREFIXED, [v[len(v) // 2 :] for v in SECRETS])
