"""Codex, part 4: the TypeScript codex-cli's sessions (`~/.codex/sessions/rollout-<date>-
<id>.json`, the CLI before codex-rs). Our own fixtures, in the shape codex-cli wrote them:
save-rollout.ts's `{session: {timestamp, id, instructions[, model, provider,
lastResponseId]}, items}` (pretty-printed), agent-loop.ts's `function_call_output` of a
`shell` call (`{"output", "metadata": {"exit_code", "duration_seconds"}}`, `aborted`, `no
function found`) and handle-exec-command.ts's answers."""

from __future__ import annotations

import json

from worldtrace.collectors.importers import ImportConfig, detect_format, import_paths
from worldtrace.schemas import read_records, validate_dict

from .test_import_claude_code import obs
from .test_import_codex import CWD, bash, out, say, think, user
from .test_import_fidelity import items

TS_ID = "6f1c2b9e-4d3a-4c55-9a0e-1b2c3d4e5f60"
MODEL = "o4-mini"


def ran(output, code=0, seconds=0.1):
    """handle-exec-command.ts `convertSummaryToResult`, as agent-loop.ts keeps it."""
    return json.dumps({"output": output, "metadata": {"exit_code": code, "duration_seconds": seconds}})  # fmt: skip


def session(tmp_path, items_, **head):
    head = {"timestamp": "2025-05-02T10:00:00.000Z", "id": TS_ID,
            "instructions": "Prefer small commits.", "model": MODEL, "provider": "openai",
            "lastResponseId": "resp_67f", **head}  # fmt: skip
    path = tmp_path / "sessions" / f"rollout-2025-05-02-{TS_ID}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"session": head, "items": items_}, indent=2))
    return path


def imported(path):
    trajs, problems = items(path)
    for t in trajs:
        assert validate_dict(t.to_dict()) == [], t
    return trajs, problems


def kinds(problems):
    return [(p.kind, p.where) for p in problems]


def test_a_typescript_session_is_one_trajectory(tmp_path):
    """Found: a TypeScript codex-cli session was `unrecognized` (one JSON document, not a
    rollout's lines). Now it is one trajectory, as a rollout is: its `shell` calls are
    commands, their output without codex-cli's JSON around it (stdout, else stderr) with
    the exit code; the session's id, model and start are the trajectory's."""
    f = session(tmp_path, [
        user("List the files and show notes.txt"),
        think("Look first."),
        bash("c1", "ls"),
        out("c1", ran("notes.txt\nsrc\n")),
        bash("c2", "cat notes.txt missing"),
        out("c2", ran("hello\ncat: missing: No such file or directory\n", code=1)),
        say("notes.txt says hello; there is no `missing`."),
    ])  # fmt: skip
    assert detect_format(f, json.loads(f.read_text())) == "codex"
    (t,), problems = imported(f)
    assert problems == []
    assert t.source.origin_format == "codex" and t.source.origin_id == TS_ID
    assert [(x.action.kind, x.action.text) for x in t.turns] == [
        ("command", "ls"),
        ("command", "cat notes.txt missing"),
    ]
    assert obs(t) == [
        ("notes.txt\nsrc\n", False, 0, False),
        ("hello\ncat: missing: No such file or directory\n", True, 1, False),
    ]
    assert t.turns[0].reasoning == "Look first."
    assert t.task.instruction == "List the files and show notes.txt"
    assert t.agent.model == MODEL
    assert t.started_at.isoformat().startswith("2025-05-02T10:00:00")
    meta = dict(t.metadata)
    assert meta["user_instructions"] == "Prefer small commits."
    assert meta["final_message"] == "notes.txt says hello; there is no `missing`."


