"""Found (a hunter's import session, 2026-12-06 w): mini-swe-agent v2 on the Responses
API imported as "empty" (every step lost); a mini-swe-agent file named other than
*.traj.json was read as OpenAI chat, its templates posing as output; `--format
mini-swe-agent` on another file said "empty"; an image-only tool result became a real
empty observation; `--format claude-code` on a pretty-printed document gave a problem per
line; a SWE-agent step without `observation` was said to hold null; a `.json` list cut at
its end lost every record. Real parts: files written here in the shapes the tools write,
the `worldtrace` CLI in a subprocess, the real importers."""

from __future__ import annotations

import json

from worldtrace.schemas import validate_dict

from .test_import_fidelity import items
from .test_import_hunt_1205f import stored, wt

SYSTEM = "You are a helpful assistant that can interact with a computer."
TASK = "Please solve this issue: fix the bug in foo.py"


def rendered(out, rc):
    """mini-swe-agent v2's observation template (`<returncode>`, `<output>\\n...</output>`)."""
    return f"<returncode>{rc}</returncode>\n<output>\n{out}</output>"


def response(rid, calls, text=None, summary=None):
    """One model turn as `LitellmResponseToolcallModel.query` keeps it: the Responses API
    response object (`model_dump()`) with `extra.actions` (`parse_toolcall_actions_response`)."""
    output = []
    if summary is not None:
        output.append({"id": f"rs_{rid}", "type": "reasoning", "summary": [{"type": "summary_text", "text": summary}]})  # fmt: skip
    if text is not None:
        output.append({"id": f"msg_{rid}", "type": "message", "role": "assistant", "status": "completed",
                       "content": [{"type": "output_text", "text": text, "annotations": []}]})  # fmt: skip
    for cid, command in calls:
        output.append({"id": f"fc_{cid}", "type": "function_call", "call_id": cid, "name": "bash",
                       "arguments": json.dumps({"command": command}), "status": "completed"})  # fmt: skip
    return {
        "id": f"resp_{rid}", "object": "response", "created_at": 1760000000, "model": "gpt-5-mini",
        "status": "completed", "output": output,
        "extra": {"actions": [{"command": c, "tool_call_id": cid} for cid, c in calls], "cost": 0.001,
                  "timestamp": 1760000001.0},
    }  # fmt: skip


def output(cid, out, rc, exception=None):
    """A result as `format_toolcall_observation_messages` writes it: `function_call_output`
    with the rendered template, the raw output beside it in `extra`."""
    extra = {"raw_output": out, "returncode": rc, "timestamp": 1760000002.0}
    text = rendered(out, rc)
    if exception:
        extra["exception_info"] = exception
        text = f"<exception>{exception}</exception>\n{text}"
    return {"type": "function_call_output", "call_id": cid, "output": text, "extra": extra}


def responses_run(tmp_path, name="resp.traj.json"):
    diff = "diff --git a/foo.py b/foo.py\n+x = 2\n"
    timeout = "An error occurred while executing the command: Command 'sleep 100' timed out after 30 seconds"  # fmt: skip
    messages = [
        {"role": "system", "content": SYSTEM, "extra": {}},
        {"role": "user", "content": TASK, "extra": {}},
        response(1, [("call_a", "ls -la")], summary="Look at the files first"),
        output("call_a", "total 0\nfoo.py\n", 0),
        # a response without a call: mini-swe-agent raised its format error, kept only that
        {
            "type": "message",
            "role": "user",
            "content": [
                {
                    "type": "input_text",
                    "text": "No tool calls found in the response. Every response MUST include at least one tool call.",
                }
            ],
            "extra": {"interrupt_type": "FormatError"},
        },
        response(
            2, [("call_b", "python -m pytest"), ("call_c", "sleep 100")], text="Now run tests"
        ),
        output("call_b", "1 failed\n", 1),
        output("call_c", "partial\n", -1, exception=timeout),
        response(3, [("call_d", "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && git diff")]),
        {
            "role": "exit",
            "content": diff,
            "extra": {"exit_status": "Submitted", "submission": diff},
        },
    ]
    info = {
        "model_stats": {"instance_cost": 0.003, "api_calls": 3},
        "config": {
            "model": {"model_name": "openai/gpt-5-mini"},
            "model_type": "minisweagent.models.litellm_response_toolcall_model.LitellmResponseToolcallModel",
            "agent_type": "minisweagent.agents.default.DefaultAgent",
        },
        "mini_version": "2.1.0",
        "exit_status": "Submitted",
        "submission": diff,
    }
    f = tmp_path / name
    f.write_text(json.dumps({"info": info, "messages": messages, "trajectory_format": "mini-swe-agent-1.1"}, indent=2))  # fmt: skip
    return f, diff


