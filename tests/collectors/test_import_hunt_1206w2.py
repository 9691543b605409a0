"""Found (a hunter's import session, 2026-12-06 w, part 2): an answer of images only was no
turn in the OpenAI importer alone; Claude Code (a `Read` of a PNG), ATIF, Gemini CLI
(`read_file` of an image), Codex (view_image, an MCP screenshot), mini-swe-agent,
SWE-agent's history and OpenHands V1 still stored `""` as what the tool printed. The
OpenAI importer said `null` of a `tool` message that has no `content`. A re-import whose
reward (or error flags, exit codes, metadata) changed was `already present` without a
word that the store keeps the old values. Real parts: files written here in the shapes
the tools write, the `worldtrace` CLI in a subprocess, the real importers."""

from __future__ import annotations

import json
import re

from .test_import_claude_code import Session, shell, text, use
from .test_import_claude_code import imported as claude_imported
from .test_import_codex import bash, freeform, out, start
from .test_import_codex import imported as codex_imported
from .test_import_codex_mcp import framed, mcp
from .test_import_fidelity import items
from .test_import_gemini_cli import Session as GeminiSession
from .test_import_gemini_cli import call as gemini_call
from .test_import_gemini_cli import framed as gemini_framed
from .test_import_gemini_cli import one as gemini_one
from .test_import_gemini_cli import sh as gemini_sh
from .test_import_hunt_1205f import stored, wt
from .test_import_openhands_v1 import Conv
from .test_import_openhands_v1 import read as v1_read
from .test_import_openhands_v1 import text as v1_text

PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="  # fmt: skip
DATA_URL = f"data:image/png;base64,{PNG}"
IMAGE_BLOCK = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}}  # fmt: skip
IMAGE_URL = {"type": "image_url", "image_url": {"url": DATA_URL}}
NOT_KEPT = "answered in text is unknown (non-text parts are not kept)"


def said(problems, kind="unpaired_call"):
    return [(p.where, p.message) for p in problems if p.kind == kind]


# -- 1: an answer of images only is no turn, in every importer --------------------------


def test_claude_code_read_of_an_image_is_no_turn_named_with_its_call(tmp_path):
    """Found: a `Read` of a PNG, answered by a `tool_result` of one image block (and
    Claude Code's `toolUseResult` `{type: image, file}`), was the observation `""`: a world
    model learned that reading an image prints nothing. No turn, said naming the line,
    the field and the call; a result of text and an image keeps its text."""
    s = Session()
    s.user("What does the plot show?")
    s.say("msg_01", use("toolu_01", "Read", file_path="/home/dev/calc/plot.png"))
    tur = {"type": "image", "file": {"base64": PNG, "type": "image/png", "originalSize": 70,
           "dimensions": {"originalWidth": 1, "originalHeight": 1, "displayWidth": 1, "displayHeight": 1}}}  # fmt: skip
    s.result("toolu_01", [IMAGE_BLOCK], tur=tur)
    at = len(s.lines)
    s.say("msg_02", use("toolu_02", "Bash", command="ls"))
    s.result("toolu_02", "plot.png", tur=shell("plot.png\n"))
    s.say("msg_03", use("toolu_03", "Read", file_path="/home/dev/calc/both.png"))
    s.result("toolu_03", [text("Image of 1x1 pixels:"), IMAGE_BLOCK])
    [t], problems = claude_imported(tmp_path, s)
    assert [(x.action.name, x.observation.text) for x in t.turns] == [
        ("Bash", "plot.png\n"),
        ("Read", "Image of 1x1 pixels:"),
    ]
    assert said(problems) == [
        (
            f"line {at}",
            f"Read call 'toolu_01' (line {at - 1}): message.content[0].content: 1 image part"
            f" and no text: what it {NOT_KEPT}; no turn",
        )
    ]
    part = f"turn 1 observation (line {len(s.lines)}: message.content[0].content): 1 image part not imported"  # fmt: skip
    assert [p.message for p in problems if p.kind == "non_text_part"] == [part]


ATIF_IMAGE = {"type": "image", "source": {"media_type": "image/png", "path": "images/step_2.png"}}


