"""What importers keep of a source and what they say they could not: content parts
that hold no text, ATIF step timestamps and system prompts, mini-swe-agent's system
message and its end-of-episode submit; and `validate` on a file that is one JSON
document. Our own fixtures, in the shapes the formats define."""

from __future__ import annotations

import json
import subprocess
from datetime import datetime, timezone

from worldtrace.collectors.importers import import_paths, parse_file
from worldtrace.collectors.importers.common import ImportProblem
from worldtrace.schemas import read_records, validate_dict

IMAGE = {"type": "image", "source": {"media_type": "image/png", "path": "images/step_2.png"}}
IMAGE_URL = {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}


def items(path):
    out = [i for _, i in parse_file(path)]
    trajs = [i for i in out if not isinstance(i, ImportProblem)]
    return trajs, [i for i in out if isinstance(i, ImportProblem)]


def warnings(problems, kind):
    return [p.message for p in problems if p.kind == kind and not p.fatal]


# -- 1. content parts that hold no text ----------------------------------------------


ATIF_IMAGES = {
    "schema_version": "ATIF-v1.6",
    "session_id": "img-1",
    "agent": {"name": "terminus", "version": "2"},
    "steps": [
        {"step_id": 1, "source": "user", "message": [{"type": "text", "text": "List the files."}, IMAGE]},
        {"step_id": 2, "source": "agent", "message": "Listing.",
         "tool_calls": [{"tool_call_id": "c1", "function_name": "bash", "arguments": {"command": "ls -l"}}],
         "observation": {"results": [{"source_call_id": "c1", "content": [
             {"type": "text", "text": "total 8\n-rw-r--r-- 1 a a 5 a.txt"}, IMAGE]}]}},
    ],
}  # fmt: skip


def test_atif_image_parts_add_no_text_and_are_reported(tmp_path):
    f = tmp_path / "trajectory.json"
    f.write_text(json.dumps(ATIF_IMAGES))
    [t], problems = items(f)
    assert t.turns[0].observation.text == "total 8\n-rw-r--r-- 1 a a 5 a.txt"  # no "\n" added
    assert t.task.instruction == "List the files."
    assert warnings(problems, "non_text_part") == [
        "task (steps[0].message): 1 image part not imported",
        "turn 0 observation (steps[1].observation.results[0].content): 1 image part not imported",
    ]
    assert all(str(f) in str(p) for p in problems)


