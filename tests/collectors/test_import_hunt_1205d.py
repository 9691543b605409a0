"""Found (a user's import session, 2026-12-05): a file name that is not UTF-8 crashed the
whole import before any file was read; ShareGPT/Hermes observations re-serialized their
JSON with `\\uXXXX` escapes and sorted keys; a Claude Code Bash call without its
`toolUseResult` had no exit code where the docs promise 0; the Gemini CLI docs said
`resultDisplay` is not read while it is; a file named twice had its warnings said twice."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

from worldtrace.collectors.importers import import_paths
from worldtrace.schemas import read_records

from .test_import_claude_code import Session, imported, obs, shell, text, use
from .test_import_codex_exec import exec_call, framed, stdin
from .test_import_codex_exec import imported as codex_imported
from .test_import_codex_exec import start as codex_start
from .test_import_gemini_cli import Session as GeminiSession
from .test_import_gemini_cli import one, sh
from .test_import_robustness import chat

DOCS = Path(__file__).resolve().parents[2] / "docs" / "importers.md"


def run(env, *args):
    """The installed CLI; its output decoded keeping any byte that is not UTF-8 visible."""
    return subprocess.run(
        ["worldtrace", "import", *map(str, args)],
        capture_output=True, text=True, errors="surrogateescape", env=env,
    )  # fmt: skip


def stored(env):
    return {t.source.origin_id: t for t in read_records(f"{env['WORLDTRACE_STORE']}/raw/import")}


# -- a file name that is not UTF-8 ------------------------------------------------------


def test_a_file_name_that_is_not_utf8_is_imported_under_an_escaped_path(tmp_path, wt_env):
    """Found: `caf\\xe9.jsonl` (Latin-1 bytes) in a walked directory crashed the whole run
    with a UnicodeEncodeError ("surrogates not allowed") before any file was read: the
    path cannot be stored as UTF-8. Its bytes that are not UTF-8 are written `\\xNN`
    (a backslash `\\\\`) in origin_path, origin ids and problems: stable, so importing it
    again (walked or named) finds its records present."""
    d = tmp_path / "in"
    d.mkdir()
    (d / "good.jsonl").write_text(json.dumps(chat("g")) + "\n")
    bad = d / os.fsdecode(b"caf\xe9.jsonl")
    bad.write_text(json.dumps(chat("named")) + "\n" + json.dumps({**chat(""), "id": None})
                   + "\n{broken\n")  # fmt: skip
    slash = d / os.fsdecode(b"a\\b\xff.jsonl")  # a backslash of its own: escaped too
    slash.write_text(json.dumps(chat("s")) + "\n")
    r = run(wt_env, d)
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    got = stored(wt_env)
    assert sorted(got) == ["caf\\xe9:2", "g", "named", "s"]
    assert got["named"].source.origin_path == f"{d.resolve()}/caf\\xe9.jsonl"
    assert got["s"].source.origin_path == f"{d.resolve()}/a\\\\b\\xff.jsonl"
    assert got["g"].source.origin_path == str((d / "good.jsonl").resolve())
    [problem] = [line for line in r.stderr.splitlines() if "invalid_json" in line]
    assert problem.startswith(f"{d}/caf\\xe9.jsonl:line 3: invalid_json: ")
    for again in (d, bad):  # walked or named: the same origin path, already present
        r = run(wt_env, again)
        assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
        assert "already present" in r.stdout
    assert len(list(read_records(f"{wt_env['WORLDTRACE_STORE']}/raw/import"))) == 4


# -- JSON re-serialized into observations -------------------------------------------------

HERMES = """\
{"id": "h1", "conversations": [{"from": "human", "value": "Weather in Zürich?"}, {"from": "gpt", "value": "<tool_call>\\n{\\"name\\": \\"get_weather\\", \\"arguments\\": {\\"city\\": \\"Zürich\\"}}\\n</tool_call>"}, {"from": "tool", "value": "<tool_response>\\n{\\"name\\": \\"get_weather\\", \\"content\\": {\\"city\\": \\"Zürich\\", \\"summary\\": \\"Schnee ❄\\", \\"temp\\": -2}}\\n</tool_response>"}, {"from": "gpt", "value": "It is -2 °C in Zürich."}]}
{"id": "h2", "conversations": [{"from": "human", "value": "Two cities"}, {"from": "function_call", "value": "[{\\"name\\": \\"w\\", \\"arguments\\": {\\"city\\": \\"Köln\\"}}, {\\"name\\": \\"w\\", \\"arguments\\": {\\"city\\": \\"Málaga\\"}}]"}, {"from": "observation", "value": "[{\\"city\\": \\"Köln\\", \\"t\\": 3}, {\\"city\\": \\"Málaga\\", \\"t\\": 17}]"}, {"from": "gpt", "value": "ok"}]}
"""  # the user's file, as written


def test_sharegpt_json_in_observations_keeps_its_characters_and_key_order(tmp_path):
    """Found: a `{name, content}` body's content, a JSON list split across parallel calls
    and a top-level `system` that is no string were written back with `\\u00fc` escapes
    and sorted keys: not what the dataset wrote, nor what the model read."""
    f = tmp_path / "hermes.jsonl"
    unsorted = {"id": "h3", "system": {"rolle": "Wetterdienst", "ort": "Zürich"}, "conversations": [
        {"from": "system", "value": "Antworte kurz."},
        {"from": "human", "value": "Und jetzt?"},
        {"from": "function_call", "value": json.dumps({"name": "w", "arguments": {}})},
        {"from": "observation", "value": json.dumps(
            {"name": "w", "content": {"temp": -2, "city": "Zürich", "wind": ["Föhn"]}},
            ensure_ascii=False)},
    ]}  # fmt: skip
    alone = {**unsorted, "id": "h4", "conversations": unsorted["conversations"][1:]}
    f.write_text(HERMES + json.dumps(unsorted) + "\n" + json.dumps(alone) + "\n", "utf-8")
    r = import_paths([f], tmp_path / "out")
    assert not r.errors, r.problems
    got = {t.source.origin_id: t for t in read_records(tmp_path / "out")}
    seen = {k: [x.observation.text for x in t.turns] for k, t in got.items()}
    assert seen == {
        "h1": ['{"city": "Zürich", "summary": "Schnee ❄", "temp": -2}'],
        "h2": ['{"city": "Köln", "t": 3}', '{"city": "Málaga", "t": 17}'],
        "h3": ['{"temp": -2, "city": "Zürich", "wind": ["Föhn"]}'],  # the dataset's order
        "h4": ['{"temp": -2, "city": "Zürich", "wind": ["Föhn"]}'],
    }
    system = '{"rolle": "Wetterdienst", "ort": "Zürich"}'
    assert got["h3"].metadata["agent_system_prompt"] == f"{system}\n\nAntworte kurz."
    assert got["h4"].metadata["agent_system_prompt"] == system  # alone: the same text
    assert got["h1"].turns[0].action.text == 'get_weather({"city": "Zürich"})'


def test_codex_keystrokes_arguments_keep_their_characters(tmp_path):
    """Found: the keys written to a terminal session were `\\u00fc` escapes in the
    action's `arguments_json` (its text had them as typed)."""
    r = codex_start()
    r.item(exec_call("c1", "python3 -i", tty=True))
    r.item({"type": "function_call_output", "call_id": "c1",
            "output": framed(">>> ", sid=7)})  # fmt: skip
    r.item(stdin("c2", 7, "print('grüß')\n"))
    r.item({"type": "function_call_output", "call_id": "c2",
            "output": framed("grüß\n>>> ", sid=7)})  # fmt: skip
    [t], problems = codex_imported(tmp_path, r)
    assert problems == []
    action = t.turns[1].action
    assert (action.kind, action.text) == ("keystrokes", "print('grüß')\n")
    assert action.arguments_json == (
        '{"duration": 5.0, "keystrokes": "print(\'grüß\')\\n", "session_id": 7}'
    )


