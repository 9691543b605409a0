"""Codex rollouts (collectors/importers/codex.py), part 3: MCP tool results and Codex's other
non-shell tools. Our own fixtures, in the shapes codex-rs writes them: an MCP call named
`<server>__<tool>`, `mcp__<server>__<tool>` or `{namespace: "mcp__<server>", name}`; its result
as the first versions wrote it whole (`{"content", "isError"}`), then as
`CallToolResult::as_function_call_output_payload` gives it (the content blocks' JSON, the
structured content's JSON, or content items with an image), since openai/codex#17406 after
`McpToolOutput`'s `Wall time: S seconds\\nOutput:` header; Codex's own errors (mcp_tool_call.rs,
mcp_connection_manager.rs, the MCP clients), plain, `err: {:?}`-quoted or as a result of one
text block; `mcp_tool_call_end` of the extended history; view_image's answer and the image
message it injects."""

from __future__ import annotations

import json

from worldtrace.collectors.importers.common import kept_ends

from .test_import_claude_code import obs
from .test_import_codex import bash, freeform, imported, out, start

PNG = "data:image/png;base64,iVBORw0KGgo="


def compact(value):
    """serde_json::to_string: no spaces, non-ASCII as it is."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def mcp(cid, server, tool, args=None, layout="namespace"):
    """An MCP call as each Codex generation names it."""
    raw = args if isinstance(args, str) else json.dumps(args or {})
    call = {"type": "function_call", "arguments": raw, "call_id": cid}
    if layout == "namespace":  # newest: a Responses API namespace per server
        return {**call, "name": tool, "namespace": f"mcp__{server}"}
    if layout == "flat":
        return {**call, "name": f"mcp__{server}__{tool}"}
    return {**call, "name": f"{server}__{tool}"}  # the first versions


def text(*texts):
    return [{"type": "text", "text": t} for t in texts]


def framed(body, wall=0.0423):
    """McpToolOutput::response_payload: the header, then the result's text on the next line."""
    header = f"Wall time: {wall:.4f} seconds\nOutput:"
    return f"{header}\n{body}" if body else header


def end(cid, result):
    """`mcp_tool_call_end` (persisted only in Codex's extended history)."""
    return {"type": "mcp_tool_call_end", "call_id": cid,
            "invocation": {"server": "linear", "tool": "list_issues", "arguments": {}},
            "duration": {"secs": 0, "nanos": 42000000}, "result": result}  # fmt: skip


def outputs(r):
    return [n for n, x in enumerate(r.lines, 1) if x["payload"].get("type") == "function_call_output"]  # fmt: skip


