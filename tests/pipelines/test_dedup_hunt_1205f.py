"""Found (hunt 1205f), in dedup:

1. With exact dedup off (`process --set dedup.exact=false`, with or without near dedup),
   identical records kept apart shared one cluster id, `c<trajectory id>`: `stats`
   counted 2 trajectories in 1 cluster with no duplicate, and the report drew a cluster
   of size 2, while a near cluster was named after its representative's uid
   (docs/pipeline.md: with `dedup.exact=false` a content group is one record, and
   `cluster_id` uses its uid). Pass 2 named every singleton `c<trajectory id>` whatever
   the setting; each segment now says which key its content groups were keyed by
   (`units.CONTENT_KEY`).
2. Trajectories whose observations hold no word character (3,000 symbols of a `cat`,
   a box drawing) were dropped as near-duplicates of each other, whatever those
   observations said: shingles were built from `\\w+` words only, so such a text added
   nothing and identical actions made a Jaccard of 1.0. A text without a word is now
   shingled by its runs of non-space characters (`words.dedup_tokens`); a text with a
   word keeps its words alone.

Real parts: raw shards written by ShardWriter, the real `process` (Beam runner), the
processed Parquet tables and segments, the CLI's `stats --json`, datasketch's MinHash as
the independent check.
"""

from __future__ import annotations

import itertools
import json
import random
import re
from dataclasses import replace

import numpy as np
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from datasketch import MinHash
from worldtrace.collectors.synthetic import build, near_duplicate_corpus
from worldtrace.pipelines import words as W
from worldtrace.pipelines.dedup import DedupConfig
from worldtrace.pipelines.process import ProcessConfig, run
from worldtrace.schemas import ShardWriter, Store

from worldtrace.cli import cli

from .test_incremental import tables, views
from .test_words import random_texts, real_texts


def write(store: Store, name: str, records) -> None:
    with ShardWriter(store.raw / name, row_group_rows=40) as w:
        w.write(records)


def cfg(store: Store, **kw) -> ProcessConfig:
    return ProcessConfig(inputs=[str(store.raw)], output=str(store.processed), workers=1, **kw)


def long_traj(word: str, tweak: str = "", episode: str = "ep"):
    pairs = [
        (f"cat file_{i}.txt\n", f"{word} line {i} " + " ".join(f"{word}{i}_{j}" for j in range(30)))
        for i in range(8)
    ]
    if tweak:
        pairs[3] = (pairs[3][0], pairs[3][1] + tweak)
    return build("terminal", pairs, episode=episode)


def cluster_rows(store: Store) -> list[dict]:
    return pq.read_table(store.processed / "clusters").to_pylist()


# -- 1. cluster ids without exact dedup ----------------------------------------------------


def test_identical_records_without_dedup_are_two_clusters(store):
    a = long_traj("alpha")
    write(store, "b1", [a, a, long_traj("bravo")])
    run(cfg(store, dedup=DedupConfig(exact=False, near=False)))
    rows = cluster_rows(store)
    assert {r["role"] for r in rows} == {"singleton"}
    # each its own cluster, named after its uid (`clusters.source` from the store's root)
    assert [r["cluster_id"] for r in rows] == [f"c{r['source']}" for r in rows]
    assert len({r["cluster_id"] for r in rows}) == 3
    kept = pq.read_table(store.processed / "trajectories").to_pylist()
    assert sorted(t["dedup"]["cluster_id"] for t in kept) == sorted(r["cluster_id"] for r in rows)
    r = CliRunner().invoke(cli, ["--store", str(store.root), "stats", "--json"], obj={})
    assert r.exit_code == 0, r.output
    [dedup] = json.loads(r.stdout)["sections"]["dedup"]
    assert (dedup["trajectories"], dedup["clusters"], dedup["dup_rate"]) == (3, 3, 0.0)


def test_near_dedup_without_exact_names_every_cluster_after_a_uid(store):
    """Exact copies are near-duplicates then (Jaccard 1): one cluster, named after its
    representative's uid, as the unrelated singleton is after its own."""
    a, b = long_traj("alpha"), long_traj("bravo")
    write(store, "b1", [a, a, long_traj("alpha", tweak=" 17"), b])
    run(cfg(store, dedup=DedupConfig(exact=False)))
    rows = cluster_rows(store)
    by_role = {}
    for r in rows:
        by_role.setdefault(r["role"], []).append(r)
    assert sorted(by_role) == ["near", "representative", "singleton"]
    [rep], [single] = by_role["representative"], by_role["singleton"]
    for r in (rep, single):
        assert r["cluster_id"] == f"c{r['source']}"
    assert {r["cluster_id"] for r in by_role["near"]} == {rep["cluster_id"]}


def test_exact_dedup_still_names_clusters_after_the_content_id(store):
    a = long_traj("alpha")
    write(store, "b1", [a, a, long_traj("bravo")])
    run(cfg(store))
    rows = cluster_rows(store)
    assert {r["cluster_id"] for r in rows} == {f"c{r['trajectory_id']}" for r in rows}
    assert sorted(r["role"] for r in rows) == ["exact", "representative", "singleton"]


