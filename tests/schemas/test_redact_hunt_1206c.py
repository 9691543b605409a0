"""Leaks a security hunt found (2026-12-06), each through the path that let it through:
a value handed to the sandbox printed escaped (`declare -p`, `json.dumps`, a raw stream
kept in JSON); a quoted password holding an escape; a Basic credential under a quoted
header name; a URL password in slash-escaped JSON; a secret used as a mapping's key.
Real Redactor, real bash, real import and shards."""

from __future__ import annotations

import dataclasses
import json
import os
import random
import subprocess

import pytest
from worldtrace.collectors.importers import ImportConfig, import_paths
from worldtrace.collectors.synthetic import SyntheticConfig, generate
from worldtrace.schemas import read_records
from worldtrace.schemas.redact import Redactor, find_secrets, redact_record
from worldtrace.schemas.store import write_jsonl

from .test_redact_review_1203c import assert_pass1_redacts_as_whole
from .test_redact_review_1203d import assert_screen_flags

HANDED = {  # a value handed over, and pieces of it no redacted text may hold
    'Zq8"Lm$3vX9pR!w': ("Zq8", "3vX9pR"),
    "Kd7\\Wn4\\Yt2\\Hs9": ("Wn4", "Yt2", "Hs9"),
    "Pässwört9Ünïcødé": ("rt9", "ssw"),
}
SHELL = 'declare -p HUNT_PW; printf "%q\\n" "$HUNT_PW"; echo "${HUNT_PW@Q}"; env | grep ^HUNT_PW='


def _printed(value: str) -> list[str]:
    """What programs print for `value`: bash's `declare -p`, `printf %q`, `${X@Q}` and
    `env`, in a UTF-8 and in the C locale (docker's default: `$'P\\303\\244...'`), and
    Python's `json.dumps` (both ways) and `repr`."""
    out = []
    for locale in ("C.UTF-8", "C"):
        env = {**os.environ, "HUNT_PW": value, "LC_ALL": locale}
        run = subprocess.run(["bash", "-c", SHELL], env=env, capture_output=True, text=True)
        assert run.returncode == 0, run.stderr
        out.append(run.stdout)
    return [*out, json.dumps(value), json.dumps(value, ensure_ascii=False), repr(value)]


# -- 1. a value handed over, printed escaped --------------------------------------------
@pytest.mark.parametrize("value", list(HANDED))
def test_a_value_handed_over_is_redacted_in_every_form_it_is_printed_in(value):
    """`Redactor.literal` matched the value as it is: `declare -p` printed
    `"Zq8\\"Lm\\$3vX9pR!w"`, `json.dumps` `"Zq8\\"Lm$3v..."`, repr doubled a backslash,
    `ensure_ascii` wrote `P\\u00e4ssw...`, and a terminal's raw stream, kept as JSON in
    `state_json`, held even plain `env`'s line escaped: all were kept."""
    red = Redactor(literals=[value])
    assert red.screen is not None and red.screen.utf8  # the literal's forms: still screened
    texts = _printed(value)
    texts += [json.dumps({"raw": t}) for t in texts]  # as `state_json` keeps a raw stream
    for text in texts:
        out, n = red.text(text)
        assert n >= 1 and not any(piece in out for piece in HANDED[value]), (text, out)
        assert red.screen.text(text), text


def test_a_value_handed_over_printed_escaped_is_redacted_in_a_recorded_turn():
    """The recorder's path: a turn (JSON shape) whose observation, raw stream and action
    arguments hold the value escaped, redacted as the journal redacts it."""
    value = 'Zq8"Lm$3vX9pR!w'
    declare = _printed(value)[0].splitlines()[0]
    turn = {
        "action": {"kind": "tool_call", "arguments_json": json.dumps({"cmd": declare})},
        "observation": {"text": declare, "state_json": json.dumps({"raw": declare + "\r\n"})},
    }
    out, held = Redactor(literals=[value]).value(turn)
    assert held == 3 and "3vX9pR" not in json.dumps(out)