# -- 1: mini-swe-agent v2 on the Responses API ------------------------------------------


def test_a_responses_api_trajectory_imports_its_bash_steps(tmp_path, wt_env):
    """Found: `LitellmResponseToolcallModel` keeps each model turn as the response object
    (no `role`) and each result as a `function_call_output`; only `assistant` messages
    were read, so the run imported as `empty`. Its steps are now read as the chat
    tool-call layout's are: raw output, return code, timeout, the submission."""
    f, diff = responses_run(tmp_path)
    r = wt(wt_env, "import", f)
    assert r.returncode == 0, r.stdout + r.stderr
    [t] = stored(wt_env)
    assert validate_dict(t.to_dict()) == []
    assert t.source.origin_format == "mini-swe-agent"
    got = [(x.action.text, x.observation.text, x.observation.exit_code, x.observation.is_error)
           for x in t.turns]  # fmt: skip
    assert got == [
        ("ls -la", "total 0\nfoo.py\n", 0, False),
        ("python -m pytest", "1 failed\n", 1, True),
        ("sleep 100", "partial\n[timed out]", None, True),
    ]
    assert [x.action.name for x in t.turns] == ["bash"] * 3
    assert [x.reasoning for x in t.turns] == ["Look at the files first", "Now run tests", None]
    assert t.metadata["submit_command"] == "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && git diff"
    assert t.metadata["submission"] == diff
    assert t.outcome.status == "success"
    assert t.agent.model == "openai/gpt-5-mini"
    assert t.task.instruction == TASK
    assert "warning" not in r.stdout and "error" not in r.stdout


def test_a_responses_item_answer_missing_is_no_turn_named_by_its_field(tmp_path):
    """A `function_call_output` whose `output` is null (and no `extra.raw_output`) is an
    unknown answer: no turn, the field named as the file has it (`output`)."""
    f, _ = responses_run(tmp_path)
    d = json.loads(f.read_text())
    d["messages"][3] = {"type": "function_call_output", "call_id": "call_a", "output": None}
    f.write_text(json.dumps(d))
    [t], problems = items(f)
    assert [x.action.text for x in t.turns] == ["python -m pytest", "sleep 100"]
    [p] = problems
    assert p.kind == "unpaired_call" and "messages[3].output: null" in p.message, p


def test_format_mini_swe_agent_on_another_file_says_it_is_not_one(tmp_path, wt_env):
    """Found: `--format mini-swe-agent` on tau-bench's results (a list of runs) said
    `empty: no (action, observation) pair found`, as if a mini-swe-agent run had no step."""
    runs = [{"task_id": 39, "reward": 0.0, "info": {}, "trial": 0,
             "traj": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]}]  # fmt: skip
    f = tmp_path / "results.json"
    f.write_text(json.dumps(runs, indent=1))
    r = wt(wt_env, "import", "--format", "mini-swe-agent", f)
    assert r.returncode == 1
    [line] = [x for x in r.stderr.splitlines() if str(f) in x]
    assert "unrecognized: not a mini-swe-agent trajectory" in line, line
    assert "messages[0]" in line and "task_id" in line, line
    assert "empty" not in r.stdout + r.stderr


def test_a_message_of_no_shape_mini_swe_agent_writes_is_named(tmp_path):
    """A message with no `role` that is no Responses item either was passed over in
    silence (it could answer the command before it): it is the file's error, named."""
    f, _ = responses_run(tmp_path)
    d = json.loads(f.read_text())
    d["messages"].insert(4, {"content": "what am I"})
    f.write_text(json.dumps(d))
    [], [p] = items(f)
    assert p.kind == "invalid" and p.message.startswith("messages[4]: expected a message"), p


# -- 2: a mini-swe-agent file is told by its content, not its name -----------------------


MINI = [
    {
        "role": "system",
        "content": SYSTEM + "\n\nYour response must contain exactly ONE bash code block",
    },
    {
        "role": "user",
        "content": "Please solve this issue: Blah blah blah\n\nYou can execute bash commands",
    },
    {
        "role": "assistant",
        "content": "Here be some dummy command:\n\n```mswea_bash_command\necho 'hello world'\n```",
    },
    {"role": "user", "content": rendered("hello world\n", 0)},
    {
        "role": "assistant",
        "content": "OK, now let me end this run.\n\n```mswea_bash_command\necho COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT\n```",
    },
    {"role": "user", "content": ""},
]
"""The shape of mini-swe-agent's own test trajectory (shared/formats' local.traj.json): a
bare message list."""


