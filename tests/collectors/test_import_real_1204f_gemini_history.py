"""Found importing real files (2026-12-04 night): Gemini CLI's model history as it saves it
- `/chat save`'s checkpoint (`checkpoint-<tag>.json`: `{history: Content[], authType}`, a
bare `Content[]` before), `/chat share`'s JSON, and the `trajectory.json` committed in
google-gemini/gemini-cli - was read as an OpenAI message list: every `model` turn "a
message of the unknown role", the function responses "a user message that answers no
agent message", and the file `empty`. Every call and answer was lost (said, but lost).

It is Gemini CLI's own: read by the gemini-cli importer, each `functionCall` part a call,
answered by the `functionResponse` part of the user turn after it; without Gemini CLI's
own turns (its session context, its compression summary and the model's fixed reply to
either) posing as the task or as a turn, and without its masked outputs (a preview in its
`<tool_output_masked>` wrapper) posing as what the tool printed.

Our own fixtures, in the shapes of that file (written here, not copied)."""

from __future__ import annotations

from .conftest import found, import_written

CONTEXT = {
    "role": "user",
    "parts": [
        {
            "text": "<session_context>\nThis is the Gemini CLI. We are setting up the context "
            "for our chat.\nMy operating system is: linux\n</session_context>"
        }
    ],
}
SUMMARY = {
    "role": "user",
    "parts": [{"text": "<state_snapshot>\n<goal>x</goal>\n</state_snapshot>"}],
}
ACK = {"role": "model", "parts": [{"text": "Got it. Thanks for the additional context!"}]}


def call(cid, name, args, thought=None, text=None):
    parts = [{"text": thought, "thought": True}] if thought else []
    parts += [{"text": text}] if text else []
    return {"role": "model", "parts": [*parts, {"functionCall": {"name": name, "args": args, "id": cid}}]}  # fmt: skip


def answer(cid, name, response):
    return {"role": "user", "parts": [{"functionResponse": {"id": cid, "name": name, "response": response}}]}  # fmt: skip


def user(text):
    return {"role": "user", "parts": [{"text": text}]}


HISTORY = [
    CONTEXT,
    SUMMARY,
    ACK,
    user("make the team prompt ask on every boot"),
    call("c1", "run_shell_command", {"command": "ls src"}, thought="**Looking** at src"),
    answer("c1", "run_shell_command", {"output": "Output: app.ts\nteam.ts"}),
    call("c2", "read_file", {"file_path": "src/app.ts"}),
    answer(
        "c2",
        "read_file",
        {
            "output": '<tool_output_masked>\n{\n  "output": "line 1\n... [TRUNCATED] ...\nline 900"\n}'
            "\n\nOutput too large. Full output available at: /tmp/x.txt\n</tool_output_masked>"
        },
    ),
    call("c3", "read_file", {"file_path": "src/gone.ts"}),
    answer("c3", "read_file", {"error": "File not found: src/gone.ts"}),
    {"role": "model", "parts": [{"text": "The prompt now shows on every boot."}]},
]


def test_a_checkpoint_imports_each_call_and_answer_without_gemini_clis_own_turns(tmp_path):
    r, got = import_written(
        tmp_path, "checkpoint-teams.json", {"history": HISTORY, "authType": "oauth-personal"}
    )
    assert not found(r, "empty") and not found(r, "unrecognized")
    (t,) = got.values()
    assert t.source.origin_format == "gemini-cli"
    assert t.task.instruction == "make the team prompt ask on every boot"  # not the context
    turns = [
        (x.action.kind, x.action.text, x.observation.text, x.observation.is_error) for x in t.turns
    ]
    assert turns == [
        ("command", "ls src", "app.ts\nteam.ts", False),
        ("tool_call", 'read_file({"file_path": "src/gone.ts"})', "File not found: src/gone.ts", True),
    ]  # fmt: skip
    assert t.turns[0].reasoning == "**Looking** at src"
    assert t.turns[0].observation.exit_code == 0
    assert t.metadata["session_context"].startswith("<session_context>\nThis is the Gemini CLI.")
    assert t.metadata["final_message"] == "The prompt now shows on every boot."
    assert found(r, "message_not_imported") == [
        ("history[1]", "Gemini CLI's summary of the turns it compressed away (those turns are not in "
                "this file); not imported")
    ]  # fmt: skip
    (masked,) = found(r, "harness_failure")
    assert masked[0] == "history[6]" and "parts[0].functionCall read_file call 'c2'" in masked[1]
    assert "masked the output" in masked[1]
    assert all("<tool_output_masked>" not in x.observation.text for x in t.turns)


def test_a_bare_content_list_the_older_checkpoint_reads_the_same(tmp_path):
    _, a = import_written(tmp_path / "a", "checkpoint-a.json", {"history": HISTORY})
    _, b = import_written(tmp_path / "b", "checkpoint-b.json", HISTORY)
    (ta,), (tb,) = a.values(), b.values()
    assert (
        [x.action.text for x in tb.turns]
        == [x.action.text for x in ta.turns]
        == [
            "ls src",
            'read_file({"file_path": "src/gone.ts"})',
        ]
    )


def test_responses_pair_by_id_and_one_for_no_call_is_said(tmp_path):
    history = [
        user("check both"),
        {
            "role": "model",
            "parts": [
                {
                    "functionCall": {
                        "name": "run_shell_command",
                        "args": {"command": "a"},
                        "id": "x1",
                    }
                },
                {
                    "functionCall": {
                        "name": "run_shell_command",
                        "args": {"command": "b"},
                        "id": "x2",
                    }
                },
            ],
        },
        {
            "role": "user",
            "parts": [  # answered out of order, and one for a call never made
                {
                    "functionResponse": {
                        "id": "x2",
                        "name": "run_shell_command",
                        "response": {"output": "Output: B"},
                    }
                },
                {
                    "functionResponse": {
                        "id": "x1",
                        "name": "run_shell_command",
                        "response": {"output": "Output: A"},
                    }
                },
                {"functionResponse": {"id": "zz", "name": "glob", "response": {"output": "none"}}},
            ],
        },
        {"role": "model", "parts": [{"text": "done"}]},
    ]
    r, got = import_written(tmp_path, "shared.json", history)
    (t,) = got.values()
    assert [(x.action.text, x.observation.text) for x in t.turns] == [("a", "A"), ("b", "B")]
    assert found(r, "unpaired_result") == [
        ("[2]", "1 function response answering no call of the model turn before ([2].parts[2]); "
                "not imported")
    ]  # fmt: skip


def test_a_call_of_the_wrong_shape_is_invalid_naming_the_part(tmp_path):
    bad = {
        "role": "model",
        "parts": [{"functionCall": {"name": "run_shell_command", "args": "ls"}}],
    }
    r, got = import_written(tmp_path, "bad.json", [user("go"), bad, *HISTORY[4:6]])
    assert found(r, "invalid") == [('[1]', '[1].parts[0].functionCall.args: expected an object, got "ls"')]  # fmt: skip
    (t,) = got.values()
    assert [x.action.text for x in t.turns] == ["ls src"]  # only that content is left out


def test_an_openai_list_is_still_openai(tmp_path):
    """The detection needs the Gemini API's shape whole: `role` user or model and `parts`."""
    chat = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c", "type": "function", "function": {"name": "bash", "arguments": '{"command": "ls"}'}}]},
        {"role": "tool", "tool_call_id": "c", "content": "a.py"},
    ]  # fmt: skip
    _, got = import_written(tmp_path, "chat.json", chat)
    (t,) = got.values()
    assert t.source.origin_format == "openai"
