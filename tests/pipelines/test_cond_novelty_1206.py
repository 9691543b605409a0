"""Hunt 1206: `cond_novelty` is exactly 1 when nothing before the observation helps, self-
repetitive observations too. zlib never takes stream position 0 as a match source (its
hash chains' "none"), so a stream of the observation alone could not copy its first byte
while the history, where it starts later, could: `q\\n` -> 20 `a`s scored 0.8, one byte
less given than alone. Both sizes now frame the observation alike, after a one-byte block
(docs/pipeline.md#turn-statistics); `zlib_ratio`'s numerator is the same size. The real
zlib, the real C loop and the Python reference, the real CLI."""

from __future__ import annotations

import itertools
import json
import random
import subprocess
import zlib

import pytest
from worldtrace.pipelines import stats as S
from worldtrace.pipelines.process import LAYOUT

HUNT = [b"aaaaaaaaaaaaaaaaaaaa", b"----------", b"ok ok ok ok", b"hello hello hello hello"]
LETTERS = b"abcdefghijklmnopqrstuvwxyz -\n"  # the observations' bytes
OTHERS = bytes(range(33, 45)) + b"0123456789" + bytes(range(144, 160))  # the actions'


@pytest.fixture(params=["c", "python"])
def path(request, monkeypatch):
    """Each test on the C loop and on the Python reference (`stats._C` None)."""
    if request.param == "python":
        monkeypatch.setattr(S, "_C", None)
    else:
        assert S._C is not None
    return request.param


def repetitive(rng: random.Random) -> bytes:
    """A self-repetitive text of letters (a run, words said again, lines said again, a
    string said again), 3 B to 8 KB: inside the window."""
    kind = rng.randrange(4)
    if kind == 0:  # a run: `----------`, `aaaa`
        return bytes([rng.choice(LETTERS)]) * rng.randrange(2, 400)
    letters = LETTERS[:26]
    words = [bytes(rng.choices(letters, k=rng.randrange(1, 7))) for _ in range(rng.randrange(1, 6))]
    if kind == 1:  # `ok ok ok ok`
        return b" ".join(rng.choice(words) for _ in range(rng.randrange(2, 60)))
    if kind == 2:  # lines said again
        lines = [b" ".join(rng.choices(words, k=rng.randrange(1, 8))) + b"\n" for _ in range(5)]
        return b"".join(rng.choices(lines, k=rng.randrange(2, 300)))
    return bytes(rng.choices(LETTERS, k=rng.randrange(3, 40))) * rng.randrange(2, 30)


def unhelpful(rng: random.Random) -> bytes:
    """An action of bytes no observation here holds (so no 3 bytes in common): one byte
    (as the hunt found it) or more, literals of 8 and 9 bits, so that it leaves each
    number of bits of its last byte for the observation's blocks."""
    return bytes(rng.choices(OTHERS, k=rng.choice([1, 1, 2, 3, rng.randrange(4, 60)])))


def sizes(acts: list[bytes], obs: list[bytes]) -> tuple[list[int], list[int]]:
    """Each turn its own record: the sizes given (an action only) and alone."""
    return S.history_sizes(acts, obs, list(range(len(obs) + 1))), S.deflated_sizes(obs)


def test_the_hunts_examples_score_exactly_1(path):
    for o in HUNT:
        assert S.ConditionalNovelty().observe(b"q\n", o) == 1.0, o
    given, alone = sizes([b"q\n"] * len(HUNT), HUNT)
    assert given == alone
    assert alone == [S.deflated_size(o) for o in HUNT]


@pytest.mark.parametrize("seed", [1, 2])
def test_self_repetitive_observations_nothing_before_helps_score_exactly_1(path, seed):
    """Hundreds of self-repetitive texts after actions that share no 3 bytes with them:
    given == alone, turn by turn, and every score exactly 1 (unframed, ~360 of each 400
    scored below 1: given was smaller, mostly by a byte, up to 6)."""
    rng = random.Random(seed)
    obs = [repetitive(rng) for _ in range(400)]
    acts = [unhelpful(rng) for _ in obs]
    given, alone = sizes(acts, obs)
    assert given == alone
    assert {S.novelty(g, a) for g, a in zip(given, alone, strict=True)} == {1.0}
    some = zip(acts[:60], obs[:60], strict=True)
    assert [S.ConditionalNovelty().observe(a, o) for a, o in some] == [1.0] * 60
    assert sum(len(a) == 1 for a in acts) > 100
    assert sum(a < 0.3 * len(o) for a, o in zip(alone, obs, strict=True)) > 100  # they repeat
    carried = set()
    for a in acts:  # the actions left each number of bits of their last byte to share
        h = zlib.compressobj(S.ZLIB_LEVEL, zlib.DEFLATED, S.RAW_DEFLATE)
        h.compress(a), h.flush(zlib.Z_BLOCK)
        carried.add(S.held_bits(h))
    assert carried == set(range(8))


