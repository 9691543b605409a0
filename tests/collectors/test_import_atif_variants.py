"""ATIF as real agents write it: Terminus-2's results without a `source_call_id` (the
terminal output after all of a step's keystrokes) and a subagent's result, which lives
in its own trajectory file (`subagent_trajectory_ref`). Our own fixtures."""

from __future__ import annotations

import json

from worldtrace.collectors.importers import import_paths
from worldtrace.schemas import validate_dict

from .test_import_fidelity import items


def keys(cid, text):
    args = {"keystrokes": text, "duration": 0.1}
    return {"tool_call_id": cid, "function_name": "bash_command", "arguments": args}


def atif(*steps):
    head = [
        {"step_id": 1, "source": "system", "message": "You solve command-line tasks."},
        {"step_id": 2, "source": "user", "message": "Create hello.txt containing hi"},
    ]
    return {
        "schema_version": "ATIF-v1.5",
        "session_id": "s-1",
        "agent": {"name": "terminus-2", "version": "2.0.0", "model_name": "m"},
        "steps": head + [{"step_id": 3 + i, **s} for i, s in enumerate(steps)],
    }


def imported(tmp_path, data):
    f = tmp_path / "trajectory.json"
    f.write_text(json.dumps(data))
    [t], problems = items(f)
    assert validate_dict(t.to_dict()) == []
    return t, problems


SCREEN = (
    "New Terminal Output:\n\nroot@x:/app# echo hi > hello.txt\nroot@x:/app# cat hello.txt\nhi\n"
)
DONE = (
    "Current terminal state:\nroot@x:/app# \n\nAre you sure you want to mark the task as complete?"
)
TERMINUS = atif(
    {"source": "agent", "message": "Plan: write the file.",
     "tool_calls": [keys("call_0_1", "echo hi > hello.txt\n"), keys("call_0_2", "cat hello.txt\n")],
     "observation": {"results": [{"content": SCREEN}]}},
    {"source": "agent", "message": "Task complete.",
     "tool_calls": [{"tool_call_id": "call_1_done", "function_name": "mark_task_complete", "arguments": {}}],
     "observation": {"results": [{"content": DONE}]}},
)  # fmt: skip


# -- F5: results without a source_call_id answer their own step ----------------------


def test_terminus2_terminal_output_answers_the_steps_last_call(tmp_path):
    t, problems = imported(tmp_path, TERMINUS)
    assert [x.action.name for x in t.turns] == ["bash_command", "mark_task_complete"]
    # the screen after both keystrokes answers the second; what the first printed is
    # unknown: no turn (`unpaired_call`, 12-06b; it was a turn answered "").
    # Terminus-2's header is its own text, not the terminal's (test_import_harness_text);
    # DONE is no exact completion question (it is cut short), so it stays as it is
    screen = SCREEN.removeprefix("New Terminal Output:\n")
    assert [x.observation.text for x in t.turns] == [screen, DONE]
    assert [p.kind for p in problems] == ["unpaired_call"]


def test_as_many_idless_results_as_calls_pair_by_position(tmp_path):
    step = {
        "source": "agent",
        "tool_calls": [keys("a", "ls\n"), keys("b", "pwd\n")],
        "observation": {"results": [{"content": "hello.txt"}, {"content": "/app"}]},
    }
    t, problems = imported(tmp_path, atif(step))
    assert [x.observation.text for x in t.turns] == ["hello.txt", "/app"]
    assert problems == []


def test_idless_results_beside_ones_with_ids_answer_the_last_call(tmp_path):
    results = [
        {"source_call_id": "a", "content": "A"},
        {"content": "x"},
        {"content": "y"},
        {"source_call_id": "zz", "content": "Z"},  # answers no call: as before
    ]
    step = {
        "source": "agent",
        "tool_calls": [keys("a", "ls\n"), keys("b", "pwd\n")],
        "observation": {"results": results},
    }
    t, problems = imported(tmp_path, atif(step))
    # as many id-less results as calls, but not alone: joined, to the last call
    assert [x.observation.text for x in t.turns] == ["A", "x\ny"]
    assert [(p.kind, p.where) for p in problems] == [
        ("unpaired_result", "steps[2].observation.results[3]")
    ]


# -- F6: a subagent's result is in its own trajectory ---------------------------------

SUB = {
    "session_id": "sub-1",
    "trajectory_path": "subagents/sub-1.json",
    "extra": {"summary": "The failing module is a.py"},
}
SUBAGENT = atif(
    {"source": "agent", "message": "Running two things",
     "tool_calls": [
         {"tool_call_id": "t1", "function_name": "Bash", "arguments": {"command": "pytest -q"}},
         {"tool_call_id": "t2", "function_name": "Task", "arguments": {"prompt": "find the failing module"}}],
     "observation": {"results": [
         {"source_call_id": "t1", "content": "1 failed"},
         {"source_call_id": "t2", "content": None, "subagent_trajectory_ref": [SUB]}]}},
)  # fmt: skip


def test_subagent_result_keeps_its_summary_and_is_reported(tmp_path):
    t, problems = imported(tmp_path, SUBAGENT)
    assert [x.observation.text for x in t.turns] == ["1 failed", "The failing module is a.py"]
    [p] = problems
    assert (p.kind, p.fatal, p.where) == (
        "subagent_not_imported",
        False,
        "steps[2].observation.results[1]",
    )
    assert "subagents/sub-1.json" in p.message and "not imported" in p.message
    # and the import reports the kind
    r = import_paths([tmp_path / "trajectory.json"], tmp_path / "out")
    assert r.imported["atif"] == 1 and r.warnings["subagent_not_imported"] == 1


def test_subagent_without_summary_or_with_content(tmp_path):
    bare = {"session_id": "sub-2", "trajectory_path": "subagents/sub-2.json"}
    results = [
        {"source_call_id": "t1", "content": "", "subagent_trajectory_ref": [bare]},
        {"source_call_id": "t2", "content": "it is a.py", "subagent_trajectory_ref": [SUB]},
    ]
    step = {**SUBAGENT["steps"][2], "observation": {"results": results}}
    t, problems = imported(tmp_path, atif(step))
    # no summary: nothing made up; the content, when there is one, is the observation
    assert [x.observation.text for x in t.turns] == ["", "it is a.py"]
    assert [(p.kind, p.where) for p in problems] == [
        ("subagent_not_imported", "steps[2].observation.results[0]"),
        ("subagent_not_imported", "steps[2].observation.results[1]"),
    ]
    assert "subagents/sub-2.json" in problems[0].message
    assert "subagents/sub-1.json" in problems[1].message


def test_a_source_call_id_that_is_no_string_names_its_field(tmp_path):
    """Found: a `source_call_id` holding an object ended the file with `invalid:
    TypeError: unhashable type: 'dict'`, naming no field."""
    bad = atif(
        {"source": "agent", "message": "m", "tool_calls": [keys("c1", "ls\n")],
         "observation": {"results": [{"source_call_id": {"id": "c1"}, "content": "a"}]}},
    )  # fmt: skip
    f = tmp_path / "trajectory.json"
    f.write_text(json.dumps(bad))
    [problem] = items(f)[1]
    assert problem.kind == "invalid" and problem.message == (
        'steps[2].observation.results[0].source_call_id: expected a string, got {"id": "c1"}'
    )
