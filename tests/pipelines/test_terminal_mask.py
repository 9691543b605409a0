"""A terminal turn is decided on what the shell answered, not on the echo of its keys.

Found by a data audit: a terminal observation is the screen, so it starts with the
echo of the typed command; a short answer after a long command (`Killed` / `rc=137`,
`command not found` / `rc=127`) shared most of its words with the action and was
decided `echo` or `boilerplate` with its echo: masked, the very answers a world model
must learn.
"""

from __future__ import annotations

import pytest
from worldtrace.collectors.jobs import JobSpec, run_job
from worldtrace.pipelines.mask import AgentWorldV1, echo_end, get_policy, split_answer
from worldtrace.pipelines.process import ProcessConfig, run
from worldtrace.pipelines.stats import report_stats
from worldtrace.schemas.views import connect

PROMPT = "user@sandbox:~$ "
HOG = "python3 -c 'x = bytearray(200 << 20)'; echo rc=$?\n"
MISSING = "git --version; echo rc=$?\n"


def decide(action: str, observation: str, policy=AgentWorldV1()):
    s = report_stats(action, observation)
    return policy.decide({"ol": s.ol, "nov": s.nov, "r": s.r}, action, observation)


@pytest.mark.parametrize(
    "action,answer,category",
    [
        (HOG, "Killed\nrc=137\n" + PROMPT, "action"),
        (MISSING, "bash: git: command not found\nrc=127\n" + PROMPT, "retrieval"),
        ("python3 sum.py\n", "45\n" + PROMPT, "action"),
        # Table 3 still applies to the answer: it repeats the action's words
        ("echo hello world\n", "hello world\n" + PROMPT, "boilerplate"),
        ("cd /tmp\n", PROMPT, "boilerplate"),  # a silent success: the prompt only
        ("sleep 30\n", "", "echo"),  # still running: nothing after the echo
    ],
)
def test_a_typed_line_is_decided_on_its_answer(action, answer, category):
    d = decide(action, action + answer)
    assert d.category == category, d.rule
    assert "typed line" in d.rule
    if category in ("action", "retrieval"):
        assert d.keep == 1.0


def test_the_echo_rule_needs_a_whole_typed_line_at_the_start():
    assert echo_end("ls\n", "ls\nfile\n" + PROMPT) == 3
    assert not echo_end("ls", "ls is a command")  # no Enter: not a typed line
    assert not echo_end("cat a\n", "hello\ncat a\n")  # the line is not where the screen starts
    assert not echo_end("\n", "\n" + PROMPT)  # Enter alone echoes nothing to tell apart
    assert split_answer("out\n" + PROMPT) == ("out\n", PROMPT)
    assert split_answer("out\nmore") == ("out\nmore", "")  # no prompt came back
    assert split_answer("a$ \n") == ("a$ \n", "")  # a line break after it: output


def test_the_echo_rule_can_be_turned_off():
    action, obs = HOG, HOG + "Killed\nrc=137\n" + PROMPT
    off = get_policy(answer_after_echo="false")
    assert decide(action, obs, off).category == "boilerplate"  # the report's rule on the screen
    assert get_policy(answer_after_echo=True).describe()["answer_after_echo"] is True
    with pytest.raises(ValueError, match="answer_after_echo=maybe: expected true or false"):
        get_policy(answer_after_echo="maybe")


@pytest.mark.docker
def test_a_real_shells_short_answers_are_targets(docker_engine, store):
    """A real terminal under memory_low and missing_commands, collected and processed:
    the kill and the missing command are in the loss, the silent `cd` kept at 0.1."""
    spec = JobSpec.from_dict(
        {
            "name": "echo-mask",
            "sandbox": {"kind": "terminal", "docker": {"step_timeout": 20}},
            "conditions": [{"memory_low": "64m"}, {"missing_commands": ["git"]}],
            "tasks": [{"id": "t", "actions": ["cd /tmp\n", HOG, MISSING]}],
        }
    )
    [t] = run_job(spec, store.raw).trajectories
    assert t.outcome.status == "success"
    assert "Killed\nrc=137" in t.turns[1].observation.text
    run(ProcessConfig(inputs=[str(store.raw)], output=str(store.processed), workers=1))
    rows = (
        connect(store)
        .execute("SELECT turn_index, category, keep, in_loss FROM turns ORDER BY turn_index")
        .fetchall()
    )
    assert [r[:3] for r in rows] == [
        (0, "boilerplate", 0.1),
        (1, "action", 1.0),
        (2, "retrieval", 1.0),
    ]
    assert rows[1][3] and rows[2][3]
