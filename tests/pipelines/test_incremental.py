"""Incremental processing equals a full rebuild; later near-duplicates join earlier clusters."""

from __future__ import annotations

import json
import shutil
from datetime import datetime, timedelta, timezone

import pyarrow.parquet as pq
import pytest
from worldtrace.collectors.synthetic import build, near_duplicate_corpus
from worldtrace.pipelines import segments
from worldtrace.pipelines.process import ProcessConfig, run
from worldtrace.schemas import ShardWriter, Store
from worldtrace.schemas.views import connect


def tables(store: Store) -> dict[str, list]:
    """Every processed table as sorted rows (file layout differs between runs)."""
    out = {}
    for name in ("trajectories", "turns", "clusters", "rejects"):
        rows = pq.read_table(store.processed / name).to_pylist()
        out[name] = sorted(json.dumps(r, sort_keys=True, default=str) for r in rows)
    return out


def views(store: Store) -> dict[str, list]:
    """The `turns` and `trajectories` views (corpus-count columns joined in) as sorted rows."""
    con = connect(store)
    out = {}
    for name in ("turns", "trajectories"):
        cur = con.execute(f"SELECT * FROM {name}")
        cols = [d[0] for d in cur.description]
        rows = [dict(zip(cols, r, strict=True)) for r in cur.fetchall()]
        out[name] = sorted(json.dumps(r, sort_keys=True, default=str) for r in rows)
    return out


def clusters(store: Store) -> dict[str, dict]:
    """The `clusters` rows by trajectory id."""
    return {r["trajectory_id"]: r for r in pq.read_table(store.processed / "clusters").to_pylist()}


def assert_a_rebuild_agrees(store: Store) -> None:
    """The tables incremental runs left equal a rebuild's on the same files."""
    incremental = tables(store)
    run(cfg(store, rebuild=True))
    assert tables(store) == incremental


def write(store: Store, name: str, records) -> None:
    with ShardWriter(store.raw / name, row_group_rows=40) as w:
        w.write(records)


def cfg(store: Store, **kw) -> ProcessConfig:
    return ProcessConfig(inputs=[str(store.raw)], output=str(store.processed), workers=1, **kw)


