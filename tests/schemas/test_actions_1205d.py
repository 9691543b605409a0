"""Found (hunt 1205d): a collected keystroke's `arguments_json` wrote non-ASCII keys as
`\\u00fc` escapes, while tool calls (and the importers' keystrokes) keep them as typed."""

import json

from worldtrace.schemas.actions import keystrokes, tool_call


def test_keystroke_arguments_keep_their_characters_as_tool_calls_do():
    keys = "echo Zürich ❄\n"
    a = keystrokes(keys, duration=0.5)
    assert a.arguments_json == '{"duration": 0.5, "keystrokes": "echo Zürich ❄\\n"}'
    assert json.loads(a.arguments_json)["keystrokes"] == keys
    assert "ü" in tool_call("t", {"city": "Zürich"}).arguments_json
