"""ShareGPT tool use in the Hermes chat format, as public ShareGPT function-calling data
writes it: a `gpt` message holding `<tool_call>` blocks (JSON or a Python-literal dict)
is the call, the `tool` messages after it with their `<tool_response>` blocks answer
the calls in order, `system` messages are the agent's system prompt. Before, such a
conversation imported no turn at all: the call was "an agent message no user answered"
and the tool and system messages were dropped without a word. Our own fixtures."""

from __future__ import annotations

import json

import pytest
from worldtrace.schemas import validate_dict

from .test_import_fidelity import items


def turns(t):
    return [(x.action.kind, x.action.text, x.observation.text) for x in t.turns]


def write(path, *records):
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def call(body, before=""):
    return {"from": "gpt", "value": f"{before}<tool_call>\n{body}\n</tool_call>"}


def response(body):
    return f"<tool_response>\n{body}\n</tool_response>"


RATE_SYSTEM = (
    "You may call functions. <tools>\n[{'type': 'function', 'function': {'name': 'get_rate',"
    " 'parameters': {'type': 'object', 'properties': {'base': {'type': 'string'}}}}}]\n"
    "</tools> Answer a call as <tool_call>\n{'arguments': <args>, 'name': <name>}\n</tool_call>"
)
HERMES = {
    "id": "rate-1",
    "conversations": [
        {"from": "system", "value": RATE_SYSTEM},
        {"from": "human", "value": "What does one euro buy in yen?"},
        call(
            "{'arguments': {'base': 'EUR', 'quote': 'JPY', 'exact': True}, 'name': 'get_rate'}",
            before="I will look the rate up.\n",
        ),
        {"from": "tool", "value": response(json.dumps({"name": "get_rate", "content": {"rate": 161.2, "base": "EUR"}}))},
        {"from": "gpt", "value": "One euro buys 161.2 yen."},
    ],
}  # fmt: skip


def test_hermes_call_in_a_gpt_message_is_a_turn(tmp_path):
    [t], problems = items(write(tmp_path / "h.jsonl", HERMES))
    assert turns(t) == [
        (
            "tool_call",
            'get_rate({"base": "EUR", "exact": true, "quote": "JPY"})',
            '{"rate": 161.2, "base": "EUR"}',  # the response's `content`, as written
        )
    ]
    [turn] = t.turns
    assert turn.action.name == "get_rate"
    assert json.loads(turn.action.arguments_json) == {"base": "EUR", "quote": "JPY", "exact": True}
    assert turn.reasoning == "I will look the rate up."  # the text outside the block
    assert t.task.instruction == "What does one euro buy in yen?"
    assert t.metadata["final_message"] == "One euro buys 161.2 yen."
    assert t.metadata["agent_system_prompt"] == RATE_SYSTEM
    assert problems == []
    assert validate_dict(t.to_dict()) == []


def test_the_reproduced_conversation_imports_its_call(tmp_path):
    d = {
        "conversations": [
            {"from": "system", "value": "sys <tools>[]</tools>"},
            {"from": "human", "value": "list files"},
            call('{"name": "ls", "arguments": {"path": "."}}'),
            {"from": "tool", "value": "<tool_response>a.txt</tool_response>"},
            {"from": "gpt", "value": "There is a.txt"},
        ]
    }
    [t], problems = items(write(tmp_path / "r.jsonl", d))
    assert turns(t) == [("tool_call", 'ls({"path": "."})', "a.txt")]
    assert t.turns[0].reasoning is None
    assert t.metadata["agent_system_prompt"] == "sys <tools>[]</tools>"
    assert t.metadata["final_message"] == "There is a.txt"
    assert problems == []
    assert validate_dict(t.to_dict()) == []