OPENAI_IMAGES = {
    "id": "vision-1",
    "messages": [
        {"role": "user", "content": [{"type": "text", "text": "What is in this picture?"}, IMAGE_URL]},
        {"role": "assistant", "content": [{"type": "text", "text": "Let me look."}],
         "tool_calls": [{"id": "t1", "function": {"name": "describe_image", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "t1", "content": [
            {"type": "text", "text": "a cat"}, IMAGE_URL, IMAGE_URL, {"type": "text", "text": "on a mat"}]},
    ],
}  # fmt: skip


def test_openai_image_url_parts_add_no_text_and_are_reported(tmp_path):
    f = tmp_path / "vision.jsonl"
    f.write_text(json.dumps(OPENAI_IMAGES) + "\n")
    [t], problems = items(f)
    assert t.task.instruction == "What is in this picture?"
    # text parts are still joined with "\n" (as before); the images between add nothing
    assert t.turns[0].observation.text == "a cat\non a mat"
    assert t.turns[0].reasoning == "Let me look."
    assert warnings(problems, "non_text_part") == [
        "turn 0 observation (messages[2].content): 2 image_url parts not imported",
        "task (messages[0].content): 1 image_url part not imported",
    ]
    assert {p.where for p in problems} == {"line 1"}
    r = import_paths([f], tmp_path / "out")
    assert r.warnings["non_text_part"] == 2 and sum(r.imported.values()) == 1


# -- 2. ATIF timestamps and the system step ------------------------------------------


ATIF_TIMED = {
    "schema_version": "ATIF-v1.5",
    "session_id": "timed-1",
    "agent": {"name": "terminus", "version": "2", "model_name": "m"},
    "steps": [
        {"step_id": 1, "timestamp": "2025-10-11T10:29:58Z", "source": "system",
         "message": "You are a terminal agent. Answer with tool calls."},
        {"step_id": 2, "timestamp": "2025-10-11T10:30:00Z", "source": "user", "message": "Make hello.txt"},
        {"step_id": 3, "timestamp": "2025-10-11T10:30:02Z", "source": "agent", "message": "",
         "tool_calls": [
             {"tool_call_id": "c1", "function_name": "bash", "arguments": {"command": "touch hello.txt"}},
             {"tool_call_id": "c2", "function_name": "bash", "arguments": {"command": "ls"}}],
         "observation": {"results": [{"source_call_id": "c1", "content": ""},
                                     {"source_call_id": "c2", "content": "hello.txt"}]}},
        {"step_id": 4, "timestamp": "2025-10-11T12:30:05+02:00", "source": "agent", "message": "",
         "tool_calls": [{"tool_call_id": "c3", "function_name": "bash", "arguments": {"command": "cat hello.txt"}}],
         "observation": {"results": [{"source_call_id": "c3", "content": ""}]}},
        {"step_id": 5, "source": "agent", "message": "no time on this one",
         "tool_calls": [{"tool_call_id": "c4", "function_name": "bash", "arguments": {"command": "pwd"}}],
         "observation": {"results": [{"source_call_id": "c4", "content": "/root"}]}},
    ],
}  # fmt: skip


def at(text):
    return datetime.fromisoformat(text)


def test_atif_keeps_step_timestamps_and_the_system_prompt(tmp_path):
    f = tmp_path / "trajectory.json"
    f.write_text(json.dumps(ATIF_TIMED))
    [t], problems = items(f)
    assert problems == []
    assert [x.started_at for x in t.turns] == [
        at("2025-10-11T10:30:02+00:00"),
        at("2025-10-11T10:30:02+00:00"),  # both calls of step 3
        at("2025-10-11T10:30:05+00:00"),
        None,  # the step has no timestamp: none is made up
    ]
    assert t.started_at == at("2025-10-11T10:29:58+00:00")  # the earliest step (system)
    assert t.ended_at is None
    assert t.metadata["agent_system_prompt"] == ATIF_TIMED["steps"][0]["message"]
    assert t.task.instruction == "Make hello.txt"
    assert validate_dict(t.with_id().to_dict()) == []
    # and through the store (Arrow timestamps)
    r = import_paths([f], tmp_path / "out")
    assert r.imported["atif"] == 1 and not r.errors
    [stored] = read_records(tmp_path / "out")
    assert stored.started_at == datetime(2025, 10, 11, 10, 29, 58, tzinfo=timezone.utc)
    assert stored.turns[2].started_at == datetime(2025, 10, 11, 10, 30, 5, tzinfo=timezone.utc)
    assert stored.metadata["agent_system_prompt"].startswith("You are a terminal agent")


def test_atif_timestamp_that_is_not_iso_8601_is_named(tmp_path):
    bad = json.loads(json.dumps(ATIF_TIMED))
    bad["steps"][3]["timestamp"] = 1760178605
    f = tmp_path / "trajectory.json"
    f.write_text(json.dumps(bad))
    trajs, problems = items(f)
    assert trajs == []
    [p] = problems
    assert (p.kind, p.fatal) == ("invalid", True)
    assert p.message == "steps[3].timestamp: expected an ISO 8601 timestamp, got 1760178605"


# -- 3. mini-swe-agent: the system message and the final submit ----------------------

MINI_SYSTEM = "You are a helpful assistant that can interact with a computer."


def mini(*tail):
    return {
        "trajectory_format": "mini-swe-agent-1",
        "info": {"exit_status": "Submitted"},
        "messages": [
            {"role": "system", "content": MINI_SYSTEM},
            {"role": "user", "content": "Please solve this issue: fix a.py"},
            {"role": "assistant", "content": "Look first.\n\n```bash\necho 'hello world'\n```"},
            {
                "role": "user",
                "content": "<returncode>0</returncode>\n<output>\nhello world\n</output>",
            },
            *tail,
        ],
    }


DIFF = "diff --git a/a.py b/a.py\n+x = 2\n"


def test_mini_swe_agent_keeps_the_system_prompt_and_submit_is_no_turn(tmp_path):
    f = tmp_path / "run.traj.json"
    submit = "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && git add -A && git diff --cached"
    f.write_text(
        json.dumps(
            mini(
                {"role": "assistant", "content": f"Done.\n\n```bash\n{submit}\n```"},
                {"role": "user", "content": DIFF},  # what mini-swe-agent writes: the submission
            )
        )
    )
    [t], problems = items(f)
    assert problems == []
    assert [(x.action.text, x.observation.text) for x in t.turns] == [
        ("echo 'hello world'", "hello world\n")  # the output's own last newline
    ]
    assert t.metadata["agent_system_prompt"] == MINI_SYSTEM
    assert (t.metadata["submit_command"], t.metadata["submission"]) == (submit, DIFF)
    assert t.outcome.status == "success"


def test_mini_swe_agent_bare_submit_with_empty_submission(tmp_path):
    """The shape of shared/formats/mini-swe-agent.local.traj.json: a bare message list,
    `echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT` answered by an empty user message."""
    f = tmp_path / "local.traj.json"
    msgs = mini(
        {"role": "assistant", "content": "End.\n\n```bash\necho COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT\n```"},
        {"role": "user", "content": ""},
    )["messages"]  # fmt: skip
    f.write_text(json.dumps(msgs))
    [t], problems = items(f)
    assert problems == [] and len(t.turns) == 1
    assert t.metadata["submit_command"] == "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"
    assert t.metadata["submission"] == ""
    assert t.metadata["agent_system_prompt"] == MINI_SYSTEM


def test_mini_swe_agent_marker_the_environment_answered_is_a_turn(tmp_path):
    """The marker not on the output's first line: mini-swe-agent went on, the output is
    an ordinary observation; a last command nothing answered is no turn, `unpaired_call`."""
    f = tmp_path / "run.traj.json"
    f.write_text(
        json.dumps(
            mini(
                {"role": "assistant", "content": "```bash\nls && echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT\n```"},
                {"role": "user", "content": "<returncode>0</returncode>\n<output>\na.py\nCOMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT\n</output>"},
                {"role": "assistant", "content": "```bash\npython a.py\n```"},
            )
        )
    )  # fmt: skip
    [t], problems = items(f)
    assert [(x.action.text, x.observation.text, x.observation.exit_code) for x in t.turns] == [
        ("echo 'hello world'", "hello world\n", 0),
        ("ls && echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT", "a.py\nCOMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT\n", 0),
    ]  # fmt: skip
    assert warnings(problems, "unpaired_call") == [
        "messages[6]: no result for 'python a.py'; no turn"
    ]
    assert "submit_command" not in t.metadata


# -- 4. validate on a file that is one JSON document ---------------------------------


def validate(env, *paths):
    r = subprocess.run(
        ["worldtrace", "validate", *map(str, paths)], capture_output=True, text=True, env=env
    )
    return r.returncode, r.stdout.splitlines()


SWE_TRAJ = {
    "environment": "swe_main",
    "trajectory": [{"action": "ls\n", "observation": "a.py\n", "thought": "look", "state": "{}"}],
    "history": [{"role": "system", "content": "You are an autonomous programmer."}],
    "info": {"exit_status": "submitted"},
}


def test_validate_says_once_that_a_file_is_one_json_document(tmp_path, wt_env):
    traj = tmp_path / "run.traj"
    traj.write_text(json.dumps(SWE_TRAJ, indent=2))  # pretty-printed, as SWE-agent writes
    code, out = validate(wt_env, traj)
    assert code == 1
    n = len(traj.read_text().splitlines())
    assert out == [
        f"{traj}: one JSON document over {n} lines, not JSONL (one record per line);"
        f" it reads as the swe-agent format: import it with `worldtrace import {traj}`"
    ]
    chat = tmp_path / "local.traj.json"
    chat.write_text(json.dumps(mini()["messages"], indent=1))
    code, out = validate(wt_env, chat)
    assert code == 1
    assert out == [
        f"{chat}: one JSON document in the mini-swe-agent format, not worldtrace records:"
        f" import it with `worldtrace import {chat}`"
    ]


def test_validate_pretty_printed_record_in_jsonl_is_one_line(tmp_path, wt_env):
    from worldtrace.collectors.synthetic import SyntheticConfig, generate

    [record] = generate(SyntheticConfig(n=1, seed=3))
    pretty = tmp_path / "one.jsonl"
    pretty.write_text(json.dumps(json.loads(record.to_json()), indent=2))
    code, out = validate(wt_env, pretty)
    assert code == 1 and len(out) == 1
    assert out[0].startswith(f"{pretty}: one JSON document over ")
    assert out[0].endswith(
        "write one record per line, or name the file .json (one record or a list)"
    )
    # the same record as JSONL, or pretty-printed in a .json file, is valid
    (tmp_path / "one-line.jsonl").write_text(record.to_json() + "\n")
    (tmp_path / "one.json").write_text(pretty.read_text())
    assert validate(wt_env, tmp_path / "one-line.jsonl", tmp_path / "one.json") == (0, [])


def test_validate_reads_a_raw_line_separator_inside_a_string_as_text(tmp_path, wt_env):
    """Found: `one_document` cut lines with `str.splitlines`, which also ends a line at
    U+2028, U+0085, \\v and \\f: JSON allows them raw inside a string, so a valid one-line
    record holding one was called 'one JSON document over 2 lines, not JSONL'."""
    from worldtrace.collectors.synthetic import SyntheticConfig, generate

    [record] = generate(SyntheticConfig(n=1, seed=3))
    d = json.loads(record.to_json())
    d["metadata"]["note"] = "first\u2028second\x85third\x0bfourth\x0cfifth"
    line = tmp_path / "one-line.jsonl"
    line.write_text(json.dumps(d, ensure_ascii=False) + "\n", encoding="utf-8")
    assert "\u2028" in line.read_text(encoding="utf-8")
    assert validate(wt_env, line) == (0, [])
