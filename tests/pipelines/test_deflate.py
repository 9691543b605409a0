"""The compression statistics' deflate sizes in one call (pipelines/_deflate.c) equal the
per-turn definitions in `stats.py`: the same zlib, the same bytes counted; the size alone
framed as in a history (after a one-byte block) both ways."""

from __future__ import annotations

import itertools
import random
import zlib

import pytest
from worldtrace.pipelines import stats as S


def turns(seed: int, records: int) -> tuple[list[bytes], list[bytes], list[int]]:
    """Actions and observations of `records` records: repeats within and across records
    (a second `cat`), empty ones, random bytes, long outputs beyond the 32 KB window and
    the extension's 16 KB output chunk, lone characters."""
    rng = random.Random(seed)
    pool = [b"", b"x", b"ls -la\n", b"total 0\n", rng.randbytes(300), b"ab" * 40_000]
    pool.append(b"\n".join(b"line %d of a file" % i for i in range(3000)))
    acts, obs, starts = [], [], [0]
    for _ in range(records):
        for _ in range(rng.randrange(0, 8)):
            acts.append(rng.choice([b"", b"cat f\n", rng.randbytes(rng.randrange(1, 50))]))
            if rng.random() < 0.5:
                obs.append(rng.choice(pool))
            else:
                obs.append(bytes(rng.choice(b"abc 01\n") for _ in range(rng.randrange(0, 900))))
        starts.append(len(obs))
    return acts, obs, starts


def reference(acts: list[bytes], obs: list[bytes], starts: list[int]) -> list[float]:
    """`ConditionalNovelty.observe` turn by turn, each record a new history."""
    out = []
    for a, e in itertools.pairwise(starts):
        observe = S.ConditionalNovelty().observe
        out += [observe(x, o) for x, o in zip(acts[a:e], obs[a:e], strict=True)]
    return out


def test_the_compiled_loop_is_built_and_runs_with_pythons_zlib():
    """setup installs a compiler: without the extension the statistics would silently cost
    ~20 us a trajectory more."""
    assert S._C is not None
    assert S._C.zlib_version() == zlib.ZLIB_RUNTIME_VERSION


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_batch_sizes_equal_the_per_turn_definitions(seed):
    acts, obs, starts = turns(seed, 60)
    assert len(obs) > 150 and max(map(len, obs)) > 64 * 1024
    alone = S.deflated_sizes(obs)
    assert alone == [S.deflated_size(o) for o in obs]
    assert alone == [S.ConditionalNovelty().given(S.FRAME, o) for o in obs]
    given = S.history_sizes(acts, obs, starts)
    got = [S.novelty(g, a) if o else 0.0 for g, a, o in zip(given, alone, obs, strict=True)]
    assert got == reference(acts, obs, starts)
    assert sum(g < a for g, a in zip(given, alone, strict=True)) > 20  # the history helps


def test_the_python_path_gives_the_same_sizes(monkeypatch):
    acts, obs, starts = turns(4, 40)
    compiled = S.deflated_sizes(obs), S.history_sizes(acts, obs, starts)
    monkeypatch.setattr(S, "_C", None)
    assert (S.deflated_sizes(obs), S.history_sizes(acts, obs, starts)) == compiled


def test_bad_arguments_are_errors_not_crashes():
    with pytest.raises(TypeError, match=r"observations\[1\]"):
        S.history_sizes([b"a", b"b"], [b"x", "y"], [0, 2])
    with pytest.raises(ValueError, match="starts"):
        S.history_sizes([b"a"], [b"x"], [0, 2])
    with pytest.raises(ValueError, match="starts"):
        S.history_sizes([b"a", b"b"], [b"x", b"y"], [0, 1])
    assert S.history_sizes([], [], [0]) == [] and S.deflated_sizes([]) == []


def framed(data: bytes) -> int:
    """The size alone by its definition, spelled out: a fresh raw stream, one byte, its
    own block, then the text's blocks; their bits from where the byte's block ended to
    where they end, rounded up to whole bytes."""
    if not data:
        return 0
    z = zlib.compressobj(S.ZLIB_LEVEL, zlib.DEFLATED, S.RAW_DEFLATE)
    written = len(z.compress(S.FRAME) + z.flush(zlib.Z_BLOCK))
    start = 8 * written + S.held_bits(z)
    assert start == 18  # a fixed block: 3 header bits, an 8-bit literal, a 7-bit end code
    written += len(z.compress(data) + z.flush(zlib.Z_BLOCK))
    return (8 * written + S.held_bits(z) - start + 7) // 8


def mixed(seed: int, n: int) -> list[bytes]:
    """Texts whose blocks start anywhere in a byte: a compressible first block (>16 K
    symbols) then random bytes (stored blocks are padded to a byte, from wherever the one
    before ended), runs, lone bytes, beyond the 32 KB window."""
    rng = random.Random(seed)
    out = [b"x", b"aaa", b"ab" * 40_000, rng.randbytes(70_000)]
    while len(out) < n:
        head = b"".join(b"line %d of %s\n" % (rng.randrange(10**6), bytes(rng.choices(b"abcdefgh", k=rng.randrange(30)))) for _ in range(rng.randrange(600, 3000)))  # fmt: skip
        out.append(head + rng.randbytes(rng.randrange(1000, 30_000)) + head[: rng.randrange(5000)])
        out.append(bytes(rng.choices(b"ab -\n", k=rng.randrange(1, 3000))) * rng.randrange(1, 5))
    return out


def test_the_size_alone_is_the_observations_blocks_after_a_one_byte_block():
    """The C loop (a preset byte and the frame block's 2 bits primed, no block built), the
    Python path and the definition spelled out agree, stored blocks after a first block
    too (a dictionary from bit 0 would pad them a byte apart in 24 of 300)."""
    texts = mixed(9, 160)
    c = S.deflated_sizes(texts)
    assert c == [framed(t) for t in texts]
    assert c == [S.deflated_size(t) for t in texts]
    unframed = [len(zlib.compress(t, S.ZLIB_LEVEL, S.RAW_DEFLATE)) for t in texts]
    assert sum(a != b for a, b in zip(c, unframed, strict=True)) > 20  # it did change


def test_an_empty_text_is_0_both_ways(monkeypatch):
    assert S.deflated_sizes([b"", b"x", b""]) == [0, 3, 0]  # `x`: 18 bits
    monkeypatch.setattr(S, "_C", None)
    assert S.deflated_sizes([b"", b"x", b""]) == [0, 3, 0]