def test_a_later_turn_nothing_before_helps_scores_1_and_a_repeat_near_0(path):
    """Within a record: a second self-repetitive observation unlike the first still
    scores 1; the second `cat` of a file is a repeat (`repeat`: below 0.25)."""
    body = b"".join(b"line %d of a config file\n" % i for i in range(40))
    cn = S.ConditionalNovelty()
    assert cn.observe(b"#", b"hello hello hello hello") == 1.0
    assert cn.observe(b"1", b"----------") == 1.0
    assert cn.observe(b"cat a.conf\n", body) > 0.8
    assert cn.observe(b"ls\n", b"README\n") == 1.0
    assert cn.observe(b"cat a.conf\n", body) < 0.25
    acts = [b"#", b"1", b"cat a.conf\n", b"ls\n", b"cat a.conf\n"]
    obs = [b"hello hello hello hello", b"----------", body, b"README\n", body]
    given, alone = S.history_sizes(acts, obs, [0, 5]), S.deflated_sizes(obs)
    assert given[:2] == alone[:2] and given[3] == alone[3]
    assert S.novelty(given[4], alone[4]) < 0.15  # 13 of 120 bytes


def test_empty_observations_stay_0(path):
    assert S.deflated_sizes([b"", b"x"])[0] == 0 and S.deflated_size(b"") == 0
    assert S.ConditionalNovelty().observe(b"q", b"") == 0.0
    assert S.zlib_ratio(b"") == 0.0


def test_zlib_ratio_reads_the_framed_size():
    """`zlib_ratio`'s numerator is the size `cond_novelty` divides by: 20 `a`s are 4
    bytes framed (a literal, a copy of 19 from 1 back, the end code)."""
    a20 = b"a" * 20
    assert S.deflated_size(a20) == S.deflated_sizes([a20])[0] == 4  # 32 bits: a fixed block
    assert S.zlib_ratio(a20) == 4 / 20
    [given] = S.history_sizes([b"q\n"], [a20], [0, 1])
    assert S.deflated_size(a20) == given


def wt(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["worldtrace", *args], capture_output=True, text=True, env=env)


def record(rid: str) -> str:
    return json.dumps({
        "id": rid, "task": "b/swe", "system_str": "s", "prompt": ["q", "#"],
        "response": ["hello hello hello hello", "aaaaaaaaaaaaaaaaaaaa"], "turn_idx": 2,
    })  # fmt: skip


def test_import_process_query_gives_1_for_both_turns(tmp_path, wt_env):
    """The hunt's repro end to end: an AgentWorldBench record imported, processed and
    queried (it gave 0.9 and 0.8)."""
    f = tmp_path / "cn.jsonl"
    f.write_text(record("cn1") + "\n")
    store = str(tmp_path / "S")
    for args in (["--create", "import", str(f)], ["process"]):
        r = wt(wt_env, "--store", store, *args)
        assert r.returncode == 0, r.stderr
    sql = "select turn_index, cond_novelty, zlib_ratio from turns order by turn_index"
    r = wt(wt_env, "--store", store, "query", sql, "--format", "json")
    assert r.returncode == 0, r.stderr
    rows = json.loads(r.stdout)
    assert [(x["turn_index"], x["cond_novelty"]) for x in rows] == [(0, 1.0), (1, 1.0)]
    framed = S.deflated_sizes([b"hello hello hello hello", b"a" * 20])
    assert [x["zlib_ratio"] for x in rows] == [framed[0] / 23, framed[1] / 20]


def test_a_store_of_layout_7_asks_for_a_rebuild(tmp_path, wt_env):
    """Its `cond_novelty` and `zlib_ratio` were computed the old way: an incremental run
    over it would mix the two, so it refuses and names `--rebuild`."""
    assert LAYOUT >= 9
    f = tmp_path / "a.jsonl"
    f.write_text(record("cn1") + "\n")
    store = tmp_path / "S"
    assert wt(wt_env, "--store", str(store), "--create", "import", str(f)).returncode == 0
    assert wt(wt_env, "--store", str(store), "process").returncode == 0
    manifest = store / "processed" / "manifest.json"
    m = json.loads(manifest.read_text())
    manifest.write_text(json.dumps({**m, "layout": 7}))
    f.write_text(record("cn2") + "\n")
    assert wt(wt_env, "--store", str(store), "import", str(f)).returncode == 0
    r = wt(wt_env, "--store", str(store), "process")
    assert r.returncode != 0
    assert f"layout 7, now {LAYOUT}" in r.stderr and "--rebuild" in r.stderr
    r = wt(wt_env, "--store", str(store), "process", "--rebuild")
    assert r.returncode == 0, r.stderr
    assert json.loads(manifest.read_text())["layout"] == LAYOUT


def test_the_two_paths_agree_on_records_of_mixed_turns(monkeypatch):
    """The C loop and the Python reference, turn by turn: repetitive, random (stored
    blocks), empty, past the 32 KB window; repeats within a record."""
    rng = random.Random(5)
    pool = [b"", b"x", rng.randbytes(300), b"ab" * 30_000, *(repetitive(rng) for _ in range(40))]
    acts, obs, starts = [], [], [0]
    for _ in range(80):
        for _ in range(rng.randrange(1, 7)):
            acts.append(rng.choice([unhelpful(rng), b"cat f\n", b""]))
            obs.append(rng.choice(pool))
        starts.append(len(obs))
    compiled = S.deflated_sizes(obs), S.history_sizes(acts, obs, starts)
    monkeypatch.setattr(S, "_C", None)
    assert (S.deflated_sizes(obs), S.history_sizes(acts, obs, starts)) == compiled
    python = []
    for a, e in itertools.pairwise(starts):
        observe = S.ConditionalNovelty().observe
        python += [observe(x, o) for x, o in zip(acts[a:e], obs[a:e], strict=True)]
    alone, given = compiled
    turns = zip(given, alone, obs, strict=True)
    assert python == [S.novelty(g, n) if o else 0.0 for g, n, o in turns]