def test_atif_result_of_images_only_is_no_turn_named_with_its_call(tmp_path):
    """ATIF v1.6 content parts: a result holding only an image part was `""`."""
    doc = {
        "schema_version": "ATIF-v1.6",
        "session_id": "shots-1",
        "agent": {"name": "computer-use", "version": "1"},
        "steps": [
            {"step_id": 1, "source": "user", "message": "Open the settings."},
            {"step_id": 2, "source": "agent", "message": "Look first.",
             "tool_calls": [{"tool_call_id": "c1", "function_name": "screenshot", "arguments": {}},
                            {"tool_call_id": "c2", "function_name": "click", "arguments": {"x": 3, "y": 4}}],
             "observation": {"results": [
                 {"source_call_id": "c1", "content": [ATIF_IMAGE]},
                 {"source_call_id": "c2", "content": [{"type": "text", "text": "clicked"}, ATIF_IMAGE]}]}},
        ],
    }  # fmt: skip
    f = tmp_path / "trajectory.json"
    f.write_text(json.dumps(doc))
    [t], problems = items(f)
    assert [(x.action.name, x.observation.text, x.reasoning) for x in t.turns] == [
        ("click", "clicked", "Look first.")
    ]
    assert said(problems) == [
        (
            "steps[1].tool_calls[0]",
            f"steps[1].observation.results[0].content: 1 image part and no text: what call"
            f" 'c1' (screenshot) {NOT_KEPT}; no turn",
        )
    ]


def test_gemini_cli_read_file_of_an_image_is_no_turn_named_with_its_call(tmp_path):
    """Gemini CLI answers `read_file` of an image with its placeholder output (`Binary
    content of type image/png was processed.`) and the image as an `inlineData` part beside
    the functionResponse: that was the observation `""`."""
    s = GeminiSession()
    s.user("Describe logo.png")
    s.gemini("", gemini_sh("a", "ls", gemini_framed("logo.png")))
    placeholder = "Binary content of type image/png was processed."
    image = {"inlineData": {"mimeType": "image/png", "data": PNG}}
    s.gemini("", gemini_call("b", "read_file", {"absolute_path": "/p/logo.png"}, placeholder, parts=[image]))  # fmt: skip
    t, problems = gemini_one(s, tmp_path)
    assert [(x.action.text, x.observation.text) for x in t.turns] == [("ls", "logo.png")]
    assert said(problems) == [
        (
            "line 4",
            f"toolCalls[0] read_file call 'b': toolCalls[0].result: 1 inlineData part and no"
            f" text: what it {NOT_KEPT}; no turn",
        )
    ]
    assert not [p for p in problems if p.kind == "non_text_part"]


def test_codex_answers_of_images_only_are_no_turn_view_image_too(tmp_path):
    """Codex's view_image answers `attached local image path` (its own text) and injects
    the image as a user message: the tool's answer is the image, and was `""`. So was an
    output given as content items of an image only, and an MCP screenshot (the
    `McpToolOutput` header, then the image). Each is no turn, named; text beside an image
    is kept."""
    r = start()
    r.item({"type": "function_call", "name": "view_image", "arguments": '{"path": "plot.png"}', "call_id": "c1"})  # fmt: skip
    r.item(out("c1", "attached local image path"))
    r.line("response_item", {"type": "message", "role": "user", "content": [{"type": "input_image", "image_url": DATA_URL}]})  # fmt: skip
    injected = len(r.lines)
    r.item({"type": "function_call", "name": "view_image", "arguments": '{"path": "b.png"}', "call_id": "c2"})  # fmt: skip
    r.item(out("c2", [{"type": "input_image", "image_url": DATA_URL}]))
    listed = len(r.lines)
    header = {"type": "input_text", "text": framed("")}
    r.item(mcp("c3", "playwright", "browser_take_screenshot"), out("c3", [header, {"type": "input_image", "image_url": DATA_URL}]))  # fmt: skip
    shot = len(r.lines)
    r.item(mcp("c4", "plot", "render"), out("c4", [header, {"type": "input_text", "text": "chart"}, {"type": "input_image", "image_url": DATA_URL}]))  # fmt: skip
    r.item(bash("c5", "ls"), out("c5", freeform("plot.png\n")))
    [t], problems = codex_imported(tmp_path, r)
    assert [(x.action.name, x.observation.text) for x in t.turns] == [
        ("mcp__plot__render", "chart"),
        ("shell", "plot.png\n"),
    ]
    assert said(problems) == [
        (
            f"line {injected - 1}",
            f"view_image call 'c1' (line {injected - 2}): line {injected}: payload.content: 1"
            f" input_image part and no text: what it {NOT_KEPT}; no turn",
        ),
        (
            f"line {listed}",
            f"view_image call 'c2' (line {listed - 1}): payload.output: 1 input_image part and"
            f" no text: what it {NOT_KEPT}; no turn",
        ),
        (
            f"line {shot}",
            f"mcp__playwright__browser_take_screenshot call 'c3' (line {shot - 1}):"
            f" payload.output: 1 input_image part and no text: what it {NOT_KEPT}; no turn",
        ),
    ]