def test_mcp_results_are_the_servers_answer_without_codex_framing(tmp_path):
    """Found: an MCP call's observation was Codex's framed text (`Wall time: 0.0423
    seconds\\nOutput:\\n[{"type":"text","text":...}]`). Now it is the result's text: the
    content blocks' text, the structured content's JSON as Codex showed it, an image
    `non_text_part`; in every layout Codex wrote."""
    r = start()
    r.item(mcp("c1", "linear", "list_issues", {"team": "CF"}), out("c1", framed(compact(text("CF-404 Fix add()")))))  # fmt: skip
    r.item(mcp("c2", "linear", "list_issues"), out("c2", framed(compact(text("a", "b")))))
    r.item(mcp("c3", "db", "query", {"sql": "select 1"}), out("c3", framed(compact({"rows": [[1]]}))))  # fmt: skip
    r.item(mcp("c4", "linear", "archive"), out("c4", framed("")))  # no text at all
    r.item(mcp("c5", "fs", "read", layout="flat"), out("c5", framed(compact(text("héllo\n")))))
    items = [{"type": "input_text", "text": framed("")}, {"type": "input_text", "text": "chart"},
             {"type": "input_image", "image_url": PNG, "detail": "high"}]  # fmt: skip
    r.item(mcp("c6", "plot", "render"), out("c6", items))
    r.item(mcp("c7", "fs", "read", layout="flat"), out("c7", compact(text("no header"))))
    whole = compact({"content": text("denied"), "isError": True})
    r.item(mcp("c8", "fs", "write", layout="old"), out("c8", whole))
    [t], problems = imported(tmp_path, r)
    assert [(x.action.kind, x.action.name) for x in t.turns] == [
        ("tool_call", "mcp__linear__list_issues"),
        ("tool_call", "mcp__linear__list_issues"),
        ("tool_call", "mcp__db__query"),
        ("tool_call", "mcp__linear__archive"),
        ("tool_call", "mcp__fs__read"),
        ("tool_call", "mcp__plot__render"),
        ("tool_call", "mcp__fs__read"),
        ("tool_call", "fs__write"),
    ]
    assert t.turns[0].action.text == 'mcp__linear__list_issues({"team": "CF"})'
    assert obs(t) == [
        ("CF-404 Fix add()", False, None, False),
        ("a\nb", False, None, False),
        ('{"rows":[[1]]}', False, None, False),
        ("", False, None, False),
        ("héllo\n", False, None, False),
        ("chart", False, None, False),
        ("no header", False, None, False),
        ("denied", True, None, False),
    ]
    at = outputs(r)[5]
    image = f"turn 5 observation (line {at}: payload.output): 1 input_image part not imported"
    assert [(p.kind, p.message) for p in problems] == [("non_text_part", image)]


def test_codex_cuts_inside_content_items_are_read(tmp_path):
    """Found: over its budget Codex cuts an MCP result given as content items (an image
    among them: `truncate_function_output_items_with_policy`) item by item: the text item
    that does not fit is cut in the middle (`…N tokens truncated…`, half of what was left
    at each end) and the text items after it are left out, `[omitted N text items ...]`
    last. That notice and the marker were imported as the server's text, untruncated."""
    head, tail = "h" * 400, "t" * 400
    cut_item = f"{head}…1234 tokens truncated…{tail}"
    r = start()
    header = {"type": "input_text", "text": framed("")}
    image = {"type": "input_image", "image_url": PNG}
    r.item(mcp("c1", "plot", "render"), out("c1", [header, {"type": "input_text", "text": "fits"}, image,
           {"type": "input_text", "text": cut_item}, {"type": "input_text", "text": "[omitted 2 text items ...]"}]))  # fmt: skip
    r.item(mcp("c2", "plot", "render"), out("c2", [header, image, {"type": "input_text", "text": cut_item}]))  # fmt: skip
    odd = f"{head}…5 tokens truncated…short"  # the tool's own text: not Codex's halves
    r.item(mcp("c3", "plot", "render"), out("c3", [header, image, {"type": "input_text", "text": odd}]))  # fmt: skip
    [t], _ = imported(tmp_path, r)
    shown = kept_ends(head, tail)
    assert obs(t) == [
        (f"fits\n{shown}", False, None, True),
        (shown, False, None, True),
        (odd, False, None, False),
    ]


def test_an_mcp_tool_counts_for_the_domain_by_its_own_name(tmp_path):
    """An MCP tool is named for the domain without Codex's `mcp__<server>__` (as the first
    versions' `<server>__`): a Playwright server's browser tools make a web trajectory."""
    r = start()
    r.item(mcp("c1", "playwright", "browser_navigate", {"url": "http://localhost:8000"}))
    r.item(out("c1", framed(compact(text("Navigated")))))
    [t], _ = imported(tmp_path, r)
    assert (t.turns[0].action.name, t.domain) == ("mcp__playwright__browser_navigate", "web")


