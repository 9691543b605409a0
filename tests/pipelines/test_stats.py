from __future__ import annotations

import math

import pytest
from worldtrace.pipelines import stats as S


def test_words_are_lowercased_unique_word_runs():
    assert S.words("Hello, hello WORLD_1 café-au-lait") == {
        "hello",
        "world_1",
        "café",
        "au",
        "lait",
    }


def test_report_stats_hand_computed():
    # W_act = {explain, git, rebase}; W_obs = {git, rebase, moves, commits, onto, a, new, base, commit}
    s = S.report_stats("explain git rebase", "git rebase moves commits onto a new base commit")
    assert s.ol == pytest.approx(2 / 3)
    assert s.nov == pytest.approx(7 / 9)
    assert s.jac == pytest.approx(2 / 10)
    assert s.r == pytest.approx(47 / 18)


def test_zero_denominators_are_zero():
    s = S.report_stats("", "")
    assert (s.ol, s.nov, s.jac, s.r) == (0.0, 0.0, 0.0, 0.0)
    s = S.report_stats("!!!", "...")  # no \\w runs at all, but non-empty action
    assert (s.ol, s.nov, s.r) == (0.0, 0.0, 1.0)


def test_byte_entropy_and_zlib_ratio():
    assert S.byte_entropy(b"") == 0.0
    assert S.byte_entropy(b"aaaa") == 0.0
    assert S.byte_entropy(b"abab") == pytest.approx(1.0)
    assert S.byte_entropy(bytes(range(256))) == pytest.approx(8.0)
    assert S.zlib_ratio(b"a" * 10000) < 0.01
    assert S.zlib_ratio(bytes(range(256)) * 1) > 0.9


def test_conditional_novelty_catches_the_second_cat():
    body = (
        "def f(x):\n    return x * 42  # the answer to everything\n" * 3 + "import os\n"
    ).encode()
    cn = S.ConditionalNovelty()
    first = cn.observe(b"cat a.py\n", body)
    cn.observe(b"ls\n", b"a.py b.py c.py")
    second = cn.observe(b"cat a.py\n", body)
    assert first > 0.8
    assert second < 0.25
    assert S.ConditionalNovelty().observe(b"x", b"") == 0.0


def test_template_normalizes_numbers_hashes_space():
    assert S.template("Saved  42 bytes to 0xdeadbeef\n") == S.template(
        "saved 7 bytes to 0x12ab34cd"
    )
    assert S.template_key("File saved.") == S.template_key("file   SAVED.")
    assert S.template_key("File saved.") != S.template_key("File deleted.")


def test_conditional_novelty_stays_within_0_and_1_on_short_novel_observations():
    """Found: the history's sync-flush marker made short novel observations score 1.5-2."""
    for action, obs in [(b"ls\n", b"ok"), (b"date\n", b"Tue Nov 30 12:00:01 UTC 2026")]:
        score = S.ConditionalNovelty().observe(action, obs)
        assert 0.5 <= score <= 1.0, (obs, score)


def test_surprisal_rules_on_counts_not_corpus_size():
    """Found: -log2(count/turns) saturated at log2(turns), so a small corpus was all common."""
    assert S.surprisal(1) == pytest.approx(math.log2(S.SURPRISAL_REFERENCE))
    assert S.surprisal(4) == pytest.approx(math.log2(S.SURPRISAL_REFERENCE / 4))
    assert S.surprisal(S.SURPRISAL_REFERENCE) == 0.0
    assert S.surprisal(10 * S.SURPRISAL_REFERENCE) == 0.0  # saturates
