"""Hunt 1205f: `cond_novelty` compares like with like. The observation's size given the
history and its size alone are both its deflate blocks' bits in whole bytes, rounded up
as a stream ends (docs/pipeline.md#turn-statistics): the size given the history was
counted in whole bytes written (the last bits left for the next block) and the size
alone rounded up (`Z_FINISH`), so an observation nothing before helped scored below 1
(`whoami` -> `root\\n`: 6 / 7 = 0.857), short ones most. The real zlib, the real C loop."""

from __future__ import annotations

import itertools
import json
import random
import subprocess
import zlib

from worldtrace.pipelines import stats as S

WORDS = b"alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu".split()


def short_outputs(seed: int, n: int) -> list[bytes]:
    """Outputs a shell gives (`root\\n`, a few words, a path), 1 to ~60 bytes: letters and
    spaces only, so that an action of digits and punctuation holds nothing they repeat,
    and no 3 bytes twice (a stream alone cannot match its first bytes: zlib's position 0
    is its "no match", so a repeat of them compresses a little better after a history)."""
    rng = random.Random(seed)
    out = [b"root\n", b"ok", b"x", b"/home/user\n", b"Permission denied\n"]
    while len(out) < n:
        o = b" ".join(rng.sample(WORDS, rng.randrange(1, 6))) + b"\n" * rng.randrange(2)
        trigrams = [o[i : i + 3] for i in range(len(o) - 2)]
        if len(set(trigrams)) == len(trigrams):
            out.append(o)
    return out


def unhelpful_actions(n: int) -> list[bytes]:
    """Actions of 0..n-1 distinct bytes above 143 (9-bit literals in a fixed block: 10 + 9k
    bits), which no observation here holds: they leave each number of bits (0-7) of their
    last byte for the observation's block to share."""
    return [bytes(range(144, 144 + k)) for k in range(n)]


def test_whoami_root_scores_1_nothing_before_helps():
    """The hunt's repro: the observation's block after `whoami` is the one it makes alone."""
    assert S.ConditionalNovelty().observe(b"whoami", b"root\n") == 1.0
    [given] = S.history_sizes([b"whoami"], [b"root\n"], [0, 1])
    [alone] = S.deflated_sizes([b"root\n"])
    assert (given, alone) == (7, 7)  # 50 bits: a fixed block of 5 literals
    assert S.novelty(given, alone) == 1.0


def test_an_observation_the_history_does_not_help_is_its_size_alone():
    """Whatever bits the action's last byte leaves (every length of action), in the C loop
    and in Python: given == alone, novelty exactly 1."""
    obs = short_outputs(1, 120)
    acts = list(itertools.islice(itertools.cycle(unhelpful_actions(24)), len(obs)))
    starts = list(range(len(obs) + 1))  # one turn a record: no earlier observation
    alone = S.deflated_sizes(obs)
    assert alone == [len(zlib.compress(o, S.ZLIB_LEVEL, S.RAW_DEFLATE)) for o in obs]
    given = S.history_sizes(acts, obs, starts)
    assert given == alone
    python = [S.ConditionalNovelty().given(a, o) for a, o in zip(acts, obs, strict=True)]
    assert python == alone
    assert {S.novelty(g, a) for g, a in zip(given, alone, strict=True)} == {1.0}
    carried = set()
    for a in acts:  # the actions did leave each number of bits to share
        h = zlib.compressobj(S.ZLIB_LEVEL, zlib.DEFLATED, S.RAW_DEFLATE)
        h.compress(a), h.flush(zlib.Z_BLOCK)
        carried.add(S.held_bits(h))
    assert carried == set(range(8))


def test_a_repeat_still_scores_near_0_and_the_two_paths_agree():
    """The statistic still does its work: the second `cat` of a file is a repeat; and the
    Python reference equals the C loop turn by turn over records of mixed turns (long
    outputs past the window, random bytes in stored blocks, empty ones)."""
    body = b"".join(b"line %d of a config file\n" % i for i in range(40))
    cn = S.ConditionalNovelty()
    assert cn.observe(b"cat a.conf\n", body) > 0.8
    assert cn.observe(b"ls\n", b"README\n") == 1.0
    assert cn.observe(b"cat a.conf\n", body) < 0.25  # `repeat` (agentworld-v1+info)
    rng = random.Random(7)
    pool = [b"", b"root\n", rng.randbytes(200), body, b"ab" * 30_000, *short_outputs(2, 30)]
    acts, obs, starts = [], [], [0]
    for _ in range(80):
        for _ in range(rng.randrange(1, 7)):
            acts.append(rng.choice([*unhelpful_actions(12), b"cat a.conf\n"]))
            obs.append(rng.choice(pool))
        starts.append(len(obs))
    given = S.history_sizes(acts, obs, starts)
    python = []
    for a, e in itertools.pairwise(starts):
        cn = S.ConditionalNovelty()
        python += [cn.given(x, o) for x, o in zip(acts[a:e], obs[a:e], strict=True)]
    assert given == python
    assert sum(g < S.deflated_size(o) for g, o in zip(given, obs, strict=True)) > 50


def test_processing_an_imported_whoami_gives_cond_novelty_1(tmp_path, wt_env):
    """End to end as the hunt found it: an OpenAI record imported and processed; its
    `zlib_ratio` keeps its definition (the stand-alone stream's bytes over the text's)."""

    def call(cid: str, command: str) -> dict:
        args = json.dumps({"command": command})
        fn = {"id": cid, "type": "function", "function": {"name": "bash", "arguments": args}}
        return {"role": "assistant", "content": None, "tool_calls": [fn]}

    messages = [
        {"role": "user", "content": "who am I?"},
        call("c1", "whoami"),
        {"role": "tool", "tool_call_id": "c1", "content": "root\n"},
        call("c2", "id -u"),  # a second turn: `min_turns`
        {"role": "tool", "tool_call_id": "c2", "content": "0\n"},
    ]
    f = tmp_path / "chat.jsonl"
    f.write_text(json.dumps({"id": "w1", "messages": messages}) + "\n")

    def wt(*args: str) -> str:
        r = subprocess.run(["worldtrace", *args], capture_output=True, text=True, env=wt_env)
        assert r.returncode == 0, r.stderr
        return r.stdout

    wt("import", str(f))
    wt("process")
    sql = "SELECT cond_novelty, zlib_ratio FROM turns WHERE turn_index = 0"
    [row] = json.loads(wt("query", sql, "--format", "json"))
    assert row == {"cond_novelty": 1.0, "zlib_ratio": 7 / 5}
