"""Found importing real files (2026-12-04 night): a tau2-bench results file
(sierra-research/tau2-bench, `Results`: `{timestamp, info, tasks, simulations: [...]}`, each
run's messages in tau2's own shape) was `unrecognized`, whole: every run lost. tau-bench's
results (a list of runs with `traj`) were read; tau2's were not.

Now each simulation is a run the openai format reads: an assistant's `tool_calls` `{id,
name, arguments, requestor}` are its calls, a `tool` message answers the call of its `id`
(`error` its error flag), `reward_info.reward` the reward. Not the agent's and said so: the
greeting tau2's orchestrator writes as the agent (its `DEFAULT_FIRST_AGENT_MESSAGE`) and the
simulated user's own tool use (`requestor: user`, the telecom domain's device tools).

Our own fixtures, in tau2's shapes (data_model/message.py, simulation.py), written here."""

from __future__ import annotations

import json

from .conftest import found, import_written


def call(cid, name, args, requestor="assistant"):
    return {"id": cid, "name": name, "arguments": args, "requestor": requestor}


def result(cid, content, requestor="assistant", error=False):
    return {"role": "tool", "id": cid, "content": content, "requestor": requestor, "error": error}


GREETING = {"role": "assistant", "content": "Hi! How can I help you today?", "cost": 0.0}


def results(*runs):
    return {
        "timestamp": "2025-06-10T10:00:00",
        "info": {"num_trials": 1, "environment_info": {"domain_name": "telecom"}},
        "tasks": [{"id": "t1", "user_scenario": {"instructions": {"reason_for_call": "no data"}}}],
        "simulations": list(runs),
    }


def simulation(sid, messages, reward=1.0):
    return {
        "id": sid,
        "task_id": "t1",
        "trial": 0,
        "seed": 300,
        "termination_reason": "user_stop",
        "reward_info": {"reward": reward},
        "messages": messages,
    }


MESSAGES = [
    GREETING,
    {"role": "user", "content": "My phone has no mobile data."},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [call("a1", "get_line", {"phone": "555"})],
    },
    result("a1", '{"status": "suspended"}'),
    {"role": "assistant", "content": "Please turn airplane mode off."},
    {
        "role": "user",
        "content": None,
        "tool_calls": [call("u1", "toggle_airplane_mode", {}, "user")],
    },
    result("u1", "Airplane mode is now OFF.", requestor="user"),
    {"role": "user", "content": "Done, it is off."},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [call("a2", "resume_line", {"phone": "555"})],
    },
    result("a2", "Error: line is locked", error=True),
    {"role": "assistant", "content": "I could not resume it."},
    {"role": "user", "content": "###STOP###"},
]


def test_each_simulation_is_a_run_with_the_agents_calls_and_answers(tmp_path):
    r, got = import_written(tmp_path, "results.json", results(simulation("s1", MESSAGES), simulation("s2", MESSAGES[:4], 0.0)))  # fmt: skip
    assert not found(r, "unrecognized") and set(got) == {"s1", "s2"}
    t = got["s1"]
    assert t.source.origin_format == "openai" and t.task.task_id == "t1"
    assert t.task.instruction == "My phone has no mobile data."
    assert [(x.action.kind, x.action.text, x.observation.text, x.observation.is_error) for x in t.turns] == [
        ("tool_call", 'get_line({"phone": "555"})', '{"status": "suspended"}', False),
        ("text", "Please turn airplane mode off.", "Done, it is off.", False),
        ("tool_call", 'resume_line({"phone": "555"})', "Error: line is locked", True),
        ("text", "I could not resume it.", "###STOP###", False),
    ]  # fmt: skip
    assert (t.outcome.status, t.outcome.reward) == ("success", 1.0)
    assert (got["s2"].outcome.status, got["s2"].outcome.reward) == ("failure", 0.0)
    info = json.loads(t.metadata["info"])  # metadata values are stored as JSON text
    assert info["termination_reason"] == "user_stop" and info["reward_info"] == {"reward": 1.0}
    assert info["task"]["user_scenario"]["instructions"] == {"reason_for_call": "no data"}
    said = [(w, m) for w, m in found(r, "message_not_imported") if w == "simulations[0]"]
    assert said == [
        ("simulations[0]", "messages[0]: tau2-bench's greeting, which its orchestrator writes as the agent; not imported"),
        ("simulations[0]", "messages[5]: the simulated user's own tool call(s); not imported"),
        ("simulations[0]", "messages[6]: a result of the simulated user's own tool call; not imported"),
    ]  # fmt: skip


def test_a_greeting_the_agent_wrote_later_is_its_own(tmp_path):
    """Only the first message, the orchestrator's, is passed over."""
    messages = [{"role": "user", "content": "hello"}, GREETING, {"role": "user", "content": "hi"}]
    _, got = import_written(tmp_path, "results.json", results(simulation("s1", messages)))
    assert [(x.action.text, x.observation.text) for x in got["s1"].turns] == [
        ("Hi! How can I help you today?", "hi")
    ]


def test_a_user_message_with_words_and_its_own_calls_keeps_its_words(tmp_path):
    messages = [
        {"role": "user", "content": "no data"},
        {"role": "assistant", "content": "Restart the phone."},
        {
            "role": "user",
            "content": "Restarting now.",
            "tool_calls": [call("u1", "reboot", {}, "user")],
        },
        result("u1", "rebooted", requestor="user"),
    ]
    r, got = import_written(tmp_path, "results.json", results(simulation("s1", messages)))
    assert [(x.action.text, x.observation.text) for x in got["s1"].turns] == [
        ("Restart the phone.", "Restarting now.")
    ]
    assert [m for _, m in found(r, "message_not_imported")] == [
        "messages[3]: a result of the simulated user's own tool call; not imported"
    ]