def test_prose_before_a_hermes_call_and_both_system_prompts(tmp_path):
    d = {
        "id": "p",
        "system": "Top-level prompt.",
        "conversations": [
            {"from": "system", "value": "Message prompt."},
            {"from": "human", "value": "Rate?"},
            {"from": "gpt", "value": "Let me think."},  # no call, no reply: reasoning
            call("{'name': 'get_rate', 'arguments': {}}", before="  Looking it up.  \n\n"),
            {"from": "tool", "value": response("161.2")},
        ],
    }
    [t], problems = items(write(tmp_path / "p.jsonl", d))
    assert turns(t) == [("tool_call", "get_rate({})", "161.2")]
    assert t.turns[0].reasoning == "Let me think.\n\nLooking it up."
    assert t.metadata["agent_system_prompt"] == "Top-level prompt.\n\nMessage prompt."
    assert "final_message" not in t.metadata and problems == []


TWO_CALLS = call(
    '{"name": "get_weather", "arguments": {"city": "Oslo"}}\n</tool_call>\n'
    "<tool_call>\n{'name': 'get_time', 'arguments': '{\"tz\": \"CET\"}'}",
    before="Both at once.\n",
)
WEATHER = json.dumps({"name": "get_weather", "content": "Rain, 9C"})
TIME = json.dumps({"name": "get_time", "content": {"tz": "CET", "time": "14:00"}})


@pytest.mark.parametrize(
    "answers",
    [
        [response(WEATHER), response(TIME)],  # one tool message per call
        [response(WEATHER) + "\n" + response(TIME)],  # one tool message, two blocks
    ],
    ids=["two-tool-messages", "two-blocks"],
)
def test_two_calls_in_one_gpt_message_answered_in_order(tmp_path, answers):
    conv = [
        {"from": "human", "value": "Weather and time in Oslo?"},
        TWO_CALLS,
        *({"from": "tool", "value": a} for a in answers),
        {"from": "gpt", "value": "Rain and 14:00."},
    ]
    [t], problems = items(write(tmp_path / "two.jsonl", {"id": "two", "conversations": conv}))
    assert turns(t) == [
        ("tool_call", 'get_weather({"city": "Oslo"})', "Rain, 9C"),
        ("tool_call", 'get_time({"tz": "CET"})', '{"tz": "CET", "time": "14:00"}'),
    ]
    assert [x.reasoning for x in t.turns] == ["Both at once.", None]
    assert t.metadata["final_message"] == "Rain and 14:00."
    assert problems == []
    assert validate_dict(t.to_dict()) == []


def test_a_response_body_other_than_the_calls_name_and_content_is_kept_verbatim(tmp_path):
    bodies = [
        json.dumps({"name": "get_clock", "content": "14:00"}),  # another tool's name
        json.dumps({"name": "get_time", "content": "14:00", "error": None}),  # another key
        "  14:00, CET  ",  # text: only the framing newlines go
    ]
    conv = [{"from": "human", "value": "Time?"}]
    for body in bodies:
        conv += [call("{'name': 'get_time', 'arguments': {}}"), {"from": "tool", "value": response(body)}]  # fmt: skip
    [t], problems = items(write(tmp_path / "v.jsonl", {"id": "v", "conversations": conv}))
    assert [x.observation.text for x in t.turns] == bodies
    assert problems == []


def test_tool_results_that_answer_no_call_are_reported(tmp_path):
    conv = [
        {"from": "human", "value": "Time?"},
        {"from": "tool", "value": response("stray")},  # no call before it
        call("{'name': 'get_time', 'arguments': {}}"),
        {"from": "tool", "value": response("14:00") + "\n" + response("one too many")},
        {"from": "tool", "value": "and another"},
        {"from": "gpt", "value": "It is 14:00."},
    ]
    [t], problems = items(write(tmp_path / "n.jsonl", {"id": "n", "conversations": conv}))
    assert turns(t) == [("tool_call", "get_time({})", "14:00")]
    assert [(p.kind, p.fatal, p.where) for p in problems] == [("message_not_imported", False, "line 1")] * 3  # fmt: skip
    assert [p.message for p in problems] == [
        "conversations[1]: a tool result that answers no call; not imported",
        "conversations[3]: <tool_response> block 1, a tool result that answers no call; not imported",
        "conversations[4]: a tool result that answers no call; not imported",
    ]
    assert validate_dict(t.to_dict()) == []