def test_a_cut_tail_of_an_escaped_value_is_redacted():
    """Our output cap cutting `declare -p`'s line inside the value's escaped form left a
    prefix no literal matched (only the value's own prefixes were looked for)."""
    value = 'Zq8"Lm$3vX9pR!w'
    text = "x" * 40 + '\ndeclare -x HUNT_PW="Zq8\\"Lm\\$3v'
    assert Redactor(literals=[value]).cut_tail(text) == (
        text[: text.index("Zq8")] + "<secret:env_value>",
        1,
    )


def test_a_value_handed_over_that_spells_a_field_name_never_cuts_a_record():
    """Keys are redacted now (5. below), but never our records' field names: a value
    handed over that spells one would take the journal's shape apart."""
    payload = {"system": {"task_description": "do it"}, "metadata": {"system": "x"}}
    assert Redactor(literals=["system", "task_description"]).value(payload) == (payload, 0)


# -- 2. a quoted password holding an escape ---------------------------------------------
def _quoted_forms(pw: str) -> list[tuple[str, str]]:
    """(text, what it holds for `pw`): JSON, YAML, a Python dict, JSON in a JSON string
    (a config file's text in `state_json`)."""
    dq = pw.replace("\\", "\\\\").replace('"', '\\"')
    in_json = json.dumps(pw)[1:-1]
    return [
        (json.dumps({"password": pw}), in_json),
        (f'password: "{dq}"', dq),
        (repr({"password": pw}), repr(pw)[1:-1]),
        (json.dumps(json.dumps({"password": pw})), json.dumps(in_json)[1:-1]),
    ]


@pytest.mark.parametrize(
    ("text", "redacted"),
    [
        ('{"password": "Zq8\\"Lm$3vX9pR!w"}', '{"password": "<secret:password>"}'),
        ('"password": "Kd7\\\\Wn4\\\\Yt2\\\\Hs9"', '"password": "<secret:password>"'),
        ('{"password": "S3cr3t\\"Passw0rd"}', '{"password": "<secret:password>"}'),
        ("{'password': 'it\\'s-Wn4x'}", "{'password': '<secret:password>'}"),
        ('{"access_token": "Ab3dE9xY\\"fGh1jKlM"}', '{"access_token": "<secret:token>"}'),
        (
            '"{\\"password\\": \\"Zq8\\\\\\"Lm$3vX9pR!w\\", \\"user\\": \\"bob\\"}"',
            '"{\\"password\\": \\"<secret:password>\\", \\"user\\": \\"bob\\"}"',
        ),
        (
            'declare -x DB_PASSWORD="Zq8\\"Lm\\$3vX9pR!w"',
            'declare -x DB_PASSWORD="<secret:password>"',
        ),
    ],
)
def test_a_quoted_password_runs_through_its_escapes_to_its_closing_quote(text, redacted):
    """A quoted value ended at its first backslash (`_value`'s `[^"\\s\\\\]`): the first
    three were kept whole, the third became `<secret:password>\\"Passw0rd`."""
    assert Redactor().text(text) == (redacted, 1)


def test_random_passwords_holding_a_quote_or_a_backslash_read_as_any_other():
    """Of random 20-character passwords of the 94 printable characters holding `"` or `\\`,
    in JSON, YAML, a Python dict and JSON in a JSON string: each is redacted whole exactly
    when the same password with those characters read as `#` is (a symbol either way; the
    rest are values led by `[`, `<`, `{`, a path or a template: kept, as documented), and
    none in part. Before, of the 348 such passwords in 1,000, 253 were kept whole in JSON
    and 95 in part (docs/security.md)."""
    rng = random.Random(1206)
    alphabet = [chr(c) for c in range(0x21, 0x7F)]
    pws = ["".join(rng.choice(alphabet) for _ in range(20)) for _ in range(3000)]
    pws = [p for p in pws if '"' in p or "\\" in p][:300]
    red, whole = Redactor(), 0
    for pw in pws:
        plain = pw.replace('"', "#").replace("\\", "#")
        for (text, held), (twin, _) in zip(_quoted_forms(pw), _quoted_forms(plain), strict=True):
            out, n = red.text(text)
            assert (n == 0) == (red.text(twin)[1] == 0), (text, out)
            assert out in (text, text.replace(held, "<secret:password>", 1)), (text, out)
            whole += n
    assert whole >= 0.9 * 4 * len(pws)


