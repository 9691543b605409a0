"""Found (a process hunt, 12-07): a terminal turn whose screen ends its lines with `\\r\\n`
(a pty's output, as imported records keep it) was not read as the echo of its typed line
then the answer: decided on the whole screen, its echo and prompt were kept whole
(`expansion`, keep 1.0) and the answer after them (`Killed`, `rc=137`) was boilerplate.
An action typed with `\\r` (the terminal's Enter) was never read as a typed line either.
Line ends are now read alike; the decision is the one of the `\\n` screen."""

from __future__ import annotations

import pytest
from worldtrace.pipelines import stats as S
from worldtrace.pipelines.mask import get_policy

KILLED = "python3 -c 'import os; os.kill(os.getpid(), 9)'; echo rc=$?\n"
PROMPT = "user@sandbox:~$ "


def decided(policy, action: str, observation: str):
    s = S.ratios(S.words(action), S.words(observation), len(action), len(observation))
    stats = {**s, "byte_entropy": 4.0, "zlib_ratio": 0.5, "cond_novelty": 1.0, "corpus_surprisal": 4.0}  # fmt: skip
    return policy.decide(stats, action, observation)


@pytest.mark.parametrize("name", ["agentworld-v1", "agentworld-v1+info"])
@pytest.mark.parametrize(
    "action, answer",
    [("touch x\n", ""), (KILLED, "Killed\nrc=137\n"), ("printf 'a\\nb\\n'\n", "a\nb\n")],
)
def test_a_screen_of_crlf_lines_is_decided_as_its_lf_twin(name, action, answer):
    policy = get_policy(name)
    lf = decided(policy, action, action + answer + PROMPT)
    assert "after the echo" in lf.rule or "echo of the typed line" in lf.rule, lf
    crlf = (action + answer).replace("\n", "\r\n") + PROMPT
    for typed in (action, action[:-1] + "\r", action[:-1] + "\r\n"):
        got = decided(policy, typed, crlf)
        assert (got.category, got.keep) == (lf.category, lf.keep), (typed, got, lf)


def test_a_screen_that_does_not_start_with_the_typed_line_is_decided_whole():
    policy = get_policy("agentworld-v1")
    for action, observation in [("ls\n", "lsx\r\n"), ("ls", "ls\r\nfoo"), ("ls\r", "l\r\n")]:
        d = decided(policy, action, observation)
        assert "echo of the typed line" not in d.rule, (action, observation, d)
