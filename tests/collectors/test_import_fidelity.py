"""Importers on the shapes real files have (reused tool-call ids, benchmark result runs,
SWE-agent system prompts and history-only .traj), reproduced in our own fixtures."""

from __future__ import annotations

import json

from worldtrace.collectors.importers import parse_file
from worldtrace.collectors.importers.common import ImportProblem
from worldtrace.pipelines.render import system_text
from worldtrace.sandboxes.base import ToolSpec
from worldtrace.schemas import validate_dict

PROFILE = json.dumps({"name": {"first_name": "Ana", "last_name": "Lee"}, "dob": "1990-01-01"})


def call(cid, name, args):
    fn = {"name": name, "arguments": json.dumps(args)}
    return {"role": "assistant", "content": None, "tool_calls": [{"id": cid, "type": "function", "function": fn}]}  # fmt: skip


def result(cid, name, content):
    return {"role": "tool", "tool_call_id": cid, "name": name, "content": content}


# tau-bench reuses a call id across the conversation (see shared/formats/tau-bench...).
REUSED = [
    {"role": "system", "content": "# Airline policy"},
    {"role": "user", "content": "What do I pay for 152 + 103?"},
    call("call_A", "get_user_details", {"user_id": "ana_1"}),
    result("call_A", "get_user_details", PROFILE),
    call("call_A", "calculate", {"expression": "152 + 103"}),
    result("call_A", "calculate", "255.0"),
    {"role": "assistant", "content": "It is 255."},
    {"role": "user", "content": "Cancel R1 then."},
    call("call_A", "cancel_reservation", {"reservation_id": "R1"}),
    result("call_A", "cancel_reservation", '{"status": "cancelled"}'),
]


def items(path):
    out = [i for _, i in parse_file(path)]
    return (
        [i for i in out if not isinstance(i, ImportProblem)],
        [i for i in out if isinstance(i, ImportProblem)],
    )


def test_reused_call_ids_pair_by_position(tmp_path):
    f = tmp_path / "chat.jsonl"
    f.write_text(json.dumps({"id": "c1", "messages": REUSED}) + "\n")
    [t], problems = items(f)
    assert [x.action.name for x in t.turns] == [
        "get_user_details",
        "calculate",
        None,  # what the agent said to its user, answered by the user
        "cancel_reservation",
    ]
    assert [x.observation.text for x in t.turns] == [
        PROFILE,
        "255.0",
        "Cancel R1 then.",
        '{"status": "cancelled"}',
    ]
    [warn] = problems
    assert (warn.kind, warn.fatal, warn.where) == ("repeated_call_id", False, "line 1")
    assert "call_A" in warn.message and str(f) in str(warn)


def test_what_the_agent_and_its_user_said_are_turns_in_order(tmp_path):
    """Found: a tau-bench run's conversation (what the agent asked its user, the
    simulated user's answers: half of the real file's interaction) was dropped without a
    word; only tool calls were turns. Now each agent message the user answers is a
    `text` turn, the reply its observation; the agent's unanswered last word is metadata;
    what fits neither is named in a warning."""
    msgs = [
        {"role": "system", "content": "# Airline policy"},
        {"role": "user", "content": "Cancel my flight."},
        {"role": "assistant", "content": "Your user id?", "reasoning_content": "need the id"},
        {"role": "user", "content": "ana_1"},
        {"role": "user", "content": "and it is R1"},  # two replies: one observation
        call("c1", "cancel_reservation", {"reservation_id": "R1"}),
        result("c1", "cancel_reservation", '{"status": "cancelled"}'),
        {"role": "user", "content": "hello?"},  # answers no agent message
        {"role": "system", "content": "reminder"},  # a later system message
        {"role": "assistant", "content": "Done."},
        {"role": "assistant", "content": "Anything else?"},
    ]
    f = tmp_path / "run.json"
    f.write_text(json.dumps({"messages": msgs}))
    [t], problems = items(f)
    assert [(x.action.kind, x.action.text, x.observation.text) for x in t.turns] == [
        ("text", "Your user id?", "ana_1\nand it is R1"),
        ("tool_call", 'cancel_reservation({"reservation_id": "R1"})', '{"status": "cancelled"}'),
    ]
    assert t.turns[0].reasoning == "need the id"
    assert t.task.instruction == "Cancel my flight."
    assert t.metadata["final_message"] == "Anything else?"
    assert sorted((p.kind, p.message) for p in problems) == [
        ("message_not_imported", "messages[7]: a user message that answers no agent message; not imported"),
        ("message_not_imported", "messages[8]: a system message after the first; not imported"),
        ("message_not_imported", "messages[9]: an agent message no user answered; not imported"),
    ]  # fmt: skip
    assert all(not p.fatal for p in problems) and validate_dict(t.to_dict()) == []