# -- 3. Basic credentials under a quoted header name, or after `=` -----------------------
BASIC = "YWxpY2U6U3VwM3JTM2NyZXRQdw=="


@pytest.mark.parametrize(
    "text",
    [
        "{'headers': {'Authorization': 'Basic %s', 'Host': 'httpbin'}}",  # Python's print
        '{"headers": {"Authorization": "Basic %s", "Host": "httpbin"}}',  # httpbin /headers
        '{"Proxy-Authorization": "Basic %s"}',
        "Authorization=Basic %s",
        "Proxy-Authorization: Basic %s",
        '"{\\"Authorization\\": \\"Basic %s\\"}"',
    ],
)
def test_basic_credentials_under_a_quoted_header_name_or_after_equals_are_redacted(text):
    text = text % BASIC
    assert Redactor().text(text) == (text.replace(BASIC, "<secret:basic_auth>"), 1)


@pytest.mark.parametrize(
    "text",
    [
        "self.authorization = basic_auth(user)",
        '{"Authorization": "Basic realm"}',
        'WWW-Authenticate: Basic realm="httpbin"',
    ],
)
def test_what_only_names_the_basic_scheme_is_kept(text):
    assert Redactor().text(text) == (text, 0)


# -- 4. a URL's password in slash-escaped JSON -------------------------------------------
def test_a_url_password_in_slash_escaped_json_is_redacted():
    """PHP's `json_encode` writes `/` as `\\/`: `mysql:\\/\\/root:PW@db.internal\\/app` had no
    literal `://` and was kept."""
    dsn = "mysql://root:S3cr3tPassw0rd9@db.internal/app"
    text = json.dumps({"dsn": dsn}, separators=(",", ":")).replace("/", "\\/")
    assert text == '{"dsn":"mysql:\\/\\/root:S3cr3tPassw0rd9@db.internal\\/app"}'
    assert Redactor().text(text) == (text.replace("S3cr3tPassw0rd9", "<secret:url_password>"), 1)
    slashed = json.dumps({"u": "redis://:a/b9Xq@cache:6379/0"}).replace("/", "\\/")
    assert "a\\/b9Xq" not in Redactor().text(slashed)[0]
    in_json = json.dumps(text)  # such JSON in a terminal's raw stream (`state_json`)
    assert Redactor().text(in_json)[0] == in_json.replace(
        "S3cr3tPassw0rd9", "<secret:url_password>"
    )


@pytest.mark.parametrize(
    "text",
    [
        '{"url":"http:\\/\\/host:8080\\/x@v2"}',  # a port, then a path holding `@`
        '{"url":"https:\\/\\/example.com\\/a:b@c"}',
        '{"home":"https:\\/\\/github.com\\/o\\/r"}',
        "/^(?:([^#/:?]+):)?(?:\\/\\/((?:([^#/?@]*)@)?",  # a JavaScript regex (fast-uri's)
    ],
)
def test_slash_escaped_urls_without_a_password_are_kept(text):
    assert Redactor().text(text) == (text, 0)