def test_mini_swe_agent_files_are_told_by_content_whatever_their_name(tmp_path, wt_env):
    """Found: saved as `mini.json` (or without `trajectory_format`), a mini-swe-agent run
    was read as OpenAI chat: the observation held `<returncode>0</returncode>\\n<output>...`,
    and the submission was a text turn with an empty observation."""
    bare = tmp_path / "mini.json"
    bare.write_text(json.dumps(MINI, indent=2))
    nofmt = tmp_path / "run.json"
    nofmt.write_text(json.dumps({"info": {"exit_status": "Submitted", "submission": ""}, "messages": MINI}))  # fmt: skip
    versioned = tmp_path / "v.json"
    versioned.write_text(json.dumps({"info": {"mini_version": "1.14.2"}, "messages": MINI[:4]}))
    r = wt(wt_env, "import", bare, nofmt, versioned)
    assert r.returncode == 0, r.stdout + r.stderr
    recs = stored(wt_env)
    assert [t.source.origin_format for t in recs] == ["mini-swe-agent"] * 3
    for t in recs:
        assert [(x.action.text, x.observation.text, x.observation.exit_code) for x in t.turns] == [
            ("echo 'hello world'", "hello world\n", 0)
        ]
    assert recs[0].metadata["submit_command"] == "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"


def test_a_chat_without_mini_swe_agents_hand_is_still_openai(tmp_path):
    """Content detection asks for mini-swe-agent's own templates or fields: a chat whose
    agent writes a ```bash block, answered in plain text, stays an OpenAI record."""
    msgs = [
        {"role": "user", "content": "How do I list files?"},
        {"role": "assistant", "content": "Use:\n```bash\nls\n```"},
        {"role": "user", "content": "thanks"},
    ]
    f = tmp_path / "chat.json"
    f.write_text(json.dumps(msgs))
    [t], _ = items(f)
    assert t.source.origin_format == "openai"


# -- 3: a tool result of images only is no text answer ----------------------------------


PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="  # fmt: skip


def test_an_image_only_tool_result_is_no_turn_said_with_its_call(tmp_path):
    """Found: a tool result holding only an image (OpenAI `image_url`, an Anthropic
    `tool_result` of an image block) became the observation `""`, no error, and only a
    `non_text_part` warning: a world model learned `screenshot()` prints nothing. What it
    answered in text is unknown, as with a null answer: no turn, said naming the call.
    A result of text and an image keeps its text."""
    shot = {"id": "s1", "type": "function", "function": {"name": "screenshot", "arguments": "{}"}}
    image_url = {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}}
    openai_rec = {"id": "img", "messages": [
        {"role": "user", "content": "screenshot"},
        {"role": "assistant", "content": "", "tool_calls": [shot]},
        {"role": "tool", "tool_call_id": "s1", "content": [image_url]},
        {"role": "assistant", "content": "", "tool_calls": [{**shot, "id": "s2"}]},
        {"role": "tool", "tool_call_id": "s2", "content": [{"type": "text", "text": "here:"}, image_url]},
    ]}  # fmt: skip
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}}
    anthropic_rec = {"id": "anth", "messages": [
        {"role": "user", "content": "look"},
        {"role": "assistant", "content": [
            {"type": "tool_use", "id": "tu1", "name": "bash", "input": {"command": "ls"}},
            {"type": "tool_use", "id": "tu2", "name": "screenshot", "input": {}}]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "tu2", "content": [image]},
            {"type": "tool_result", "tool_use_id": "tu1", "content": "a.txt\nb.txt", "is_error": False}]},
    ]}  # fmt: skip
    f = tmp_path / "shapes.jsonl"
    f.write_text("".join(json.dumps(r) + "\n" for r in (openai_rec, anthropic_rec)))
    (one, two), problems = items(f)
    assert [(x.action.name, x.observation.text) for x in one.turns] == [("screenshot", "here:")]
    assert [(x.action.name, x.observation.text) for x in two.turns] == [("bash", "a.txt\nb.txt")]
    said = {(p.where, p.kind): p.message for p in problems}
    assert "'s1' (screenshot)" in said[("line 1", "unpaired_call")]
    assert "messages[2].content: 1 image_url part and no text" in said[("line 1", "unpaired_call")]
    assert "'tu2' (screenshot)" in said[("line 2", "unpaired_call")]
    assert "messages[2].content[0].content: 1 image part and no text" in said[("line 2", "unpaired_call")]  # fmt: skip


# -- 4: --format claude-code on a document over many lines ------------------------------


