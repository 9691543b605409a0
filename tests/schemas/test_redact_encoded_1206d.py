"""A value handed to the sandbox, printed percent-encoded (a token in a URL's query, a
form body, `curl --data-urlencode`) or as HTML text (a page's source, a template's
output), was kept: only its escaped forms for shells and JSON were matched (left by the
12-06 note). Real Redactor; the encodings come from real programs (node's
`encodeURIComponent`, Python's `urllib.parse` and `html`)."""

from __future__ import annotations

import html
import json
import subprocess
import urllib.parse

import pytest
from worldtrace.schemas.redact import Redactor

HANDED = {  # a value handed over, and pieces of it no redacted text may hold
    "Zq8 Lm&3vX9/pR!w(t)": ("Zq8", "3vX9", "pR"),
    "k3y<Wn4>\"Yt2'Hs9": ("k3y", "Wn4", "Yt2", "Hs9"),
    "Pässwört9Ünïcødé+x": ("rt9", "ssw"),
}


def _node(value: str) -> list[str]:
    script = "console.log(encodeURIComponent(process.argv[1]))"
    run = subprocess.run(["node", "-e", script, value], capture_output=True, text=True, check=True)
    return run.stdout.splitlines()


def _printed(value: str) -> list[str]:
    quoted = urllib.parse.quote(value, safe="")
    return [
        "https://x.test/files/" + urllib.parse.quote(value) + "?v=1",  # quote's default: `/` kept
        *_node(value),
        "GET /login?" + urllib.parse.urlencode({"user": "me", "token": value}) + " HTTP/1.1",
        quoted,
        f'<input name=token value="{html.escape(value)}">',
        f"<p>{html.escape(value, quote=False)}</p>",
        json.dumps({"html": html.escape(value)}),
    ]


@pytest.mark.parametrize("value", list(HANDED))
def test_a_value_handed_over_is_redacted_percent_encoded_and_as_html(value):
    red = Redactor(literals=[value])
    assert red.screen is not None  # the new forms are still screened in batches
    for text in _printed(value):
        out, n = red.text(text)
        assert n >= 1 and not any(p in out for p in HANDED[value]), (text, out)
        assert red.screen.text(text), text


def test_lower_case_percent_hex_is_redacted():
    value = "Zq8 Lm&3vX9/pR!w(t)"
    text = "token=" + urllib.parse.quote(value, safe="").replace("%2F", "%2f")  # as Go writes
    out, n = Redactor(literals=[value]).text(text)
    assert n == 1 and "3vX9" not in out, out


def test_a_plain_value_keeps_one_form():
    """Letters and digits print the same everywhere: no form is added for them."""
    red = Redactor(literals=["abcDEF123456"])
    assert red.forms == ("abcDEF123456",)
