"""Found (hunt 1205d, a user's reports, each reproduced): structured content that merely
had a `blob` key was recorded as a made-up resource line; `{"active": true}` was dropped
beside the text `{"active": 1}` (Python's `True == 1`); the server's log at start-up never
reached the record; the explorer silently never called a tool whose arguments it could not
make (a `pattern`, `multipleOf`, `minProperties`), or that no arguments fit, and said
nothing; the stdout-noise warning named the interpreter, not the server's script.

Tiny real stdio servers written to tmp_path: `mirror.py` answers each tools/call with its
`arguments.result` verbatim (and sends one log right after `notifications/initialized`).
"""

from __future__ import annotations

import base64
import json
import logging
import re

import pytest
from worldtrace.sandboxes.base import TaskSpec
from worldtrace.sandboxes.mcp import MCPConfig, MCPSandbox
from worldtrace.schemas.parsing import parse

from .test_mcp import collect, tool
from .test_mcp_hunt_1204d import tmpdir_root  # noqa: F401  (the fixture)

MIRROR = """
import json, sys
for line in sys.stdin:
    m = json.loads(line); i = m.get("id"); meth = m.get("method")
    if meth == "initialize":
        r = {"protocolVersion": m["params"]["protocolVersion"], "capabilities": {"tools": {}, "logging": {}}, "serverInfo": {"name": "mirror", "version": "1"}}
    elif meth == "notifications/initialized":
        print(json.dumps({"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": "startup log line"}}), flush=True); continue
    elif meth == "tools/list":
        r = {"tools": [{"name": "mirror", "inputSchema": {"type": "object"}, "annotations": {"readOnlyHint": True}}]}
    elif meth == "tools/call":
        r = m["params"]["arguments"]["result"]
    elif i is None: continue
    else: r = {}
    print(json.dumps({"jsonrpc": "2.0", "id": i, "result": r}), flush=True)
    after = ((m.get("params") or {}).get("arguments") or {}).get("log_after")
    if after:  # a log the server sends once it answered: between calls, or episodes
        print(json.dumps({"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": after}}), flush=True)
"""


@pytest.fixture
def mirror(tmp_path) -> list[str]:
    path = tmp_path / "mirror.py"
    path.write_text(MIRROR)
    return ["{python}", str(path)]


def answer(text: str, structured=None, **extra) -> dict:
    """A mirror call whose answer is one text part and `structured` content."""
    result = {"content": [{"type": "text", "text": text}]}
    if structured is not None:
        result["structuredContent"] = structured
    return tool("mirror", result=result, **extra)


def mirrored(store, mirror, actions: list[dict], **sandbox) -> list[str]:
    sandbox = {"command": mirror, "protocol": "legacy", **sandbox}
    [t] = collect(store, sandbox, [{"id": "t", "actions": actions}]).trajectories
    assert t.outcome.status == "success", t.outcome
    return [x.observation.text for x in t.turns]


def test_a_blob_storage_listing_is_data_not_a_resource(store, mirror, tmpdir_root):  # noqa: F811
    """A `blob` key (a blob-storage path) or an image `data` that is no base64 is what the
    server said; only MCP's own binary shapes (ImageContent, BlobResourceContents) are
    said as their bracketed line."""
    png = base64.b64encode(b"\x89PNG\r\n\x1a\n" + bytes(87)).decode()
    catalog = {"type": "image", "data": "2024/cat.jpg", "mimeType": "image/jpeg"}
    mirrored_image = {"content": [{"type": "image", "data": png, "mimeType": "image/png"}]}
    embedded = {
        "type": "resource",
        "resource": {"uri": "file:///cat.png", "mimeType": "image/png", "blob": png},
    }
    listing = {"container": "photos", "blob": "2024/cat.jpg", "size": 5120}
    texts = mirrored(
        store,
        mirror,
        [
            answer("uploaded 1 file", listing),
            answer("2 blobs", {"blobs": [listing, {**listing, "blob": "2024/dog.jpg"}]}),
            answer("photo entry", {"photo": catalog}),
            tool("mirror", result={**mirrored_image, "structuredContent": mirrored_image}),
            answer("cat", {"thumbnail": embedded}),
        ],
    )
    assert texts[0] == 'uploaded 1 file\n{"blob":"2024/cat.jpg","container":"photos","size":5120}'
    assert "2024/dog.jpg" in texts[1] and "[resource" not in texts[1], texts[1]
    assert texts[2] == 'photo entry\n{"photo":' + json.dumps(catalog, sort_keys=True, separators=(",", ":")) + "}"  # fmt: skip
    # the real binary shapes stay one line each, never base64
    assert texts[3] == "[image: image/png, 95 bytes]"
    assert png not in texts[4] and "[resource: file:///cat.png, image/png, 95 bytes]" in texts[4]


def test_true_is_not_the_number_one(store, mirror, tmpdir_root):  # noqa: F811
    """The text `{"active": 1, "admin": 0}` does not say `{"active": true, "admin":
    false}`: JSON's booleans are not numbers (Python's `True == 1` made them so)."""
    texts = mirrored(
        store,
        mirror,
        [
            answer('{"active": 1, "admin": 0}', {"active": True, "admin": False}),
            answer('{"active": true, "admin": false}', {"active": True, "admin": False}),
            answer("1", {"result": True}),
            answer("2.0", {"result": 2}),  # one JSON number, as the SDK writes it
        ],
    )
    assert texts[0] == '{"active": 1, "admin": 0}\n{"active":true,"admin":false}'
    assert texts[1] == '{"active": true, "admin": false}'  # said: once
    assert texts[2] == '1\n{"result":true}'
    assert texts[3] == "2.0"