def test_mini_swe_agent_answer_of_an_image_only_is_no_turn(tmp_path):
    """mini-swe-agent v2 expands its multimodal marker into content parts: an observation
    of an image only was `""`."""
    messages = [
        {"role": "system", "content": "You are a helpful assistant that can interact with a computer."},
        {"role": "user", "content": "Please solve this issue: the logo is blank"},
        {"role": "assistant", "content": "Look at it.\n\n```mswea_bash_command\ncat logo.png\n```"},
        {"role": "user", "content": [IMAGE_URL]},
        {"role": "assistant", "content": "List.\n\n```mswea_bash_command\nls\n```"},
        {"role": "user", "content": "<returncode>0</returncode>\n<output>\nlogo.png\n</output>"},
    ]  # fmt: skip
    f = tmp_path / "run.traj.json"
    f.write_text(json.dumps({"info": {"exit_status": "Submitted"}, "messages": messages,
                             "trajectory_format": "mini-swe-agent-1.1"}))  # fmt: skip
    [t], problems = items(f)
    assert [(x.action.text, x.observation.text) for x in t.turns] == [("ls", "logo.png\n")]
    assert [m for _, m in said(problems)] == [
        f"messages[3].content: 1 image_url part and no text: what 'cat logo.png' {NOT_KEPT};"
        " no turn"
    ]


def test_swe_agent_history_answer_of_an_image_only_or_null_is_no_turn(tmp_path):
    """SWE-agent's history (multimodal runs write content parts): an observation message of
    an image only, or of null content, was `""`."""
    history = [
        {"role": "system", "content": "SETTING: You are an autonomous programmer."},
        {"role": "user", "content": "Fix the rendering of the chart."},
        {"role": "assistant", "content": "Look.\n```\nopen chart.png\n```", "thought": "Look.", "action": "open chart.png\n"},
        {"role": "user", "content": [IMAGE_URL]},
        {"role": "assistant", "content": "Again.\n```\nls\n```", "thought": "Again.", "action": "ls\n"},
        {"role": "user", "content": None},
        {"role": "assistant", "content": "Find.\n```\nfind . -name '*.py'\n```", "thought": "Find.", "action": "find . -name '*.py'\n"},
        {"role": "user", "content": "./chart.py\n(Open file: n/a)\n(Current directory: /repo)\nbash-$"},
    ]  # fmt: skip
    f = tmp_path / "run.traj"
    f.write_text(json.dumps({"history": history, "info": {"exit_status": "submitted"}}))
    [t], problems = items(f)
    assert [(x.action.text, x.observation.text) for x in t.turns] == [
        ("find . -name '*.py'", "./chart.py")
    ]
    assert [m for _, m in said(problems)] == [
        f"history[3].content: 1 image_url part and no text: what 'open chart.png' {NOT_KEPT};"
        " no turn",
        "history[5].content: null, the answer to 'ls' is unknown; no turn",
    ]


def test_openhands_v1_observation_of_an_image_only_is_no_turn(tmp_path):
    """An OpenHands SDK MCP screenshot tool: the SDK's `[Tool ... executed.]` header, then
    an ImageContent: the observation was `""`."""
    c = Conv()
    c.user("Take a screenshot")
    shot = c.call("browser_screenshot", {"data": {}, "kind": "MCPToolAction"}, {})
    image = {"cache_prompt": False, "type": "image", "image_urls": [DATA_URL]}
    at = len(c.events)
    c.result(shot, {"content": [v1_text("[Tool 'browser_screenshot' executed.]"), image],
                    "is_error": False, "tool_name": "browser_screenshot", "kind": "MCPToolObservation"})  # fmt: skip
    c.run("ls", "shot.png")
    [t], problems = v1_read(c.write(tmp_path))
    assert [(x.action.text, x.observation.text) for x in t.turns] == [("ls", "shot.png")]
    [(_, message)] = said(problems)
    assert message.startswith(f"events/event-{at:05d}-") and message.endswith(
        f".observation.content: 1 image part and no text: what the agent's call to"
        f" 'browser_screenshot' (toolu_01) {NOT_KEPT}; no turn"
    )