def test_the_screen_flags_and_pass1_redacts_every_new_shape(tmp_path):
    """`process` redacts whole only what its screen flags: each shape above, among
    random neighbours, must be flagged, and pass 1 must redact as redacting whole."""
    lines = [
        '{"password": "Zq8\\"Lm$3vX9pR!w"}',
        '"password": "Kd7\\\\Wn4\\\\Yt2\\\\Hs9"',
        "{'password': 'Pässwört9\\'x'}",
        json.dumps(json.dumps({"password": 'Zq8"Lm$3vX9pR!w'})),
        f"{{'headers': {{'Authorization': 'Basic {BASIC}'}}}}",
        f'{{"Proxy-Authorization": "Basic {BASIC}"}}',
        f"Authorization=Basic {BASIC}",
        '{"dsn":"mysql:\\/\\/root:S3cr3tPassw0rd9@db.internal\\/app"}',
    ]
    kept = ["password = os.environ['DB_PASSWORD']", '{"token": "\\u0067\\u0068"}', "ok"]
    assert_screen_flags(lines, kept, seed=1206)
    secrets = ("3vX9pR", "Wn4", "Yt2", "rt9", BASIC, "S3cr3tPassw0rd9")
    assert_pass1_redacts_as_whole(tmp_path, lines, secrets)


# -- 5. a secret used as a mapping's key -------------------------------------------------
GHP = "ghp_vXFts0YdGblwpbYm7ObXvq10BbcSuU7GHSYz"
GHP2 = "ghp_aB3dE9xYfGh1jKlMn0pQr7sTuV2wX4yZ6a8b"


def test_a_secret_used_as_a_metadata_key_never_reaches_the_raw_store(tmp_path):
    """The hunt's repro: a record whose metadata maps a GitHub token to `owner token` was
    imported with the token verbatim in raw (only values were redacted); `process` and
    `redact --check` found it later. Two such keys stay two entries."""
    t = generate(SyntheticConfig(n=1, seed=3))[0]
    meta = {**t.metadata, GHP: "owner token", GHP2: "second", "note": "kept"}
    src = write_jsonl(tmp_path / "in.jsonl", [dataclasses.replace(t, metadata=meta).with_id()])
    report = import_paths([src], tmp_path / "raw", ImportConfig(workers=1))
    assert sum(report.imported.values()) == 1, report
    [stored] = read_records(tmp_path / "raw")
    text = json.dumps(stored.to_dict(), default=str)
    assert GHP[4:] not in text and GHP2[4:] not in text
    placed = {k: v for k, v in stored.metadata.items() if "<secret:" in k}
    assert sorted(placed) == ["<secret:github_token>", "<secret:github_token> (2)"]
    assert sorted(placed.values()) == ["owner token", "second"]
    assert stored.metadata["note"] == "kept" and stored.redactions >= 2
    assert list(find_secrets(stored)) == []


def test_keys_redacted_alike_stay_distinct_and_redacting_again_changes_nothing():
    """Keys that redact to one placeholder, or to a key the mapping holds, stay distinct:
    a changed key takes ` (2)`, ` (3)`, ...; an unchanged key keeps its name; the same
    for an Arrow map's `(key, value)` pairs, as `process` holds `metadata`."""
    d = {"metadata": {GHP: "a", "<secret:github_token>": "b", GHP2: "c"}}
    once = redact_record(d)
    assert once["metadata"] == {
        "<secret:github_token> (2)": "a",
        "<secret:github_token>": "b",
        "<secret:github_token> (3)": "c",
    }
    assert once["redactions"] == 3 and redact_record(once) == once
    pairs = redact_record({"metadata": [(GHP, "a"), (GHP2, "c"), ("k", "v")]})
    assert pairs["metadata"] == [
        ("<secret:github_token>", "a"),
        ("<secret:github_token> (2)", "c"),
        ("k", "v"),
    ]


def test_a_findings_path_never_shows_a_key_that_is_a_secret():
    """`redact --check` names a finding by its path: a secret key holding a secret value
    was shown in it (`metadata.ghp_...`); the key is named as it redacts now."""
    found = list(find_secrets({"metadata": {GHP: f"token {GHP2}"}}, Redactor()))
    assert sorted(found) == [("metadata.<secret:github_token>", "github_token")] * 2
