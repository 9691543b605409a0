"""A `.env` line commented out (`# DB_PASSWORD=...`, often the old credential still
live), a Markdown list's `* API_TOKEN=...` (a README, a PR description) and `git grep`'s
line after a revision (`HEAD:.env:2:`) kept their values whole: the dotenv rule's line
start (`redact_rules._shown`) took neither `#`, `*` nor a revision before the path, and
the name rules stop at `(`, `,` and `;`. Real detect-secrets, the rules as shipped."""

from __future__ import annotations

import json

import pytest
from worldtrace.schemas.redact import Redactor

from .test_redact_prefixed_1206 import ENV, KIND, LINES, _pieces

FORMS = {
    "commented": "\n".join(f"# {x}" for x in LINES),
    "commented tight": "\n".join(f"#{x}" for x in LINES),
    "commented, cat -n": "\n".join(f"{i:6}\t# {x}" for i, x in enumerate(LINES, 1)),
    "commented, diff": "\n".join(f"-# {x}" for x in LINES),
    "markdown list": "Set these:\n\n" + "\n".join(f"* {x}" for x in LINES),
    "git grep rev": "\n".join(f"HEAD:.env:{i}:{x}" for i, x in enumerate(LINES, 1)),
    "git grep branch": "\n".join(f"main:config/.env:{x}" for x in LINES),
}


@pytest.mark.parametrize("form", sorted(FORMS))
def test_each_form_is_redacted_whole(form):
    text = FORMS[form]
    for shown in (text, json.dumps({"observation": text})):
        out, n = Redactor().text(shown)
        assert [p for v in ENV.values() for p in _pieces(v) if p in out] == [], out
        assert n == len(ENV), out
    out, _ = Redactor().text(text)
    for name, kind in KIND.items():
        assert f"{name}=<secret:{kind}>" in out, out


@pytest.mark.parametrize(
    "text",
    [
        "# DB_PASSWORD=get_password()",
        "# MAX_RETRIES=5",
        "## TOKEN=<your-token>",
        "* DB_PASSWORD=${DB_PASSWORD:-postgres}",
        "#   SECRET_KEY=os.environ['SECRET_KEY']",
        "HEAD:app.py:3:    conn = connect(password=pw2, host=h)",
        "# x DB_PASSWORD=k3v(Q9xZp2m",
    ],
)
def test_comments_and_lists_of_code_or_placeholders_are_kept(text):
    assert Redactor().text(text) == (text, 0)