@pytest.mark.parametrize("near", [False, True])
def test_incremental_without_exact_dedup_equals_rebuild(store, near):
    data, _ = near_duplicate_corpus(n_unique=60, n_groups=6, group_size=3, seed=3, exact_copies=4)
    first, second = data[: len(data) // 2], data[len(data) // 2 :]
    # copies of earlier records arrive later: identical singletons in two runs
    second = second + first[:5]
    setting = DedupConfig(exact=False, near=near)
    write(store, "b1", first)
    run(cfg(store, dedup=setting))
    write(store, "b2", second)
    m = run(cfg(store, dedup=setting))
    assert m["incremental"]
    incremental, incremental_views = tables(store), views(store)
    ids = [r["cluster_id"] for r in cluster_rows(store)]
    run(cfg(store, dedup=setting, rebuild=True))
    assert tables(store) == incremental
    assert views(store) == incremental_views
    if not near:  # every record its own cluster
        assert len(set(ids)) == len(ids) == len(data) + 5


# -- 2. texts without words ------------------------------------------------------------------

SYMBOLS = "!@#$%^&*()[]{}<>|/\\~`+=-.,:;?"
BOXES = "─│┌┐└┘├┤┬┴┼█▓▒░"


def wordless(alphabet: str, rng: random.Random):
    """`cat` of 3,000 characters of `alphabet` (no word character), then two commands
    whose outputs are the same in every record."""
    blob = "".join(rng.choice(alphabet) for _ in range(3000))
    pairs = [("cat data.bin\n", blob), ("ls\n", "a.bin"), ("wc -c data.bin\n", "3001 data.bin")]
    return build("terminal", pairs)


def reference_tokens(record) -> list[str]:
    """docs/pipeline.md's tokens, in Python: each text's `\\w+` words, or its `\\S+` runs
    when it has none (the lower-cased text)."""
    out = []
    for t in record.turns:
        for text in (t.action.text, t.observation.text):
            out += re.findall(r"\w+", text.lower()) or text.lower().split()
    return out


def shingles(tokens: list[str], k: int = 5) -> set[str]:
    return {"\x1f".join(tokens[i : i + k]) for i in range(max(len(tokens) - k + 1, 1))}


def datasketch(s: set[str]) -> MinHash:
    m = MinHash(num_perm=128, seed=1)
    m.update_batch([x.encode() for x in s])
    return m


def test_wordless_observations_are_not_invisible_to_dedup(store):
    rng = random.Random(5)
    records = [wordless(SYMBOLS, rng) for _ in range(3)] + [wordless(BOXES, rng) for _ in range(3)]
    assert len({r.trajectory_id for r in records}) == 6
    # the independent check: with words alone the three of each kind are one text
    words_only = [
        shingles([w for t in r.turns for x in (t.action.text, t.observation.text)
                  for w in re.findall(r"\w+", x.lower())])
        for r in records
    ]  # fmt: skip
    assert words_only[0] == words_only[1] == words_only[2] == words_only[3]
    sets = [shingles(reference_tokens(r)) for r in records]
    sketches = [datasketch(s) for s in sets]
    for i, j in itertools.combinations(range(6), 2):
        truth = len(sets[i] & sets[j]) / len(sets[i] | sets[j])
        assert truth < 0.5 and sketches[i].jaccard(sketches[j]) < 0.8, (i, j)

    write(store, "b1", records)
    m = run(cfg(store))
    acc = m["accounting"]
    assert (acc["in"], acc["kept"], acc["duplicates"]) == (6, 6, 0)
    assert {r["role"] for r in cluster_rows(store)} == {"singleton"}
    # the stored signatures estimate what datasketch estimates of the documented shingles
    segs = pq.read_table(store.processed / "_index" / "segments", columns=["trajectory_id", "_sig"])
    sig = {t: np.frombuffer(s, np.uint32) for t, s in zip(*segs.to_pydict().values(), strict=True)}
    for i, j in itertools.combinations(range(6), 2):
        a, b = sig[records[i].trajectory_id], sig[records[j].trajectory_id]
        ours = float(np.mean(a == b))
        assert abs(ours - sketches[i].jaccard(sketches[j])) < 0.2, (i, j)


def test_wordless_copies_are_still_duplicates(store):
    """The runs are content: the same wordless output again is a duplicate as before."""
    rng = random.Random(9)
    a = wordless(BOXES, rng)
    b = replace(a, source=replace(a.source, episode_id="again"))
    write(store, "b1", [a, b, wordless(BOXES, rng)])
    m = run(cfg(store, dedup=DedupConfig(exact=False)))
    assert (m["accounting"]["kept"], m["accounting"]["duplicates"]) == (2, 1)


def test_text_with_a_word_keeps_its_words_alone():
    """Ordinary text's shingles do not change: for every text with a word the tokens are
    its words (`words_of`), and a wordless text gets its `\\S+` runs, on random ASCII and
    non-ASCII texts, real ones and symbol-only ones."""
    rng = random.Random(2)
    wordless_texts = [
        "".join(rng.choice(SYMBOLS + BOXES + " \n\t\x1c") for _ in range(rng.randrange(0, 60)))
        for _ in range(300)
    ]
    texts = random_texts(1500, seed=4, other=0.1) + real_texts(200) + wordless_texts + ["", " \n"]
    rng.shuffle(texts)
    w = W.words_of(texts)
    tokens = W.dedup_tokens(texts, w)
    for i, text in enumerate(texts):
        got = [tokens.vocab[k] for k in tokens.ids[tokens.offsets[i] : tokens.offsets[i + 1]]]
        words = [w.vocab[k] for k in w.ids[w.offsets[i] : w.offsets[i + 1]]]
        assert got == (words or text.lower().split()), text
    ordinary = [t for t in texts if re.search(r"\w", t) or not t.strip()]
    w = W.words_of(ordinary)
    assert W.dedup_tokens(ordinary, w) is w  # nothing added: the same tokens, as before