# -- Claude Code: a Bash call's exit code without toolUseResult ---------------------------


def test_a_bash_result_without_tool_use_result_exits_0_unless_it_may_not_have(tmp_path):
    """Found: a successful Bash call had exit code 0 when its event kept a `toolUseResult`
    dict, and none without one (older versions; one event answering several calls),
    while the docs say 0 unless the result says `Exit code N`. Claude Code calls a
    non-zero exit an error, except grep/rg/find/diff/test/[ (the first word of the last
    command of a pipeline or list) exiting 1: only its toolUseResult tells those apart,
    so without one their exit code is unknown (any segment's first word is looked at: a
    false 0 is worse than none). A failure without `Exit code N` is no 0."""
    s = Session()
    s.user("Look around")
    calls = [
        ("t1", "pytest -q", "1 passed in 0.01s", False),
        ("t2", "mkdir -p build", "(Bash completed with no output)", False),
        ("t3", "grep -rn TODO src", "(Bash completed with no output)", False),  # 0 or 1
        ("t4", "ls src | grep -c py", "3", False),
        ("t5", "git diff --stat", "ok", False),  # a program's first word only
        ("t6", "(cd src && grep -q x a.py)", "(Bash completed with no output)", False),
        ("t7", "false", "Exit code 1", True),
        ("t8", "cat nothing", "cat: nothing: No such file or directory", True),
    ]
    for tid, command, result, error in calls:
        s.say(f"m{tid}", use(tid, "Bash", command=command))
        s.result(tid, result, error=error)
    # two parallel calls answered in one event: its toolUseResult is neither's alone
    s.say("m9", use("t9", "Bash", command="echo a"), use("t10", "Bash", command="test -f x"))
    s.user([{"tool_use_id": k, "type": "tool_result", "content": v} for k, v in
            (("t9", "a"), ("t10", "(Bash completed with no output)"))],
           toolUseResult=shell("a\n"))  # fmt: skip
    s.say("m11", use("t11", "Bash", command="pytest -q"))
    s.result("t11", "1 passed", tur=shell("1 passed\n"))  # kept: as before
    s.say("m12", text("Done."))
    [t], problems = imported(tmp_path, s)
    assert problems == []
    assert [(o[0], o[1], o[2]) for o in obs(t)] == [
        ("1 passed in 0.01s", False, 0),
        ("", False, 0),
        ("", False, None),
        ("3", False, None),
        ("ok", False, 0),
        ("", False, None),
        ("", True, 1),
        ("cat: nothing: No such file or directory", True, None),
        ("a", False, 0),
        ("", False, None),
        ("1 passed\n", False, 0),
    ]