def test_text_outside_the_tool_response_blocks_is_reported(tmp_path):
    conv = [
        {"from": "human", "value": "Time?"},
        call("{'name': 'get_time', 'arguments': {}}"),
        {"from": "tool", "value": "Here you are: " + response("14:00")},
    ]
    [t], problems = items(write(tmp_path / "o.jsonl", {"id": "o", "conversations": conv}))
    assert turns(t) == [("tool_call", "get_time({})", "14:00")]
    assert [p.message for p in problems] == [
        "conversations[2]: text outside its <tool_response> blocks; not imported"
    ]


def test_a_message_of_an_unknown_role_is_reported(tmp_path):
    conv = [
        {"from": "human", "value": "Time?"},
        {"from": "narrator", "value": "Meanwhile..."},
        call("{'name': 'get_time', 'arguments': {}}"),
        {"from": "tool", "value": response("14:00")},
    ]
    [t], problems = items(write(tmp_path / "u.jsonl", {"id": "u", "conversations": conv}))
    assert turns(t) == [("tool_call", "get_time({})", "14:00")]
    [p] = problems
    assert (p.kind, p.fatal) == ("message_not_imported", False)
    assert p.message == 'conversations[1]: a message of the unknown role "narrator"; not imported'


@pytest.mark.parametrize(
    "body",
    [
        "{'name': 'ls', 'arguments': {'path': '.'}",  # cut: neither JSON nor Python
        "{'arguments': {'path': '.'}}",  # no name
        "['ls', {'path': '.'}]",  # no object
        "{'name': 'ls', 'arguments': {'paths': {'.', '..'}}}",  # a set is no JSON value
    ],
)
def test_a_malformed_tool_call_block_refuses_the_record(tmp_path, body):
    bad = {
        "id": "bad",
        "conversations": [
            {"from": "human", "value": "list files"},
            call('{"name": "ls", "arguments": {}}\n</tool_call>\n<tool_call>\n' + body),
            {"from": "tool", "value": response("a.txt") + response("b.txt")},
        ],
    }
    trajs, problems = items(write(tmp_path / "bad.jsonl", bad, HERMES))
    assert [t.source.origin_id for t in trajs] == ["rate-1"]  # the other record is imported
    [p] = problems
    assert (p.where, p.kind, p.fatal) == ("line 1", "invalid", True)
    assert p.message.startswith("conversations[1].value<tool_call>[1]: expected ")


def test_a_gpt_message_that_is_a_json_call_is_a_call(tmp_path):
    conv = [
        {"from": "human", "value": "Who wrote Dune?"},
        {"from": "gpt", "value": "I should search."},
        {"from": "gpt", "value": json.dumps({"name": "search", "arguments": '{"q": "Dune"}'})},
        {"from": "observation", "value": "Frank Herbert"},
        {"from": "gpt", "value": json.dumps({"name": "Frank Herbert"})},  # no arguments: text
    ]
    [t], problems = items(write(tmp_path / "j.jsonl", {"id": "j", "conversations": conv}))
    assert turns(t) == [("tool_call", 'search({"q": "Dune"})', "Frank Herbert")]
    assert t.turns[0].reasoning == "I should search."
    assert t.metadata["final_message"] == '{"name": "Frank Herbert"}'
    assert problems == [] and t.domain == "search"
    assert validate_dict(t.to_dict()) == []