def test_results_never_joined_across_calls(tmp_path):
    msgs = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": "both", "tool_calls": [
            {"id": "a", "function": {"name": "f", "arguments": "{}"}},
            {"id": "b", "function": {"name": "g", "arguments": "{}"}}]},
        result("b", "g", "from g"),
        # unknown id: only a call no later result names by id; `a` is named: reported
        result("zz", None, "mislabelled"),
        result("a", "f", "late"),  # its own id: it answers `a`, whatever came before
        call("c", "h", {}),  # never answered: no turn
        call("d", "k", {}),
        result("d", "k", "from k"),
    ]  # fmt: skip
    f = tmp_path / "m.json"
    f.write_text(json.dumps({"messages": msgs}))
    [t], problems = items(f)
    assert [(x.action.name, x.observation.text) for x in t.turns] == [
        ("f", "late"),
        ("g", "from g"),
        ("k", "from k"),
    ]
    kinds = sorted(p.kind for p in problems)
    assert kinds == ["unpaired_call", "unpaired_result"]
    assert all(not p.fatal for p in problems)


RUNS = [
    {
        "task_id": 39,
        "trial": 1,
        "reward": 0.0,
        "info": {"task": {"user_id": "ana_1", "instruction": "cancel R1"}, "source": "user"},
        "traj": REUSED,
    },
    {"task_id": 40, "trial": 0, "reward": 1.0, "info": {}, "traj": REUSED[:6]},
]


def test_benchmark_result_runs(tmp_path):
    f = tmp_path / "results.json"
    f.write_text(json.dumps(RUNS))
    trajs, problems = items(f)
    assert [t.task.task_id for t in trajs] == ["39", "40"]
    assert [(t.outcome.status, t.outcome.reward) for t in trajs] == [
        ("failure", 0.0),
        ("success", 1.0),
    ]
    assert [t.metadata["trial"] for t in trajs] == ["1", "0"]
    assert json.loads(trajs[0].metadata["info"])["task"]["user_id"] == "ana_1"
    assert [t.source.origin_index for t in trajs] == [0, 1]
    assert trajs[1].source.origin_id == "results:1" and trajs[1].source.origin_format == "openai"
    assert [x.observation.text for x in trajs[0].turns][:2] == [PROFILE, "255.0"]
    assert {p.where for p in problems} == {"record 0", "record 1"}
    assert all(validate_dict(t.to_dict()) == [] for t in trajs)


SYSTEM = """SETTING: You are an autonomous programmer.

The special interface consists of a file editor that shows you 100 lines of a file at a time.
In addition to typical bash commands, you can also use the following commands.

COMMANDS:
open:
  docstring: opens the file at the given path in the editor
  signature: open <path> [<line_number>]
  arguments:
    - path (string) [required]: the path to the file to open
    - line_number (integer) [optional]: the line number to move the window to

edit:
  docstring: replaces lines <start_line> through <end_line> with the given text
  signature: edit <start_line>:<end_line>
<replacement_text>
end_of_edit
  arguments:
    - start_line (integer) [required]: first line
    - end_line (integer) [required]: last line

submit:
  docstring: submits your current code
  signature: submit



Please note that THE EDIT COMMAND REQUIRES PROPER INDENTATION.

RESPONSE FORMAT:
Your shell prompt is formatted as follows:
(Open file: <path>) <cwd> $
"""

PROMPT = "\n(Open file: {f})\n(Current directory: /repo)\nbash-$"
HISTORY = [
    {"role": "system", "content": SYSTEM, "agent": "primary"},
    {"role": "user", "content": "DEMO: ls", "is_demo": True, "agent": "primary"},
    {"role": "user", "content": "Fix the bug in a.py" + PROMPT.format(f="n/a"), "agent": "primary"},
    {"role": "assistant", "thought": "Look first.\n", "action": "open a.py\n",
     "content": "Look first.\n```\nopen a.py\n```", "agent": "primary"},
    {"role": "user", "content": "[File: a.py]\n1:x = 1\n" + PROMPT.format(f="/repo/a.py")},
    {"role": "assistant", "thought": "Fix it.", "action": "edit 1:1\nx = 2\nend_of_edit\n",
     "content": "Fix it.\n```\nedit 1:1\nx = 2\nend_of_edit\n```"},
    {"role": "user", "content": "File updated." + PROMPT.format(f="/repo/a.py")},
    {"role": "assistant", "thought": "Done.", "action": "submit\n", "content": "Done.\n```\nsubmit\n```"},
]  # fmt: skip
STEPS = [
    {"action": "open a.py\n", "observation": "[File: a.py]\n1:x = 1\n", "thought": "Look first.\n",
     "state": '{"open_file": "/repo/a.py", "working_dir": "/repo"}'},
    {"action": "edit 1:1\nx = 2\nend_of_edit\n", "observation": "File updated.", "thought": "Fix it.",
     "state": '{"open_file": "/repo/a.py", "working_dir": "/repo"}'},
]  # fmt: skip


