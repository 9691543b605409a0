"""Codex: the agent's text in a response whose calls made no turn is said, never lost in
silence (hunt 1205g: `Done: 2 files.` after a call Codex never answered vanished; the one
warning was the call's)."""

from __future__ import annotations

import json

from worldtrace.collectors.importers import import_paths

SID = "0199aaaa-bbbb-7ccc-8ddd-eeeeffff0000"


def rollout(tmp_path, unanswered: bool):
    items = [
        ("session_meta", {"id": SID, "timestamp": "2025-09-01T12:00:00.000Z", "cwd": "/w", "originator": "codex_cli_rs", "cli_version": "0.36.0"}),
        ("response_item", {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "list files"}]}),
        ("response_item", {"type": "function_call", "name": "shell", "arguments": json.dumps({"command": ["bash", "-lc", "ls"]}), "call_id": "call_1"}),
        ("response_item", {"type": "function_call_output", "call_id": "call_1", "output": "Exit code: 0\nWall time: 0.1 seconds\nOutput:\na\n"}),
        ("response_item", {"type": "function_call", "name": "shell", "arguments": json.dumps({"command": ["bash", "-lc", "sleep 100"]}), "call_id": "call_4"}),
        ("response_item", {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Done: 2 files."}]}),
    ]  # fmt: skip
    if not unanswered:
        del items[4]
    f = tmp_path / f"rollout-2025-09-01T12-00-00-{SID}.jsonl"
    stamp = "2025-09-01T12:00:{:02d}.000Z"
    f.write_text("".join(json.dumps({"timestamp": stamp.format(n), "type": t, "payload": p}) + "\n" for n, (t, p) in enumerate(items)))  # fmt: skip
    return import_paths([f], tmp_path / "out")


def test_text_beside_a_call_that_made_no_turn_is_reported(tmp_path):
    said = [str(p) for p in rollout(tmp_path, unanswered=True).problems]
    assert any("unpaired_call" in w and "call_4" in w for w in said), said
    assert any("line 6" in w and "message_not_imported" in w for w in said), said


def test_the_same_text_after_every_call_is_the_final_message(tmp_path):
    report = rollout(tmp_path, unanswered=False)
    assert report.imported["codex"] == 1 and report.problems == []
