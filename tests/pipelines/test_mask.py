"""Every category boundary of policy agentworld-v1, with hand-computed examples."""

from __future__ import annotations

import pytest
from worldtrace.pipelines.mask import (
    AgentWorldV1,
    InformationAware,
    get_policy,
    keep_turn,
    unit_draw,
)
from worldtrace.pipelines.stats import report_stats

P = AgentWorldV1()


def decide(ol, nov, r=1.0, obs_len=100):
    return P.decide({"ol": ol, "nov": nov, "r": r}, "", "x" * obs_len).category


@pytest.mark.parametrize(
    "action,obs,category,keep",
    [
        # W_act={say,hello,world,again} W_obs={hello,world,again}: OL=3/4, Nov=0
        ("say hello world again", "hello world again", "echo", 0.05),
        # W_act={echo,hello,world} W_obs={hello,world}: OL=2/3 (<0.7), Nov=0
        ("echo hello world", "hello world", "boilerplate", 0.10),
        # OL=2/3, Nov=7/9, R=47/18
        ("explain git rebase", "git rebase moves commits onto a new base commit", "expansion", 1.0),
        # OL=0, Nov=1, R=25/9
        ("cat f.txt", "the quick brown fox jumps", "retrieval", 1.0),
        # Nov=1, R=7/23 <= 1
        ("mkdir build_directory_x", "ok done", "action", 1.0),
        # W_act={ls,a,b,x} W_obs={x,yyyyyyyyy}: OL=1/4, Nov=1/2 (<0.6), R=11/8 > 1, short
        ("ls a b x", "x yyyyyyyyy", "action", 1.0),
        # W_act={convert,the,file,now,please} W_obs={the,file}: OL=2/5, Nov=0, R=8/27
        ("convert the file now please", "the file", "transform", 0.5),
        # W_act={a,b,c,d,e} W_obs={a,b,x}: OL=2/5, Nov=1/3, R=17/9
        ("a b c d e", "a b x a b a b a b", "other", 1.0),
    ],
)
def test_hand_computed_examples(action, obs, category, keep):
    s = report_stats(action, obs)
    d = P.decide({"ol": s.ol, "nov": s.nov, "r": s.r}, action, obs)
    assert (d.category, d.keep) == (category, keep)
    assert d.rule.startswith(category)


def test_echo_boundaries():
    assert decide(0.7, 0.29) == "echo"
    assert decide(0.6999, 0.29) == "boilerplate"  # echo needs OL >= 0.7
    assert decide(0.7, 0.3) == "boilerplate"  # echo needs Nov < 0.3


def test_boilerplate_boundaries():
    assert decide(0.5, 0.4999) == "boilerplate"
    assert decide(0.4999, 0.4999, r=0.5) == "transform"
    assert decide(0.5, 0.5, r=1.0) == "action"  # Nov=0.5 is not < 0.5


def test_expansion_boundaries():
    assert decide(0.5, 0.5, r=1.5001) == "expansion"
    assert decide(0.5, 0.5, r=1.5, obs_len=100) == "other"  # R must exceed 1.5; Nov<0.6
    assert decide(0.5, 0.6, r=1.5) == "retrieval"  # falls to retrieval when Nov>=0.6


def test_retrieval_boundaries():
    assert decide(0.0, 0.6, r=1.0001) == "retrieval"
    assert decide(0.0, 0.5999, r=1.0001) == "other"  # long observation: not "short"
    assert decide(0.0, 0.6, r=1.0) == "action"  # R must exceed 1


def test_action_boundaries_and_short():
    assert decide(0.0, 0.5, r=1.0) == "action"
    assert decide(0.0, 0.5, r=1.2, obs_len=63) == "action"  # short = len < 64
    assert decide(0.0, 0.5, r=1.2, obs_len=64) == "other"
    assert decide(0.0, 0.4999, r=1.0) == "other"  # transform needs R < 1