def test_swe_agent_commands_become_the_action_space(tmp_path):
    f = tmp_path / "i1.traj"
    f.write_text(json.dumps({"trajectory": STEPS, "history": HISTORY, "info": {}}))
    [t], _ = items(f)
    space = json.loads(t.system.action_space)
    assert [s["name"] for s in space] == ["open", "edit", "submit", "bash"]
    tools = {s["name"]: ToolSpec.from_dict(s) for s in space}
    assert tools["open"].input_schema["required"] == ["path"]
    assert tools["open"].input_schema["properties"]["line_number"]["type"] == "integer"
    assert "<replacement_text>\nend_of_edit" in tools["edit"].description
    assert tools["open"].check({"path": "a.py"}) is None and tools["open"].check({}) is not None
    shown = system_text(t.to_dict()["system"])
    assert "# Action space" in shown and "opens the file at the given path" in shown
    assert t.metadata["agent_system_prompt"] == SYSTEM


def test_swe_agent_one_line_and_unparsed_command_docs(tmp_path):
    one_line = "COMMANDS:\nopen <path> [<line_number>] - opens the file at the given path\ngoto <line_number> - moves the window\n"
    other = "You may use these tools however you like."
    for name, system, expect in [("a", one_line, ["open", "goto"]), ("b", other, ["commands"])]:
        f = tmp_path / f"{name}.traj"
        history = [{"role": "system", "content": system}, *HISTORY[2:]]
        f.write_text(json.dumps({"trajectory": STEPS, "history": history}))
        [t], _ = items(f)
        space = json.loads(t.system.action_space)
        assert [s["name"] for s in space] == expect
    assert space[0]["description"] == other


def test_swe_agent_history_only(tmp_path):
    full, only = tmp_path / "full.traj", tmp_path / "only.traj"
    full.write_text(json.dumps({"trajectory": STEPS, "history": HISTORY, "info": {}}))
    only.write_text(json.dumps({"history": HISTORY, "info": {"exit_status": "submitted"}}))
    [a], _ = items(full)
    [b], problems = items(only)
    assert [(x.action.text, x.observation.text, x.reasoning) for x in b.turns] == [
        (x.action.text, x.observation.text, x.reasoning) for x in a.turns
    ]
    assert [json.loads(x.observation.state_json) for x in b.turns] == [
        {"open_file": "/repo/a.py", "working_dir": "/repo"}
    ] * 2
    assert b.task.instruction.startswith("Fix the bug") and b.outcome.status == "success"
    assert json.loads(b.system.demonstrations) == ["DEMO: ls"]
    assert [(p.kind, p.fatal) for p in problems] == [("unpaired_call", False)]
    assert "submit" in problems[0].message


def test_legitimate_tool_argument_shapes_import_as_they_always_did(tmp_path):
    """What real files hold in `arguments` (a JSON string, as OpenAI writes it; an object,
    as ATIF and ShareGPT do; an empty or missing value; text the model failed to make
    JSON) imports unchanged beside the refusal of numbers, booleans and lists."""
    shapes = [
        ('{"command": "ls"}', 'bash({"command": "ls"})'),
        ({"command": "ls"}, 'bash({"command": "ls"})'),
        ("", "bash({})"),
        ("  ", "bash({})"),
        (None, "bash({})"),
        ({}, "bash({})"),
        ('{"command": "ls"', 'bash({"_raw": "{\\"command\\": \\"ls\\""})'),  # the model's own text
        ("[1, 2]", 'bash({"_value": [1, 2]})'),  # a string: the model's output, kept
    ]
    msgs = [{"role": "user", "content": "go"}]
    for k, (args, _) in enumerate(shapes):
        fn = {"name": "bash", "arguments": args}
        msgs += [
            {"role": "assistant", "tool_calls": [{"id": f"c{k}", "function": fn}]},
            result(f"c{k}", "bash", f"out {k}"),
        ]
    no_args = {"role": "assistant", "tool_calls": [{"id": "n", "function": {"name": "bash"}}]}
    msgs += [no_args, result("n", "bash", "no arguments key")]
    f = tmp_path / "shapes.jsonl"
    f.write_text(json.dumps({"id": "shapes", "messages": msgs}) + "\n")
    [t], problems = items(f)
    assert not problems
    assert [x.action.text for x in t.turns] == [want for _, want in shapes] + ["bash({})"]


def test_swe_agent_exit_steps_are_no_turns(tmp_path):
    """Found: the step SWE-agent appends when it ends a run itself (a cost limit:
    `exit_cost`, answered "Exited (autosubmitted)" by SWE-agent, not by the environment)
    was imported as a command turn."""
    exit_step = {"action": "exit_cost", "observation": "Exited (autosubmitted)",
                 "thought": "Exit due to cost limit", "state": "{}"}  # fmt: skip
    f = tmp_path / "cost.traj"
    info = {"exit_status": "submitted (exit_cost)", "submission": "diff --git a/a.py b/a.py"}
    f.write_text(json.dumps({"trajectory": [*STEPS, exit_step], "history": HISTORY, "info": info}))
    [t], problems = items(f)
    assert [x.action.text for x in t.turns] == [s["action"].rstrip("\n") for s in STEPS]
    assert "Exited (autosubmitted)" not in [x.observation.text for x in t.turns]
    assert t.metadata["exit_action"] == "exit_cost"
    assert t.metadata["submission"] == info["submission"]
    assert t.outcome.status == "failure" and t.outcome.error == "submitted (exit_cost)"
    assert problems == [] and validate_dict(t.to_dict()) == []