def test_logs_at_reset_and_between_episodes_reach_the_record(store, mirror, tmpdir_root):  # noqa: F811
    """docs/mcp.md: logs between calls go to the next observation, at reset the initial
    one; the reset returned them in its state_json and the Recorder dropped it."""
    tasks = [
        {"id": "a", "actions": [answer("one", log_after="said after episode a")]},
        {"id": "b", "actions": [answer("two")]},
    ]
    for keep in (False, True):
        sandbox = {"command": mirror, "protocol": "legacy", "keep_server": keep}
        r = collect(store, sandbox, tasks, job_id=f"logs{int(keep)}-00000001")
        a, b = sorted(r.trajectories, key=lambda t: t.task.task_id)
        first = json.loads(a.metadata["initial_state_json"])
        assert first["logs"] == [{"level": "info", "logger": None, "data": "startup log line"}]
        second = json.loads(b.metadata["initial_state_json"])
        said = [x["data"] for x in second["logs"]]
        # a kept server sent its log between the episodes; a new one starts again
        assert said == (["said after episode a"] if keep else ["startup log line"]), said


def test_the_noise_warning_names_the_script_an_interpreter_runs(caplog, tmp_path, tmpdir_root):  # noqa: F811
    """`MCP server /usr/bin/python3 wrote to stdout` named every Python server alike."""
    caplog.set_level(logging.WARNING, logger="worldtrace.sandboxes.mcp")
    server = tmp_path / "rawserver.py"
    server.write_text("print('banner', flush=True)\n" + MIRROR)
    box = MCPSandbox(parse(MCPConfig, {"command": ["{python}", str(server)], "protocol": "legacy"}))
    try:
        box.reset(TaskSpec("a"))
    finally:
        box.close()
    [said] = [r.getMessage() for r in caplog.records if r.name == "worldtrace.sandboxes.mcp"]
    assert said.startswith(f"MCP server {server} wrote to stdout"), said


SCHEMAS = """
import json, sys
TOOLS = {
    "tag": {"type": "object", "properties": {"code": {"type": "string", "pattern": "^[a-z]{3}-[0-9]{2}$"}}, "required": ["code"]},
    "page": {"type": "object", "properties": {"n": {"type": "integer", "multipleOf": 25, "minimum": 1}, "r": {"type": "number", "multipleOf": 0.1, "minimum": 0.25, "maximum": 0.5}}, "required": ["n", "r"]},
    "pick": {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "string"}, "c": {"type": "string"}}, "minProperties": 2},
    "pair": {"type": "object", "properties": {"flags": {"type": "array", "items": {"type": "boolean"}, "uniqueItems": True, "minItems": 2}}, "required": ["flags"]},
    "span": {"type": "object", "properties": {"n": {"type": "integer", "minimum": 5, "maximum": 3}}, "required": ["n"]},
    "bits": {"type": "object", "properties": {"flags": {"type": "array", "items": {"type": "boolean"}, "uniqueItems": True, "minItems": 3}}, "required": ["flags"]},
}
for line in sys.stdin:
    m = json.loads(line); i = m.get("id"); meth = m.get("method")
    if meth == "initialize":
        r = {"protocolVersion": m["params"]["protocolVersion"], "capabilities": {"tools": {}}, "serverInfo": {"name": "schemas", "version": "1"}}
    elif meth == "tools/list":
        r = {"tools": [{"name": k, "inputSchema": s, "annotations": {"readOnlyHint": True}} for k, s in TOOLS.items()]}
    elif meth == "tools/call":
        r = {"content": [{"type": "text", "text": json.dumps(m["params"]["arguments"])}]}
    elif i is None: continue
    else: r = {}
    print(json.dumps({"jsonrpc": "2.0", "id": i, "result": r}), flush=True)
"""


def test_the_explorer_calls_every_tool_it_can_and_says_which_it_cannot(
    store,
    tmp_path,
    tmpdir_root,  # noqa: F811
    caplog,
):
    """Arguments for `pattern`, `multipleOf` and `minProperties` are made (none was, or
    one try in three); a tool no arguments fit (minimum > maximum, 3 unique booleans) is
    left out with one warning naming it and why, and each episode's record says so."""
    caplog.set_level(logging.WARNING, logger="worldtrace.sandboxes.mcp_explorer")
    server = tmp_path / "schemas.py"
    server.write_text(SCHEMAS)
    sandbox = {"command": ["{python}", str(server)], "protocol": "legacy"}
    policy = {"kind": "explorer", "steps": 8}
    r = collect(store, sandbox, [{"id": "x", "instruction": "x"}], policy=policy, episodes=2)
    for t in r.trajectories:
        assert t.outcome.status == "success", t.outcome
        called = [x.action.name for x in t.turns]
        assert sorted(set(called)) == ["page", "pair", "pick", "tag"], called
        for x in t.turns:
            args = json.loads(x.observation.text)
            if x.action.name == "tag":
                assert re.fullmatch(r"[a-z]{3}-[0-9]{2}", args["code"]), args
            elif x.action.name == "page":
                assert args["n"] % 25 == 0 and args["n"] >= 25 and 0.25 <= args["r"] <= 0.5, args
            elif x.action.name == "pick":
                assert len(args) >= 2, args
            else:
                assert sorted(args["flags"]) == [False, True], args
        noted = "\n".join(x.reasoning or "" for x in t.turns)
        assert "tool span set aside" in noted and "tool bits set aside" in noted, noted
    warned = [x.getMessage() for x in caplog.records if "set aside" in x.getMessage()]
    assert len(warned) == 2, warned  # once per tool, not per episode
    span = next(w for w in warned if "tool span" in w)
    bits = next(w for w in warned if "tool bits" in w)
    assert "minimum 5" in span and "maximum 3" in span, span
    assert "uniqueItems" in bits and "3" in bits, bits