def test_text_like_codex_framing_is_kept_where_codex_did_not_write_it(tmp_path):
    """The header is removed only whole and in place, on an MCP call's output: a server's
    text that starts with it, a header of another precision, another tool's output and a
    shell command's output keep it; a cut marker inside a whole JSON result is the server's
    text."""
    look = "Wall time: 2.0000 seconds\nOutput:\nbuild ok"
    r = start()
    r.item(mcp("c1", "ci", "status"), out("c1", framed(compact(text(look)))))
    r.item(mcp("c2", "ci", "status"), out("c2", "Wall time: 0.04 seconds\nOutput:\n" + compact(text("x"))))  # fmt: skip
    r.item({"type": "function_call", "name": "update_plan", "arguments": "{}", "call_id": "c3"})
    r.item(out("c3", framed("Plan updated")))
    r.item(bash("c4", "cat log"), out("c4", freeform(look)))
    r.item(mcp("c5", "ci", "log"), out("c5", framed(compact(text("a…12 tokens truncated…b")))))
    [t], problems = imported(tmp_path, r)
    assert problems == []
    assert obs(t) == [
        (look, False, None, False),
        ("Wall time: 0.04 seconds\nOutput:\n" + compact(text("x")), False, None, False),
        (framed("Plan updated"), False, None, False),
        (look, False, 0, False),
        ("a…12 tokens truncated…b", False, None, False),
    ]


def test_codex_own_answers_to_mcp_calls_are_no_turns(tmp_path):
    """What Codex answered itself instead of the server - the user's or its policy's refusal,
    an unknown server, arguments it could not read, an interrupt (`not_run`); a call it sent
    and whose answer it lost, a timeout among them (`harness_failure`: Codex keeps nothing of
    what the server did, so there is no output to mark `[timed out]`) - in each layout Codex
    wrote them. A server's text like `err: ...` with arguments Codex could read stays."""
    timeout = ("tool call error: tool call failed for `zen/chat`\n\nCaused by:\n"
               "    0: timed out awaiting tools/call after 60s\n    1: deadline has elapsed")  # fmt: skip
    r = start()
    r.item(mcp("c1", "mail", "send"), out("c1", framed(compact(text("user rejected MCP tool call")))))  # fmt: skip
    r.item(mcp("c2", "mail", "send"), out("c2", framed(compact(text("user cancelled MCP tool call")))))  # fmt: skip
    r.item(mcp("c3", "mail", "send"), out("c3", framed(compact(text("Tool call was cancelled because of safety risks: it mails a stranger")))))  # fmt: skip
    r.item(mcp("c4", "apps", "run"), out("c4", framed(compact(text("MCP tool call blocked by app configuration")))))  # fmt: skip
    r.item(mcp("c5", "jira", "get"), out("c5", framed(compact(text("tool call error: unknown MCP server 'jira'")))))  # fmt: skip
    r.item(mcp("c6", "zen", "chat"), out("c6", framed(compact(text(timeout)))))
    r.item(mcp("c7", "zen", "chat", layout="flat"), out("c7", "tool call error: tool call failed for `zen/chat`"))  # fmt: skip
    r.item(mcp("c8", "zen", "chat", layout="old"), out("c8", 'err: "tool call error: request timed out"'))  # fmt: skip
    r.item(mcp("c9", "zen", "chat", '{"prompt": ', layout="old"), out("c9", "err: EOF while parsing an object at line 1 column 11"))  # fmt: skip
    r.item(mcp("c10", "zen", "chat", '{"prompt": '), out("c10", framed(compact(text("err: EOF while parsing an object at line 1 column 11")))))  # fmt: skip
    r.item(mcp("c11", "gone", "x", layout="flat"), out("c11", "unsupported call: mcp__gone__x"))
    r.item(mcp("c12", "zen", "chat"), out("c12", "aborted"))
    r.item(mcp("c13", "zen", "chat", layout="flat"), out("c13", compact(text("aborted"))))
    r.item(mcp("c14", "fs", "write"), out("c14", framed(compact(text("err: disk full")))))
    [t], problems = imported(tmp_path, r)
    assert [x.action.text for x in t.turns] == ["mcp__fs__write({})"]
    assert obs(t) == [("err: disk full", False, None, False)]
    kinds = ["not_run"] * 5 + ["harness_failure"] * 3 + ["not_run"] * 5
    assert [(p.where, p.kind) for p in problems] == [
        (f"line {n}", k) for n, k in zip(outputs(r)[:13], kinds, strict=True)
    ]
    assert all(not p.fatal for p in problems)
    call = outputs(r)[0] - 1
    assert problems[0].message == (
        f"mcp__mail__send call 'c1' (line {call}): the user rejected the MCP call at Codex's"
        " approval prompt; no turn"
    )
    why = [p.message.split("): ", 1)[1] for p in problems[5:9]]
    assert why == [
        "Codex stopped waiting for the MCP server's answer; nothing of it was kept"
        ' ("tool call failed for `zen/chat`\\n\\nCaused by:\\n    0: timed out awaiting too...);'
        " no turn",
        'Codex\'s call to the MCP server failed ("tool call failed for `zen/chat`"); no turn',
        "Codex stopped waiting for the MCP server's answer; nothing of it was kept"
        ' ("request timed out"); no turn',
        "Codex could not read the call's arguments"
        ' ("err: EOF while parsing an object at line 1 column 11"); no turn',
    ]