def test_transform_boundaries():
    assert decide(0.0, 0.4999, r=0.9999) == "transform"
    assert decide(0.0, 0.5, r=0.9999) == "action"


def test_thresholds_and_keeps_configurable():
    p = get_policy("agentworld-v1", echo_ol=0.9, short_chars=10, **{"keep.echo": 0.0})
    s = {"ol": 0.8, "nov": 0.1, "r": 1.0}
    assert p.decide(s, "", "").category == "boilerplate"
    assert p.keep.echo == 0.0 and p.thresholds.short_chars == 10
    assert p.describe()["thresholds"]["echo_ol"] == 0.9
    with pytest.raises(ValueError, match="unknown mask policy"):
        get_policy("nope")


def test_information_aware_policy_down_weights_repeats_and_common():
    p = InformationAware()
    base = {"ol": 0.0, "nov": 1.0, "r": 3.0, "cond_novelty": 0.9, "corpus_surprisal": 4.0}
    assert p.decide(base, "cat a", "x" * 100).category == "retrieval"
    assert p.decide({**base, "cond_novelty": 0.1}, "cat a", "x" * 100).category == "repeat"
    assert p.decide({**base, "corpus_surprisal": 0.5}, "cat a", "x" * 100).category == "common"
    echo = {**base, "ol": 1.0, "nov": 0.0, "cond_novelty": 0.0}
    assert p.decide(echo, "a", "a").category == "echo"  # already masked: unchanged


def test_keep_turn_is_deterministic_and_calibrated():
    assert keep_turn("t", 0, 0, 1.0) and not keep_turn("t", 0, 0, 0.0)
    draws = [keep_turn(f"traj{i}", i % 13, 7, 0.1) for i in range(20000)]
    assert abs(sum(draws) / len(draws) - 0.1) < 0.01
    assert draws == [keep_turn(f"traj{i}", i % 13, 7, 0.1) for i in range(20000)]
    assert unit_draw("a", 1, 0) != unit_draw("a", 1, 1)


@pytest.mark.parametrize(
    "ol,nov,r,obs_len,rule",
    [
        (0.8, 0.1, 2.0, 100, "echo: OL>=0.75 and Nov<0.3 (OL=0.800 Nov=0.100 R=2.000)"),
        (0.6, 0.1, 2.0, 100, "boilerplate: OL>=0.5 and Nov<0.5 (OL=0.600 Nov=0.100 R=2.000)"),
        (
            0.6,
            0.55,
            2.0,
            100,
            "expansion: OL>=0.5 and Nov>=0.5 and R>1.5 (OL=0.600 Nov=0.550 R=2.000)",
        ),
        (0.1, 0.7, 2.0, 100, "retrieval: Nov>=0.6 and R>1.0 (OL=0.100 Nov=0.700 R=2.000)"),
        (0.1, 0.5, 0.5, 100, "action: Nov>=0.5 and R<=1.0 (OL=0.100 Nov=0.500 R=0.500)"),
        (0.1, 0.5, 1.2, 9, "action: Nov>=0.5 and len(obs)=9<32 (OL=0.100 Nov=0.500 R=1.200)"),
        (0.1, 0.4, 0.5, 100, "transform: Nov<0.5 and R<1.0 (OL=0.100 Nov=0.400 R=0.500)"),
        (0.1, 0.4, 1.2, 100, "other: no rule matched (OL=0.100 Nov=0.400 R=1.200)"),
    ],
)
def test_each_rule_names_its_thresholds_and_the_values_that_fired_it(ol, nov, r, obs_len, rule):
    """The rule text is data (`turns.rule`): its thresholds are the policy's own
    (overridden here), its values the turn's, with three decimals."""
    policy = get_policy("agentworld-v1", echo_ol=0.75, short_chars=32, **{"keep.echo": 0.0})
    d = policy.decide({"ol": ol, "nov": nov, "r": r}, "", "x" * obs_len)
    assert d.rule == rule
    assert d.keep == (0.0 if d.category == "echo" else policy.keep.__dict__[d.category])