# -- docs: Gemini CLI's resultDisplay -----------------------------------------------------


def test_the_docs_say_what_gemini_cli_reads_of_result_display(tmp_path):
    """Found: the format table says a summarized shell text is replaced by `resultDisplay`
    (what the code does), the "Not read yet" note that `resultDisplay` is not read."""
    s = GeminiSession()
    s.user("go")
    call = sh("a", "pytest", "All 120 tests passed.")  # the summarizer's words
    call["resultDisplay"] = "120 passed in 3.2s"
    s.gemini("", call)
    t, _ = one(s, tmp_path)
    assert t.turns[0].observation.text == "120 passed in 3.2s"  # read
    docs = DOCS.read_text()
    gemini = docs[docs.index("**Gemini CLI") :]
    unread = gemini[gemini.index("**Not read yet:**") :].split("\n\n")[0]
    assert not re.search(r"`resultDisplay`[^.;]* (is|are) not read", unread), unread
    assert "cannot be told from output and stays as text" not in unread


# -- a file named twice -------------------------------------------------------------------


def test_a_file_named_twice_or_through_a_link_is_read_once(tmp_path):
    """Found: the same file named twice (or a symlink to it beside it in a walk) was read
    twice: its records were present the second time, but its warnings said twice."""
    d = tmp_path / "in"
    d.mkdir()
    rec = chat("w")
    rec["messages"].append({"role": "bogus", "content": "?"})  # a warning
    f = d / "a.jsonl"
    f.write_text(json.dumps(rec) + "\n")
    (d / "link.jsonl").symlink_to(f)
    r = import_paths([f, f, d], tmp_path / "out")
    assert (r.files, r.imported["openai"], sum(r.present.values())) == (1, 1, 0)
    assert sum(r.warnings.values()) == 1, r.problems