def test_mcp_tool_call_end_tells_codex_errors_from_the_servers_answers(tmp_path):
    """Codex's extended history keeps `mcp_tool_call_end`: `Err` is Codex's own error (no
    turn, whatever the output's text), `Ok` the server's result - its `isError` the
    observation's error, and a text like Codex's own errors stays the server's answer."""
    r = start()
    r.item(mcp("c1", "linear", "list_issues"))
    r.event(**end("c1", {"Ok": {"content": text("no such team"), "isError": True}}))
    r.item(out("c1", framed(compact(text("no such team")))))
    r.item(mcp("c2", "linear", "list_issues"))
    r.event(**end("c2", {"Ok": {"content": text("user rejected MCP tool call")}}))
    r.item(out("c2", framed(compact(text("user rejected MCP tool call")))))
    r.item(mcp("c3", "linear", "list_issues"))
    r.event(**end("c3", {"Err": "tool call error: tool call failed for `linear/list_issues`"}))
    r.item(out("c3", framed(compact(text("tool call failed")))))
    custom = {"type": "function_call", "name": "lookup", "arguments": "{}", "call_id": "c4"}
    r.item(custom)  # a name no MCP layout has: the event says it is one
    r.event(**end("c4", {"Ok": {"content": text("42")}}))
    r.item(out("c4", framed(compact(text("42")))))
    [t], problems = imported(tmp_path, r)
    assert obs(t) == [
        ("no such team", True, None, False),
        ("user rejected MCP tool call", False, None, False),
        ("42", False, None, False),
    ]
    [p] = problems
    assert (p.where, p.kind) == (f"line {outputs(r)[2]}", "harness_failure")
    assert p.message == (
        f"mcp__linear__list_issues call 'c3' (line {outputs(r)[2] - 2}): Codex's call to the MCP"
        ' server failed ("tool call failed for `linear/list_issues`"); no turn'
    )


def codex_cut(whole, budget):
    """`truncate_text` with a byte budget (ASCII text): half of it at each end, the marker
    between."""
    left = budget // 2
    removed = len(whole) - budget
    return f"{whole[:left]}…{(removed + 3) // 4} tokens truncated…{whole[left - budget :]}"