# -- 2: a missing answer is said missing ------------------------------------------------


def test_a_missing_tool_content_is_said_missing_not_null(tmp_path):
    """Found: an OpenAI `tool` message without `content` was said `messages[2].content:
    null`; so were a Responses API `function_call_output` without `output` and an ATIF
    result without `content`. Each is no turn, the key named missing; a written null is
    still said null."""
    call = {"id": "c0", "type": "function", "function": {"name": "bash", "arguments": '{"cmd": "ls"}'}}  # fmt: skip
    chat = {"id": "miss", "messages": [
        {"role": "user", "content": "list"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c0"},
        {"role": "assistant", "content": None, "tool_calls": [{**call, "id": "c1"}]},
        {"role": "tool", "tool_call_id": "c1", "content": None},
    ]}  # fmt: skip
    items_ = {"id": "resp", "input": [
        {"role": "user", "content": "list"},
        {"type": "function_call", "call_id": "k0", "name": "bash", "arguments": '{"cmd": "ls"}'},
        {"type": "function_call_output", "call_id": "k0"},
    ]}  # fmt: skip
    f = tmp_path / "chats.jsonl"
    f.write_text("".join(json.dumps(r) + "\n" for r in (chat, items_)))
    _, problems = items(f)
    assert said(problems) == [
        ("line 1", "messages[2]: no `content`, the answer to call 'c0' (bash) is unknown; no turn"),
        ("line 1", "messages[4].content: null, the answer to call 'c1' (bash) is unknown; no turn"),
        ("line 2", "input[2]: no `output`, the answer to call 'k0' (bash) is unknown; no turn"),
    ]
    doc = {"schema_version": "ATIF-v1.5", "session_id": "m", "agent": {"name": "terminus", "version": "2"},
           "steps": [{"step_id": 1, "source": "user", "message": "go"},
                     {"step_id": 2, "source": "agent", "message": "",
                      "tool_calls": [{"tool_call_id": "a", "function_name": "bash", "arguments": {"command": "ls"}}],
                      "observation": {"results": [{"source_call_id": "a"}]}}]}  # fmt: skip
    g = tmp_path / "trajectory.json"
    g.write_text(json.dumps(doc))
    _, problems = items(g)
    assert [m for _, m in said(problems)] == [
        "steps[1].observation.results[0]: no `content`, the answer to call 'a' is unknown; no turn"
    ]
    sharegpt = {"id": "sg", "conversations": [
        {"from": "human", "value": "list"},
        {"from": "function_call", "value": json.dumps({"name": "ls", "arguments": {}})},
        {"from": "observation"},
    ]}  # fmt: skip
    h = tmp_path / "sharegpt.jsonl"
    h.write_text(json.dumps(sharegpt) + "\n")
    _, problems = items(h)
    assert [m for _, m in said(problems)] == [
        "conversations[2]: no `value`, the answer to call 'ls' is unknown; no turn"
    ]
    run_ = {"command": "ls", "is_input": False, "thought": "", "blocking": False, "hidden": False}
    events = [
        {"id": 1, "timestamp": "2025-05-04T10:00:01", "source": "user", "message": "list", "action": "message",
         "args": {"content": "list", "image_urls": None}},
        {"id": 2, "timestamp": "2025-05-04T10:00:02", "source": "agent", "message": "Running command: ls",
         "action": "run", "args": run_},
        {"id": 3, "timestamp": "2025-05-04T10:00:03", "source": "agent", "message": "Command `ls` executed.",
         "cause": 2, "observation": "run", "extras": {"command": "ls", "metadata": {"exit_code": 0}}},
    ]  # fmt: skip
    k = tmp_path / "events.json"
    k.write_text(json.dumps(events))
    _, problems = items(k)
    assert [m for _, m in said(problems)] == [
        "events[2]: no `content`, the answer to the agent's 'run' action (id 2) is unknown; no turn"
    ]


# -- 3: a re-import whose labels changed ------------------------------------------------


def run(task_id, reward, tool_error=False):
    """One tau-bench run as its results file keeps it (`task_id`, `reward`, `info`,
    `traj`, `trial`)."""
    lookup = {"id": "call_1", "type": "function", "function": {"name": "get_order_details", "arguments": json.dumps({"order_id": f"#W{task_id}"})}}  # fmt: skip
    result = {"role": "tool", "tool_call_id": "call_1", "name": "get_order_details", "content": f"order #W{task_id}: delivered"}  # fmt: skip
    if tool_error:
        result["status"] = "error"
    traj = [
        {"role": "system", "content": "# Retail agent policy"},
        {"role": "user", "content": f"Where is my order #W{task_id}?"},
        {"role": "assistant", "content": None, "tool_calls": [lookup]},
        result,
        {"role": "assistant", "content": "It was delivered."},
        {"role": "user", "content": "###STOP###"},
    ]
    info = {"task": {"user_id": f"u{task_id}", "instruction": "Ask where the order is."},
            "reward_info": {"reward": reward, "info": {"r_actions": reward}}, "source": "user"}  # fmt: skip
    return {"task_id": task_id, "reward": reward, "info": info, "traj": traj, "trial": 0}


def test_a_reimport_whose_reward_changed_says_what_the_store_keeps(tmp_path, wt_env):
    """Found: a results file re-imported after its reward was corrected (or a tool's
    error flag) was `already present` in silence, the store keeping the old reward (the
    id is the content: the outcome is not part of it). It still is present, and a warning
    per such record names it, what differs and what the store keeps, and how to store
    the new values. A re-import of the same file says nothing more."""
    f = tmp_path / "results.json"
    f.write_text(json.dumps([run(1, 0.0), run(2, 1.0), run(3, 1.0)]))
    r = wt(wt_env, "import", f)
    assert r.returncode == 0, r.stdout + r.stderr
    r = wt(wt_env, "import", f)  # unchanged: present, not a word more
    assert r.returncode == 0 and "labels_changed" not in r.stdout + r.stderr, r.stderr
    f.write_text(json.dumps([run(1, 1.0), run(2, 1.0, tool_error=True), run(3, 1.0)]))
    r = wt(wt_env, "import", f)
    assert r.returncode == 0, r.stdout + r.stderr
    assert re.search(r"already present\s+│ openai\s+│\s+3", r.stdout), r.stdout
    lines = [" ".join(x.split()) for x in r.stderr.split(f"{f}:")[1:]]
    [one] = [x for x in lines if x.startswith("record 0:")]
    [two] = [x for x in lines if x.startswith("record 1:")]
    assert "labels_changed" in one and "labels_changed" in two
    assert "outcome.status success (the store keeps failure)" in one
    assert "outcome.reward 1.0 (the store keeps 0.0)" in one
    assert "metadata info (the store keeps its earlier value)" in one
    assert "turns[0].observation.is_error true (the store keeps false)" in two
    assert "outcome" not in two.split("labels_changed")[1].split("(the store keeps")[0]
    assert "import-" in one and ".parquet" in one and "into a new store" in one
    assert not [x for x in lines if x.startswith("record 2:")]
    assert sorted(t.outcome.reward for t in stored(wt_env)) == [0.0, 1.0, 1.0]


def test_a_sharegpt_tool_answer_of_an_image_alone_is_no_turn(tmp_path):
    """Review: ShareGPT's `tool` message holding one image part imported as a turn whose
    observation was `''` (only a `non_text_part` warning), where every other format says
    the answer is unknown in text."""
    tools = "[{'type': 'function', 'function': {'name': 'screenshot', 'parameters': {'type': 'object', 'properties': {}}}}]"  # fmt: skip
    rec = {"id": "img-1", "conversations": [
        {"from": "system", "value": f"You may call functions. <tools>\n{tools}\n</tools>"},
        {"from": "human", "value": "What is on screen?"},
        {"from": "gpt", "value": "<tool_call>\n{'arguments': {}, 'name': 'screenshot'}\n</tool_call>"},
        {"from": "tool", "value": [{"type": "image_url", "image_url": {"url": "data:image/png;base64,AAA"}}]},
        {"from": "gpt", "value": "A cat."},
    ]}  # fmt: skip
    p = tmp_path / "sg.jsonl"
    p.write_text(json.dumps(rec) + "\n")
    trajectories, problems = items(p)
    assert [t.turns for t in trajectories] in ([], [[]])
    [unpaired] = [q for q in problems if q.kind == "unpaired_call"]
    assert unpaired.message == (
        "conversations[3].value: 1 image_url part and no text: what call 'screenshot' answered"
        " in text is unknown (non-text parts are not kept); no turn"
    )