def test_format_claude_code_on_a_pretty_printed_document_is_one_problem(tmp_path, wt_env):
    """Found: `--format claude-code` on a pretty-printed `.json` gave an `invalid_json` per
    line (141 for tau-bench's sample). It is one document, not a session: one line says so."""
    runs = [{"task_id": 1, "reward": 1.0, "traj": [{"role": "user", "content": "hi"}]}]
    f = tmp_path / "results.json"
    f.write_text(json.dumps(runs, indent=2))
    lines = len(f.read_text().splitlines())
    r = wt(wt_env, "import", "--format", "claude-code", f)
    assert r.returncode == 1
    problems = [x for x in r.stderr.splitlines() if str(f) in x]
    assert problems == [
        f"{f}: unrecognized: not a Claude Code session (JSONL, one event a line): one JSON"
        f" document over {lines} lines"
    ], r.stderr
    assert "invalid_json" not in r.stdout


# -- 5: a missing SWE-agent observation ------------------------------------------------


def test_a_missing_swe_agent_observation_is_said_missing_not_null(tmp_path):
    """Found: a step without the `observation` key was reported as
    `trajectory[1].observation: null`, which the file does not say."""
    traj = {
        "environment": "swe_main",
        "trajectory": [
            {
                "action": "ls\n",
                "observation": "a.py\n",
                "response": "Look.",
                "thought": "Look.",
                "state": "{}",
            },
            {"action": "cat a.py\n", "response": "Read", "thought": "Read", "state": "{}"},
            {
                "action": "cat b.py\n",
                "observation": None,
                "response": "b",
                "thought": "b",
                "state": "{}",
            },
        ],
        "history": [{"role": "user", "content": "Fix the bug"}],
        "info": {"exit_status": "submitted"},
    }
    f = tmp_path / "run.traj"
    f.write_text(json.dumps(traj))
    [t], problems = items(f)
    assert [x.action.text for x in t.turns] == ["ls"]
    assert [p.message for p in problems] == [
        "trajectory[1]: no `observation`, the answer to 'cat a.py' is unknown; no turn",
        "trajectory[2].observation: null, the answer to 'cat b.py' is unknown; no turn",
    ]


# -- 7: a .json list of records cut at its end -------------------------------------------


def run(n):
    """A tau-bench run (its results file is a JSON list of these)."""
    return {"task_id": n, "reward": 1.0, "trial": 0, "info": {}, "traj": [
        {"role": "system", "content": "# Airline policy"},
        {"role": "user", "content": f"Cancel reservation R{n}."},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_A", "type": "function", "function": {"name": "cancel_reservation",
             "arguments": json.dumps({"reservation_id": f"R{n}"})}}]},
        {"role": "tool", "tool_call_id": "call_A", "name": "cancel_reservation", "content": '{"status": "cancelled"}'},
    ]}  # fmt: skip


def test_a_results_list_cut_at_its_end_keeps_its_complete_records(tmp_path, wt_env):
    """Found: a `.json` results list cut short (a run stopped while writing) was one
    `invalid_json` for the file: every complete record before the cut was lost. They are
    read (numbered as in the whole file), and the cut is named with its record, line and
    column."""
    whole = json.dumps([run(n) for n in range(3)], indent=1)
    third = whole.index('"task_id": 2')
    f = tmp_path / "results.json"
    f.write_text(whole[: third + 200])
    start = whole.rindex("{", 0, third)  # where record 2 starts
    line, col = whole.count("\n", 0, start) + 1, start - whole.rindex("\n", 0, start)
    r = wt(wt_env, "import", f)
    assert r.returncode == 0, r.stdout + r.stderr  # records imported: the problem is said
    recs = stored(wt_env)
    assert [t.task.task_id for t in recs] == ["0", "1"]
    assert [t.source.origin_index for t in recs] == [0, 1]
    [problem] = [x for x in r.stderr.splitlines() if str(f) in x]
    assert "invalid_json" in problem and "(the file may be truncated)" in problem, problem
    assert f"record 2, which starts at line {line} column {col}, and any after it are lost" in problem  # fmt: skip
    assert "the 2 records before it are imported" in problem


def test_one_trajectory_cut_short_is_still_not_imported(tmp_path):
    """A bare message list (one conversation) cut short is one incomplete record: its
    messages before the cut are not imported as if they were the whole run."""
    msgs = run(0)["traj"] * 3
    text = json.dumps(msgs, indent=1)
    f = tmp_path / "chat.json"
    f.write_text(text[: len(text) - 40])
    [], [p] = items(f)
    assert p.kind == "invalid_json"