def test_an_mcp_result_codex_cut_shows_its_ends(tmp_path):
    """Newer Codex cuts the framed MCP text to its budget (`truncate_text`: half the budget
    at each end, `…N tokens truncated…` between, through the result's JSON): the text of the
    blocks at the head and at the tail, `truncated`; a cut structured result its two ends as
    they stand. Only a marker with as many bytes on each side is Codex's cut."""
    lines = "".join(f"l{i:02d}\n" for i in range(60))
    two = compact(text("a" * 60, "b" * 60))
    rows = compact({"rows": list(range(200))})
    r = start()
    r.item(mcp("c1", "ci", "log"), out("c1", codex_cut(framed(compact(text(lines))), 196)))
    r.item(mcp("c2", "ci", "log"), out("c2", codex_cut(framed(two), 150)))  # across two blocks
    r.item(mcp("c3", "db", "query"), out("c3", codex_cut(framed(rows), 120)))
    [t], problems = imported(tmp_path, r)
    assert problems == []
    head = "".join(f"l{i:02d}\n" for i in range(8))
    tail = "".join(f"l{i:02d}\n" for i in range(41, 60))
    assert (
        obs(t)
        == [
            (head + tail, False, None, True),
            ("a" * 17 + "\n" + "b" * 60, False, None, True),  # the tail keeps all of block 2
            (rows[:26] + "\n" + rows[-60:], False, None, True),
        ]
    )


def test_list_outputs_are_read_as_their_items(tmp_path):
    """`function_call_output.output` may be a list of content items (newer protocol): text
    items are the tool's text, read as a string output would be (a shell's framing removed,
    Codex's refusals no turn); an answer of an image alone is no turn (`unpaired_call`:
    what it said in text is unknown, 1206w2)."""
    r = start()
    r.item(bash("c1", "ls"), out("c1", [{"type": "input_text", "text": freeform("calc.py\n")}]))
    r.item(bash("c2", "sleep 9"), out("c2", [{"type": "input_text", "text": "aborted"}]))
    r.item({"type": "function_call", "name": "view_image", "arguments": '{"path": "a.png"}', "call_id": "c3"})  # fmt: skip
    r.item(out("c3", [{"type": "input_image", "image_url": PNG}]))
    [t], problems = imported(tmp_path, r)
    assert obs(t) == [("calc.py\n", False, 0, False)]  # the image said no text: no turn
    at = outputs(r)
    aborted = f"shell call 'c2' (line {at[1] - 1}): the turn was interrupted before the call answered; no turn"  # fmt: skip
    image = f"view_image call 'c3' (line {at[2] - 1}): payload.output: 1 input_image part and no text: what it answered in text is unknown (non-text parts are not kept); no turn"  # fmt: skip
    assert [(p.kind, p.where, p.message) for p in problems] == [
        ("not_run", f"line {at[1]}", aborted),
        ("unpaired_call", f"line {at[2]}", image),
    ]


def test_view_image_is_the_image_codex_attached(tmp_path):
    """Found: view_image's observation was Codex's `attached local image path`, and the image
    it injected after the output was taken for a user message answering nothing. The image
    is the tool's answer, and the injected message is no user message; an answer of an
    image alone is no turn (`unpaired_call`, 1206w2: an empty observation taught that
    viewing an image shows nothing). update_plan's `Plan updated` is its answer."""
    r = start()
    r.item({"type": "function_call", "name": "view_image", "arguments": '{"path": "plot.png"}', "call_id": "c1"})  # fmt: skip
    r.item(out("c1", "attached local image path"))
    r.line("response_item", {"type": "message", "role": "user", "content": [{"type": "input_image", "image_url": PNG}]})  # fmt: skip
    image = len(r.lines)
    r.item({"type": "function_call", "name": "update_plan", "arguments": '{"plan": []}', "call_id": "c2"})  # fmt: skip
    r.item(out("c2", "Plan updated"))
    [t], problems = imported(tmp_path, r)
    assert [x.action.name for x in t.turns] == ["update_plan"]  # the image said no text: no turn
    assert obs(t) == [("Plan updated", False, None, False)]
    part = f"view_image call 'c1' (line 7): line {image}: payload.content: 1 input_image part and no text: what it answered in text is unknown (non-text parts are not kept); no turn"  # fmt: skip
    assert [(p.kind, p.message) for p in problems] == [("unpaired_call", part)]
    assert t.task.instruction == "Fix the failing test in calc.py"