def test_llama_factory_parallel_calls_still_split_their_results(tmp_path):
    calls = json.dumps([{"name": "a", "arguments": {}}, {"name": "b", "arguments": {"x": 1}}])
    one = [
        {"from": "human", "value": "go"},
        {"from": "function_call", "value": calls},
        {"from": "observation", "value": json.dumps(["A", {"b": 2}])},
    ]
    two = [*one[:2], {"from": "observation", "value": "A"}, {"from": "observation", "value": "B"}]
    f = write(tmp_path / "lf.jsonl", {"id": "one", "conversations": one}, {"id": "two", "conversations": two})  # fmt: skip
    [a, b], problems = items(f)
    assert turns(a) == [("tool_call", "a({})", "A"), ("tool_call", 'b({"x": 1})', '{"b": 2}')]
    # a result per message answers the calls in order (the second was dropped before)
    assert turns(b) == [("tool_call", "a({})", "A"), ("tool_call", 'b({"x": 1})', "B")]
    assert problems == []


def test_role_messages_under_conversations_are_read_as_openai_messages(tmp_path):
    """Found: datasets that keep OpenAI role messages ({role, content, tool_calls}) under
    ShareGPT's key `conversations` were taken for ShareGPT: no `from` in any message, so
    no turn, and nothing said why. They are read by the OpenAI importer."""
    conv = [
        {"role": "system", "content": "You run shell commands."},
        {"role": "user", "content": "What is in /srv?"},
        {"role": "assistant", "content": "Listing.", "tool_calls": [
            {"id": "c1", "type": "function",
             "function": {"name": "bash", "arguments": '{"cmd": "ls /srv"}'}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "www\nftp"},
        {"role": "assistant", "content": "Two directories."},
    ]  # fmt: skip
    f = write(tmp_path / "c.jsonl", {"id": "r1", "conversations": conv})
    [t], problems = items(f)
    assert problems == [] and t.source.origin_format == "openai"
    assert turns(t) == [("tool_call", 'bash({"cmd": "ls /srv"})', "www\nftp")]
    assert t.turns[0].reasoning == "Listing." and t.metadata["final_message"] == "Two directories."
    assert validate_dict(t.to_dict()) == []
    # a ShareGPT conversation with one role-less message is still ShareGPT's
    mixed = {"conversations": [{"from": "human", "value": "hi"}, {"role": "user", "content": "x"}]}
    [u], _ = items(write(tmp_path / "m.jsonl", mixed))
    assert u.source.origin_format == "sharegpt"


def test_user_and_assistant_are_human_and_gpt_and_a_role_that_is_no_string_is_reported(tmp_path):
    """Found: `from: user/assistant` (some ShareGPT datasets write them) were dropped, and
    a `from` holding a list ended the import with a TypeError."""
    conv = [
        {"from": "user", "value": "Which port?"},
        {"from": "assistant", "value": "Which service?"},
        {"from": "user", "value": "ssh"},
        {"from": ["gpt"], "value": "odd"},
        call('{"name": "lookup", "arguments": {"service": "ssh"}}'),
        {"from": "tool", "value": response("22")},
    ]
    [t], problems = items(write(tmp_path / "u.jsonl", {"conversations": conv}))
    assert turns(t) == [
        ("text", "Which service?", "ssh"),
        ("tool_call", 'lookup({"service": "ssh"})', "22"),
    ]
    assert t.task.instruction == "Which port?"
    assert [p.message for p in problems] == [
        'conversations[3]: a message of the unknown role ["gpt"]; not imported'
    ]


def glaive_call(name, arguments, before=""):
    """A glaive-function-calling-v2 call as its ShareGPT conversions write it: the
    arguments a single-quoted JSON string, so the body as a whole is not JSON."""
    body = f'{{"name": "{name}", "arguments": \'{arguments}\'}}'
    return {"from": "gpt", "value": f"{before}<functioncall> {body} <|endoftext|>"}


@pytest.mark.parametrize(
    "answer",
    [
        {"from": "human", "value": ' FUNCTION RESPONSE:  {"rate": 0.92}\n'},
        {"from": "function_response", "value": '{"rate": 0.92}'},
        {"from": "function", "value": '{"rate": 0.92}'},
    ],
    ids=["human-FUNCTION-RESPONSE", "function_response", "function"],
)
def test_a_glaive_functioncall_is_a_call_and_its_function_response_the_result(tmp_path, answer):
    """Found (F13): a `<functioncall>` in a `gpt` message was imported as what the agent
    said, and the `FUNCTION RESPONSE:` after it as the user's reply: a `text` turn."""
    conv = [
        {"from": "human", "value": "What is the USD to EUR rate?"},
        glaive_call("get_exchange_rate", '{"base": "USD", "target": "EUR"}', "Let me check. "),
        answer,
        {"from": "gpt", "value": "The rate is 0.92."},
    ]
    [t], problems = items(write(tmp_path / "g.jsonl", {"id": "g", "conversations": conv}))
    assert turns(t) == [
        ("tool_call", 'get_exchange_rate({"base": "USD", "target": "EUR"})', '{"rate": 0.92}')
    ]
    assert t.turns[0].action.name == "get_exchange_rate"
    assert t.turns[0].reasoning == "Let me check."
    assert t.task.instruction == "What is the USD to EUR rate?"
    assert t.metadata["final_message"] == "The rate is 0.92."
    assert problems == [] and t.domain != "conversation"
    assert validate_dict(t.to_dict()) == []


def test_glaive_arguments_with_quotes_escapes_and_an_object_and_an_unclosed_call(tmp_path):
    """The argument string is JSON as written: an apostrophe in it, `\\n` stays JSON's;
    arguments already an object are read as they are; no `<|endoftext|>`: the end."""
    conv = [
        {"from": "human", "value": "Post it."},
        glaive_call("post", '{"text": "Don\'t stop,\\nsaid Bo"}'),
        {"from": "human", "value": "FUNCTION RESPONSE: posted"},
        {"from": "gpt", "value": '<functioncall> {"name": "count", "arguments": {"n": 2}}'},
        {"from": "human", "value": "FUNCTION RESPONSE: 2"},
    ]
    [t], problems = items(write(tmp_path / "q.jsonl", {"id": "q", "conversations": conv}))
    assert [(x.action.name, json.loads(x.action.arguments_json)) for x in t.turns] == [
        ("post", {"text": "Don't stop,\nsaid Bo"}),
        ("count", {"n": 2}),
    ]
    assert [x.observation.text for x in t.turns] == ["posted", "2"]
    assert problems == []
    assert validate_dict(t.to_dict()) == []


def test_the_reproduced_glaive_record_imports_its_call(tmp_path):
    glaive = {
        "id": "glaive1",
        "system": "SYSTEM: You are a helpful assistant with access to the following functions.",
        "conversations": [
            {"from": "human", "value": "What is the USD to EUR rate?"},
            glaive_call("get_exchange_rate", '{"base": "USD", "target": "EUR"}'),
            {"from": "human", "value": 'FUNCTION RESPONSE: {"rate": 0.92}'},
            {"from": "gpt", "value": "The rate is 0.92."},
        ],
    }
    [t], problems = items(write(tmp_path / "glaive1.jsonl", glaive))
    assert [x.action.kind for x in t.turns] == ["tool_call"]
    assert t.turns[0].reasoning is None and problems == []
    assert validate_dict(t.to_dict()) == []


def test_a_function_response_that_answers_no_call_is_no_user_reply_and_no_task(tmp_path):
    conv = [
        {"from": "human", "value": "FUNCTION RESPONSE: stray"},  # not the task
        {"from": "human", "value": "Rate?"},
        {"from": "gpt", "value": "Which currencies?"},
        {"from": "human", "value": "FUNCTION RESPONSE: 0.92"},  # not the user's reply
        {"from": "human", "value": "USD to EUR"},
    ]
    [t], problems = items(write(tmp_path / "s.jsonl", {"id": "s", "conversations": conv}))
    assert t.task.instruction == "Rate?"
    assert turns(t) == [("text", "Which currencies?", "USD to EUR")]
    assert [p.message for p in problems] == [
        "conversations[0]: a tool result that answers no call; not imported",
        "conversations[3]: a tool result that answers no call; not imported",
    ]
    assert validate_dict(t.to_dict()) == []


@pytest.mark.parametrize(
    "body",
    [
        '{"name": "get_rate", "arguments": \'{"base": "USD"}\'',  # cut
        "{\"arguments\": '{}'}",  # no name
        '["get_rate", {}]',  # no object
        "",  # nothing
    ],
)
def test_a_malformed_functioncall_refuses_the_record(tmp_path, body):
    bad = {
        "id": "bad",
        "conversations": [
            {"from": "human", "value": "Rate?"},
            {"from": "gpt", "value": f"<functioncall> {body} <|endoftext|>"},
            {"from": "human", "value": "FUNCTION RESPONSE: 0.92"},
        ],
    }
    trajs, problems = items(write(tmp_path / "bad.jsonl", bad, HERMES))
    assert [t.source.origin_id for t in trajs] == ["rate-1"]
    [p] = problems
    assert (p.where, p.kind, p.fatal) == ("line 1", "invalid", True)
    assert p.message.startswith("conversations[1].value<functioncall>[0]: expected ")


def unpaired(problems):
    return [(p.kind, p.fatal, p.message) for p in problems]


def test_a_call_nothing_answers_is_reported(tmp_path):
    """Found (F14): a call with no result after it got an empty observation without a
    word (a function_call before the agent's answer; a last Hermes <tool_call>). It is
    reported and makes no turn: what it answered is unknown (a record left with no turn
    is `empty` to the import)."""
    fc = [
        {"from": "human", "value": "weather in SF?"},
        {
            "from": "function_call",
            "value": json.dumps({"name": "get_weather", "arguments": {"city": "SF"}}),
        },
        {"from": "gpt", "value": "I could not get it."},
    ]
    hermes = [
        {"from": "system", "value": "You are a function calling AI model."},
        {"from": "human", "value": "weather in SF?"},
        call('{"name": "get_weather", "arguments": {"city": "SF"}}'),
    ]
    f = write(tmp_path / "u.jsonl", {"id": "fc", "conversations": fc}, {"id": "h", "conversations": hermes})  # fmt: skip
    [a, b], problems = items(f)
    assert turns(a) == turns(b) == []
    assert a.metadata["final_message"] == "I could not get it."
    assert unpaired(problems) == [
        ("unpaired_call", False, "conversations[1]: no result for call 'get_weather'; no turn"),
        ("unpaired_call", False, "conversations[2]: no result for call 'get_weather'; no turn"),
    ]


def test_parallel_calls_with_fewer_results_report_the_unanswered_one(tmp_path):
    calls = [{"name": "get_weather", "arguments": {"city": c}} for c in ("SF", "NY")]
    conv = [
        {"from": "human", "value": "weather in SF and NY?"},
        {"from": "function_call", "value": json.dumps(calls)},
        {"from": "observation", "value": '{"temp": 18}'},
        {"from": "gpt", "value": "SF 18, NY unknown."},
    ]
    [t], problems = items(write(tmp_path / "p.jsonl", {"id": "p", "conversations": conv}))
    assert [x.observation.text for x in t.turns] == ['{"temp": 18}']  # NY's: no turn
    assert unpaired(problems) == [
        (
            "unpaired_call",
            False,
            "conversations[1]: no result for call 'get_weather' (2 of 2); no turn",
        )
    ]
    assert validate_dict(t.to_dict()) == []


def test_an_unanswered_glaive_functioncall_is_reported(tmp_path):
    conv = [
        {"from": "human", "value": "Rate?"},
        glaive_call("get_exchange_rate", '{"base": "USD"}'),
    ]
    [t], problems = items(write(tmp_path / "n.jsonl", {"id": "n", "conversations": conv}))
    assert turns(t) == []  # no turn: the import reports the record `empty`
    assert unpaired(problems) == [
        (
            "unpaired_call",
            False,
            "conversations[1]: no result for call 'get_exchange_rate'; no turn",
        )
    ]