@pytest.mark.parametrize("policy", ["agentworld-v1", "agentworld-v1+info"])
def test_incremental_equals_rebuild(store, policy):
    data, _ = near_duplicate_corpus(n_unique=150, n_groups=10, group_size=3, seed=7, exact_copies=6)
    # a template repeated across batches: its counts (and +info's decisions) must follow
    saved = [
        build("terminal", [(f"save {i}\n", "File saved."), ("ls\n", f"a{i} b")]) for i in range(70)
    ]
    data = data + saved
    first, second = data[: len(data) // 2], data[len(data) // 2 :]
    write(store, "b1", first)
    m1 = run(cfg(store, policy=policy))
    assert not m1["incremental"]
    write(store, "b2", second)
    m2 = run(cfg(store, policy=policy))
    assert m2["incremental"] and all("/b2/" in f for f in m2["new_inputs"])
    assert m2["counters"]["read"] == len(second)  # only the new shard was read
    incremental, incremental_views = tables(store), views(store)
    m3 = run(cfg(store, policy=policy, rebuild=True))
    assert not m3["incremental"] and m3["counters"]["read"] == len(data)
    rebuilt = tables(store)
    for name in incremental:
        assert incremental[name] == rebuilt[name], name
    assert incremental_views == views(store)  # with the corpus counts joined in
    assert m2["accounting"] == m3["accounting"] and m3["accounting"]["balanced"]
    # nothing new: nothing read, nothing changed
    m4 = run(cfg(store, policy=policy))
    assert m4["counters"]["read"] == 0 and tables(store) == rebuilt


def long_traj(word: str, tweak: str = "", status: str = "success", episode: str = "ep"):
    pairs = [
        (f"cat file_{i}.txt\n", f"{word} line {i} " + " ".join(f"{word}{i}_{j}" for j in range(30)))
        for i in range(8)
    ]
    if tweak:
        pairs[3] = (pairs[3][0], pairs[3][1] + tweak)
    t = build("terminal", pairs, episode=episode)
    t.outcome.status = status
    return t.with_id()


def test_near_duplicate_in_a_later_batch_joins_the_earlier_cluster(store):
    a = long_traj("alpha", status="failure")
    a2 = long_traj("alpha", tweak=" 17", status="failure")
    others = [long_traj(w) for w in ("bravo", "charlie", "delta")]
    write(store, "b1", [a, a2, *others])
    run(cfg(store))
    before = clusters(store)
    cluster = before[a.trajectory_id]["cluster_id"]
    assert before[a2.trajectory_id]["cluster_id"] == cluster
    # later: a near-duplicate that succeeded, so it becomes the representative
    late = long_traj("alpha", tweak=" 99 bottles", status="success", episode="late")
    write(store, "b2", [late])
    m = run(cfg(store))
    after = clusters(store)
    ids = {a.trajectory_id, a2.trajectory_id, late.trajectory_id}
    assert {after[t]["cluster_id"] for t in ids} == {f"c{late.trajectory_id}"}  # its new rep
    assert after[late.trajectory_id]["role"] == "representative"
    kept = set(pq.read_table(store.processed / "trajectories")["trajectory_id"].to_pylist())
    assert late.trajectory_id in kept and not ({a.trajectory_id, a2.trajectory_id} & kept)
    assert m["accounting"]["kept"] == 4 and m["accounting"]["duplicates"] == 2
    assert m["accounting"]["balanced"]


def test_a_singleton_joined_by_a_worse_near_duplicate_rewrites_only_its_clusters(store):
    """The commonest change: an earlier singleton stays representative of the cluster a
    new near-duplicate joins. Its id and its rows stay; only its `clusters` file moves."""
    a = long_traj("alpha")
    write(store, "b1", [a, *(long_traj(w) for w in ("bravo", "charlie"))])
    run(cfg(store))
    files = {n: set((store.processed / n).glob("*.parquet")) for n in ("trajectories", "turns")}
    inodes = {n: {f.stat().st_ino for f in fs} for n, fs in files.items()}
    late = long_traj("alpha", tweak=" 99 bottles", status="failure", episode="late")
    write(store, "b2", [late])
    m = run(cfg(store))
    assert m["counters"]["segments.rewritten_clusters"] == 1
    assert "segments.rewritten" not in m["counters"]
    for name, fs in files.items():  # the earlier files are the same files (hard links)
        assert {f.stat().st_ino for f in fs if f.exists()} == inodes[name]
    rows = clusters(store)
    assert rows[a.trajectory_id]["cluster_id"] == f"c{a.trajectory_id}"  # kept its id
    assert (rows[a.trajectory_id]["role"], rows[late.trajectory_id]["role"]) == (
        "representative",
        "near",
    )
    assert_a_rebuild_agrees(store)


def test_a_later_rerun_of_equal_quality_leaves_the_earlier_representative(store):
    """Equally good near-duplicates: the first collected represents, whatever the content
    ids say, so a re-run collected later joins without unseating it (no earlier
    trajectories or turns file rewritten, the kept set stays) and a rebuild agrees."""
    a = long_traj("alpha")
    a.started_at = datetime(2026, 5, 1, tzinfo=timezone.utc)
    write(store, "b1", [a, *(long_traj(w) for w in ("bravo", "charlie"))])
    run(cfg(store))
    # a re-run whose content id sorts first: the id alone would make it representative
    late = next(
        t
        for n in range(100)
        if (t := long_traj("alpha", tweak=f" {n}", episode="late")).trajectory_id < a.trajectory_id
    )
    late.started_at = a.started_at + timedelta(days=1)
    write(store, "b2", [late])
    m = run(cfg(store))
    assert "segments.rewritten" not in m["counters"]
    assert m["counters"]["segments.rewritten_clusters"] == 1
    rows = clusters(store)
    assert (rows[a.trajectory_id]["role"], rows[late.trajectory_id]["role"]) == (
        "representative",
        "near",
    )
    assert_a_rebuild_agrees(store)
    # collected in the other order, the other one represents
    late.started_at = a.started_at - timedelta(days=1)
    shutil.rmtree(store.raw / "b2")
    write(store, "b2", [late])
    run(cfg(store, rebuild=True))
    rows = clusters(store)
    assert rows[late.trajectory_id]["role"] == "representative"


def test_an_incremental_run_reconsiders_only_the_clusters_new_records_reach(store):
    """Earlier clusters no new record reaches stay out of dedup (a run costs what is new,
    not the corpus's clusters) and keep their state; the result equals a rebuild."""
    pairs = [(long_traj(w), long_traj(w, tweak=" 7", episode="b")) for w in ("alpha", "bravo", "charlie")]  # fmt: skip
    write(store, "b1", [t for pair in pairs for t in pair] + [long_traj("delta")])
    run(cfg(store))
    members = store.processed / "_index" / "members.parquet"
    before = pq.read_table(members).to_pylist()
    assert len(before) == 6
    late = long_traj("alpha", tweak=" 99 bottles", status="failure", episode="late")
    write(store, "b2", [late])
    m = run(cfg(store))
    assert m["counters"]["dedup.earlier"] == 2  # alpha's two members, not all six
    after = {r["uid"]: r for r in pq.read_table(members).to_pylist()}
    assert len(after) == 7
    for r in before:
        if r["tid"] not in {t.trajectory_id for t in pairs[0]}:
            assert after[r["uid"]] == r  # bravo's and charlie's state is kept as it was
    rows = clusters(store)
    assert rows[late.trajectory_id]["cluster_id"] == rows[pairs[0][0].trajectory_id]["cluster_id"]
    state = pq.read_table(members).to_pylist()
    assert_a_rebuild_agrees(store)
    rebuilt = pq.read_table(members).to_pylist()
    strip = lambda rows: sorted(  # noqa: E731 - the unit (stem) differs between the runs
        json.dumps({**r, "stem": None}, sort_keys=True, default=str) for r in rows
    )
    assert strip(state) == strip(rebuilt)


def test_earlier_records_are_found_in_the_probe_files_and_in_segments_without_one(store):
    """A run leaves its new records' probe rows (ids, band keys, rank) in a probe file per
    worker bundle, so a later run reads a few files instead of every segment (each read
    costs its footer: 0.2 s of a 1% increment on 80k trajectories). Segments written
    before probe files existed are still probed one by one: a later near-duplicate
    joins either kind, and the result equals a rebuild."""
    index = store.processed / "_index"
    write(store, "b1", [long_traj("alpha"), long_traj("bravo")])
    run(cfg(store))
    probe = segments.probe_files(index)
    assert [f.suffix for f in probe] == [".arrow"] and segments.read_probe(probe).num_rows == 2
    shutil.rmtree(index / "probe")  # as a store processed before probe files existed
    write(store, "b2", [long_traj("charlie")])
    run(cfg(store))  # b1's segment probed by reading it, b2's gets a probe file
    assert len(segments.probe_files(index)) == 1
    late = [
        long_traj(w, tweak=" 99", episode="late", status="failure") for w in ("alpha", "charlie")
    ]
    write(store, "b3", late)
    m = run(cfg(store))
    assert m["counters"]["dedup.earlier"] == 2  # one found each way
    # the earlier ends' signatures came with what found them (alpha's probe row, the rows
    # read from charlie's segment) and the new ends' from this run's probe file: no
    # segment was read for one
    assert m["counters"].get("dedup.sig_reads", 0) == 0
    rows = clusters(store)
    for t in late:
        assert rows[t.trajectory_id]["role"] == "near"
    assert_a_rebuild_agrees(store)


def test_probe_rows_go_to_disk_unit_by_unit(store, tmp_path):
    """A worker's bundle (every unit it gets: 40,000 records of the 80k store) held its
    probe rows, signatures in, until the bundle ended (30 MB); they are written as each
    unit's come, into the one file that appears when the bundle ends."""
    from worldtrace.pipelines.dedup import DedupConfig
    from worldtrace.pipelines.filters import FilterConfig
    from worldtrace.pipelines.mask import AgentWorldV1
    from worldtrace.pipelines.state import ProbeIndex
    from worldtrace.pipelines.transforms import _Pass1

    write(store, "b1", [long_traj(w) for w in ("alpha", "bravo", "charlie")])
    out = tmp_path / "run"
    pass1 = _Pass1(str(out), FilterConfig(), DedupConfig(), AgentWorldV1())
    [shard] = (store.raw / "b1").glob("*.parquet")
    rows = [
        o.value for o in pass1.process((str(shard), 0, None)) if getattr(o, "tag", "") == "probe"
    ]
    probe = ProbeIndex(str(out))
    probe.start_bundle()
    probe.process(rows[0])
    folder = out / "_index" / "probe"
    [temp] = list(folder.iterdir())  # on disk already, hidden until the bundle ends
    assert temp.name.startswith(".") and temp.stat().st_size >= rows[0].nbytes
    probe.process(rows[0])
    probe.finish_bundle()
    [done] = segments.probe_files(out / "_index")
    got = segments.read_probe([done])
    assert got.num_rows == 6 and got["sig"].null_count == 0  # signatures in


def test_many_probe_files_are_merged_into_one(store, monkeypatch):
    """Probe files are Arrow IPC files (mapped: a run reads every row's ids and band keys
    but the rest of only the rows that match); the Parquet ones of a store processed by
    an earlier version are still read, and merged into an Arrow one."""
    monkeypatch.setattr(segments, "PROBE_FILES", 2)  # instead of 16 runs
    index = store.processed / "_index"
    words = ("alpha", "bravo", "charlie", "delta")
    write(store, "b0", [long_traj(words[0])])
    run(cfg(store))
    [first] = segments.probe_files(index)
    old = segments.read_probe([first]).drop_columns(["sig"])  # as the earlier version wrote
    pq.write_table(old, first.with_suffix(".parquet"))
    first.unlink()
    early = long_traj("alpha", tweak=" 98", episode="early", status="failure")
    for n, w in enumerate(words[1:], 1):
        write(store, f"b{n}", [long_traj(w), *([early] if n == 1 else [])])
        m = run(cfg(store))
        if n == 1:  # found through the Parquet file; this run's file is Arrow
            assert sorted(f.suffix for f in segments.probe_files(index)) == [".arrow", ".parquet"]
            assert clusters(store)[early.trajectory_id]["role"] == "near"
            # the old file has no signatures: alpha's was read from its segment
            assert m["counters"]["dedup.sig_reads"] == 1
    files = segments.probe_files(index)
    assert [f.suffix for f in files] == [".arrow"] * 2  # merged when the third came
    assert segments.read_probe(files).num_rows == len(words) + 1
    late = long_traj("alpha", tweak=" 99", episode="late", status="failure")
    write(store, "late", [late])
    run(cfg(store))
    assert clusters(store)[late.trajectory_id]["role"] == "near"
    assert_a_rebuild_agrees(store)


def test_changed_settings_need_a_rebuild(store):
    write(store, "b1", [long_traj("alpha"), long_traj("bravo")])
    run(cfg(store))
    write(store, "b2", [long_traj("charlie")])
    with pytest.raises(ValueError, match="--rebuild"):
        run(cfg(store, seed=3))


def test_a_signature_in_no_probe_file_is_one_clear_error(store, tmp_path):
    """A candidate end whose signature no probe file holds (a store missing its probe
    files) fails the run naming the record and where it looked: not Arrow's type error of
    matching text against the empty probe of an index that has none."""
    write(store, "b1", [long_traj("alpha")])
    run(cfg(store))
    here, empty = store.processed / "_index", tmp_path / "empty"
    source = segments.ProbeSigs([str(empty), str(here)], [str(here / "segments")], "tid")
    [tid] = segments.read_probe(segments.probe_files(here), ["tid"])["tid"].to_pylist()
    assert len(source([tid])[tid]) == 512  # found past the index without probe files
    with pytest.raises(ValueError, match=r"signature of nope \(1 in all\): in no probe file"):
        source(["nope"])


def test_runs_no_record_reaches_write_the_state_as_it_stands(store):
    """The state's combine has no default (Beam computes one in a stage every run paid):
    a run whose new records are all rejected writes its state after the run instead.
    A first such run leaves an empty state a later run goes on from; a later one keeps
    the earlier clusters and counts as they were, and a near-duplicate after it still
    joins its earlier cluster."""
    index = store.processed / segments.INDEX

    def state() -> tuple:
        return tuple(
            pq.read_table(index / f).sort_by(key).to_pylist()
            for f, key in ((segments.MEMBERS_FILE, "uid"), (segments.TEMPLATES_FILE, "key"))
        )

    def rejected_only(name: str) -> None:
        bad = store.raw / name / "broken.jsonl"
        bad.parent.mkdir(parents=True)
        bad.write_text("{nope\n" + json.dumps({"domain": "chess", "turns": []}) + "\n")

    rejected_only("b0")
    m = run(cfg(store))
    assert m["this_run"]["rejected"] == 2 and m["accounting"]["balanced"]
    assert state() == ([], [])
    a, a2 = long_traj("alpha", status="failure"), long_traj("alpha", tweak=" 17")
    write(store, "b1", [a, a2, long_traj("bravo")])
    assert run(cfg(store))["incremental"]
    before, cluster = state(), clusters(store)[a.trajectory_id]["cluster_id"]
    assert len(before[0]) == 2 and before[1]  # a's cluster of two, template counts
    rejected_only("b2")
    m = run(cfg(store))
    assert m["incremental"] and m["this_run"] == {"in": 2, "filtered": 0, "rejected": 2}
    assert state() == before
    late = long_traj("alpha", tweak=" 99 bottles", status="failure", episode="late")
    write(store, "b3", [late])
    run(cfg(store))
    assert clusters(store)[late.trajectory_id]["cluster_id"] == cluster
    assert_a_rebuild_agrees(store)


def test_a_moved_store_reads_nothing_again_and_a_gone_input_is_said(store, tmp_path):
    """The index kept absolute paths: after `cp -a` of a store every raw shard looked new
    and was deduplicated against itself (in 14, duplicates 8 for 7 records). A raw shard
    deleted after processing left its records in the processed data without a word."""
    corpus, _ = near_duplicate_corpus(n_unique=20, n_groups=3, group_size=2, seed=5)
    write(store, "a", corpus[:20])
    write(store, "b", corpus[20:])
    first = run(cfg(store))
    moved = Store.at(tmp_path / "elsewhere")
    shutil.copytree(store.root, moved.root)  # copy2: sizes and mtimes kept, as `cp -a`
    from worldtrace.freshness import stale_processed

    # found: after the copy every reading command said the processed data left out
    # every raw shard, and told to run `process`, which then read nothing
    assert stale_processed(moved) is None
    again = run(cfg(moved))
    assert again["new_inputs"] == [] and again["this_run"]["in"] == 0
    assert again["accounting"] == first["accounting"]
    assert run(cfg(moved))["new_inputs"] == []  # the moved paths were kept
    # found: the same store named through `..` read its shards again as new files
    (tmp_path / "junk").mkdir()
    dotted = Store.at(tmp_path / "junk" / ".." / "elsewhere")
    assert stale_processed(dotted) is None
    assert run(cfg(dotted))["new_inputs"] == []
    for shard in (moved.raw / "b").glob("*.parquet"):
        shard.unlink()
    only_a = ProcessConfig(inputs=[str(moved.raw / "a")], output=str(moved.processed), workers=1)
    gone = run(only_a)["gone_inputs"]
    assert gone["count"] == 1 and gone["first"][0].startswith(str(moved.raw / "b"))


def test_a_copy_with_new_mtimes_is_the_same_data_and_a_real_change_is_not(store, tmp_path):
    """Found: after `cp -r` of a store (new mtimes, same bytes) the hint said the
    processed data left out its raw shards and to run `process`, which then refused
    every shard as `changed since it was processed; run process --rebuild`. A file whose
    mtime alone moved is the file processed (its content hash is the one recorded): no
    new input, the hint gone; one whose bytes changed is still refused."""
    import os
    import time

    from worldtrace.freshness import stale_processed

    corpus, _ = near_duplicate_corpus(n_unique=12, n_groups=2, group_size=2, seed=9)
    write(store, "a", corpus)
    first = run(cfg(store))
    copy = Store.at(tmp_path / "copy")
    shutil.copytree(store.root, copy.root, copy_function=shutil.copyfile)  # as `cp -r`
    now = time.time_ns()  # the copy's time: after the run
    for f in (copy.raw / "a").glob("*.parquet"):
        os.utime(f, ns=(now, now))
    assert stale_processed(copy) is not None  # newer than the run: process is named
    again = run(cfg(copy))
    assert again["new_inputs"] == [] and again["accounting"] == first["accounting"]
    assert stale_processed(copy) is None
    assert run(cfg(copy))["new_inputs"] == []  # the new times were kept: no hash again
    [shard] = (copy.raw / "a").glob("*.parquet")
    data = bytearray(shard.read_bytes())
    data[-20] ^= 0xFF  # the same size, other bytes
    shard.write_bytes(bytes(data))
    with pytest.raises(ValueError, match="changed since it was processed"):
        run(cfg(copy))


def test_a_store_processed_elsewhere_exports_the_same_bytes(store, tmp_path):
    """Found: units were named by a hash of the raw file's absolute path, and export reads
    them in name order: the same raw files processed in a copy of the store at another
    path exported the same samples in another order (another sha256)."""
    from worldtrace.pipelines.export import ExportConfig, export
    from worldtrace.pipelines.tokens import default_tokenizer

    corpus, _ = near_duplicate_corpus(n_unique=40, n_groups=3, group_size=2, seed=3)
    for i in range(4):  # several files, several row groups: several units to order
        write(store, f"part{i}", corpus[i::4])
    other = Store.at(tmp_path / "elsewhere" / "deeper" / "store")
    shutil.copytree(store.root, other.root)

    def exported(s: Store) -> dict[str, bytes]:
        run(cfg(s, rebuild=True))
        out = tmp_path / f"export-{s.root.parent.name}"
        cfg_e = ExportConfig(input=str(s.table("trajectories")), output=str(out),
                             tokenizer=str(default_tokenizer()))  # fmt: skip
        export(cfg_e)
        return {f.name: f.read_bytes() for f in sorted(out.glob("*.parquet"))}

    here, there = exported(store), exported(other)
    assert here and here == there
    names = {p.name for p in (store.processed / "trajectories").glob("*.parquet")}
    assert len(names) > 1
    assert names == {p.name for p in (other.processed / "trajectories").glob("*.parquet")}