def test_what_codex_cli_answered_itself_is_no_turn(tmp_path):
    """Found: read as a rollout's, codex-cli's own answers would be turns: `aborted` with
    the exit code 1 it gives a call a cancel left open became a failed command whose
    output was "aborted", and the others the JSON text itself. Each is no turn, with a
    warning naming the item: the user declined the command, the approval policy rejected
    it, a cancel came before it answered or while it ran, no such tool."""
    f = session(tmp_path, [
        user("Clean up the build"),
        bash("c1", "rm -rf build"),
        out("c1", json.dumps({"output": "aborted", "metadata": {}})),
        user("No, don't do that — keep going though."),
        bash("c2", "sudo rm -rf /"),
        out("c2", json.dumps({"output": "aborted", "metadata": {
            "error": "command rejected", "reason": "Command rejected by auto-approval system."}})),
        bash("c3", "sleep 100"),
        out("c3", json.dumps({"output": "aborted", "metadata": {"exit_code": 1, "duration_seconds": 0}})),
        bash("c4", "make"),
        out("c4", json.dumps({"output": "", "metadata": {}})),
        {"type": "function_call", "name": "browser", "arguments": "{}", "call_id": "c5"},
        out("c5", "no function found"),
        bash("c6", "ls build"),
        out("c6", ran("", code=0)),
    ])  # fmt: skip
    (t,), problems = imported(f)
    assert [x.action.text for x in t.turns] == ["ls build"]
    assert obs(t) == [("", False, 0, False)]
    not_run = [(p.where, p.message) for p in problems if p.kind == "not_run"]
    assert [w for w, _ in not_run] == ["items[2]", "items[5]", "items[7]", "items[9]", "items[11]"]
    said = " | ".join(m for _, m in not_run)
    for why in ("the user declined", "approval policy rejected", "cancelled before the call answered",
                "cancelled while the command ran", "no such tool"):  # fmt: skip
        assert why in said, said


def test_a_malformed_item_names_the_item_and_the_field(tmp_path):
    """An item codex-cli would not write is named by its place in `items` (there are no
    lines), with its field; only it is lost. An item of a type it never recorded is
    reported, not silently dropped."""
    f = session(tmp_path, [
        user("Show the date"),
        {"type": "function_call", "name": "shell", "arguments": "{}"},
        {"type": "telepathy", "text": "?"},
        bash("c1", "date"),
        out("c1", ran("Fri May  2 10:00:05 UTC 2025\n")),
    ])  # fmt: skip
    (t,), problems = imported(f)
    assert [x.action.text for x in t.turns] == ["date"]
    assert ("invalid", "items[1]") in kinds(problems)
    assert "call_id" in next(p.message for p in problems if p.kind == "invalid")
    assert ("message_not_imported", "items[2]") in kinds(problems)


def test_a_json_file_of_another_shape_is_not_taken(tmp_path):
    """Only the document codex-cli writes is taken: a `session` with more than its keys,
    or anything beside `session` and `items`, is left to the other formats."""
    f = session(tmp_path, [user("hi")], cwd=CWD)
    assert detect_format(f, json.loads(f.read_text())) != "codex"
    g = tmp_path / "other.json"
    g.write_text(json.dumps({"session": {"id": TS_ID, "timestamp": "2025-05-02T10:00:00Z"},
                             "items": [], "extra": 1}))  # fmt: skip
    assert detect_format(g, json.loads(g.read_text())) != "codex"


def test_format_codex_reads_a_session_written_on_one_line(tmp_path):
    """`--format codex` takes a `.json` file as a codex-cli session, pretty-printed or not
    (a `.json` file is never a rollout's lines)."""
    f = tmp_path / "s.json"
    f.write_text(json.dumps({"session": {"id": TS_ID, "timestamp": "2025-05-02T10:00:00Z"},
                             "items": [user("Show the date"), bash("c1", "date"), out("c1", ran("Fri\n"))]}))  # fmt: skip
    report = import_paths([f], tmp_path / "raw", ImportConfig(format="codex", workers=1))
    [t] = [t for g in sorted((tmp_path / "raw").rglob("*.parquet")) for t in read_records(g)]
    assert [x.action.text for x in t.turns] == ["date"] and report.problems == []
