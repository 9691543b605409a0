"""Found (user hunt 1205f) in `stats` and `explain`:

1. "filters and rejects" showed the top 20 reasons and said nothing of the rest; and as
   a validation reason was grouped by its field path (`turns[17].index`, `metadata.k03`),
   one producer's mistake made in 25 records was 25 rows, 5 of them never shown.
2. "trajectories by domain and source" left out the sources only `process --input`
   read (files outside the store), and read `processed` above `raw` without saying why.
3. `explain ID` of a record imported since the last `process` said only "no processed
   trajectory matches", where `query` hints that raw data is not processed yet.
4. `explain` printed what a record does not have: `  ID  :  web` for a candidate with no
   origin, `origin=mycollector:` for a collected one, `exact copy, not kept: - (...)`.
5. The jobs table gave a queued job, no episode finished, a success rate of 0.0.

Real parts: records written as a user's producer writes them (JSONL, Parquet shards),
the real CLI (`process`, `import`, `stats`, `explain`, `report`, `jobs submit`), the job
store's own API for a worker's claims, the real views."""

from __future__ import annotations

import json
import re

import pytest
from worldtrace.collectors.jobstore import open_job_store
from worldtrace.collectors.synthetic import SyntheticConfig, generate, near_duplicate_corpus
from worldtrace.schemas import ShardWriter, Store
from worldtrace.schemas.views import connect

from .test_query import run_cli
from .test_report_hunt_1204d import chats


def records(n: int, seed: int) -> list[dict]:
    """Synthetic trajectories as JSON records a producer writes (no id: `process` makes it)."""
    out = []
    for t in generate(SyntheticConfig(n=n, seed=seed)):
        d = json.loads(t.to_json())
        d.pop("trajectory_id")
        out.append(d)
    return out


def write_jsonl(path, recs: list[dict]):
    path.write_text("".join(json.dumps(d) + "\n" for d in recs))
    return path


def stats_json(store: Store) -> dict:
    r = run_cli(store, "stats", "--json")
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)


def processed_from(tmp_path, recs: list[dict]) -> Store:
    store = Store.at(tmp_path / "store")
    f = write_jsonl(tmp_path / "recs.jsonl", recs)
    r = run_cli(store, "--create", "process", "--input", str(f))
    assert r.exit_code == 0, r.output
    return store


def rejects_in_all(store: Store) -> int:
    return connect(store).execute("SELECT count(*) FROM rejects").fetchone()[0]


# -- 1. filters and rejects --------------------------------------------------------------
def test_one_mistake_in_many_records_is_one_row(tmp_path):
    recs = records(40, seed=3)
    for i, d in enumerate(recs[:25]):  # a map of strings: an int value is refused
        d["metadata"] = {f"k{i:02d}": i}
    for i, d in enumerate(recs[25:30]):  # a turn index out of place, at another turn each
        d["turns"][1 + i % 2]["index"] = 9
    store = processed_from(tmp_path, recs)
    assert rejects_in_all(store) == 30
    rows = stats_json(store)["sections"]["rejects"]
    assert rows == [
        {"stage": "validate", "reason": "metadata.KEY", "count": 25},
        {"stage": "validate", "reason": "turns[N].index", "count": 5},
    ]
    out = run_cli(store, "stats").stdout
    assert re.search(r"validate\s*│\s*metadata\.KEY\s*│\s*25", out), out
    assert "metadata.k0" not in out


def broken_at_many_fields(n: int) -> list[dict]:
    """`n` records, each refused at a field of its own (a list where a value goes)."""
    recs = records(n + 5, seed=3)

    def leaves(d: dict, path: str = ""):
        for k, v in d.items():
            here = f"{path}.{k}" if path else k
            if isinstance(v, dict):
                yield from leaves(v, here)
            elif k not in ("turns", "metadata"):
                yield here

    paths = list(leaves(recs[0]))[:n]
    assert len(paths) == n
    for d, path in zip(recs, paths, strict=False):
        *parents, leaf = path.split(".")
        for k in parents:
            d = d[k]
        d[leaf] = [1]
    return recs


def test_reasons_past_twenty_are_summed_and_named_never_cut_in_silence(tmp_path):
    store = processed_from(tmp_path, broken_at_many_fields(30))
    total = rejects_in_all(store)
    assert total == 30
    doc = stats_json(store)
    rows = doc["sections"]["rejects"]  # every reason: a script reads them all
    assert len(rows) == 30 and sum(r["count"] for r in rows) == total
    out = " ".join(run_cli(store, "stats").stdout.split())
    assert re.search(r"│ 10 more reasons │ 10 │", out), out
    assert (
        "filters and rejects: 20 of 30 reasons shown, the most common first; the last row "
        'sums the other 10 (count 10); in full: worldtrace query "SELECT stage, reason, '
        'count(*) AS n FROM rejects GROUP BY ALL ORDER BY n DESC"'
    ) in out
    page = tmp_path / "r.html"
    assert run_cli(store, "report", "-o", str(page)).exit_code == 0
    html = page.read_text()
    assert "<td>10 more reasons</td><td>10</td>" in html
    assert "20 of 30 reasons shown" in html


# -- 2. trajectories by domain and source ------------------------------------------------
@pytest.fixture(scope="module")
def mixed(tmp_path_factory) -> Store:
    """Synthetic raw shards (exact copies and turns an empty-action filter removes among
    them), processed; then files from outside the store processed into it: 5 web records
    of a collector raw/ has none of, and 3 new records of a source raw/ has."""
    tmp = tmp_path_factory.mktemp("mixed")
    store = Store.at(tmp / "store")
    data, _ = near_duplicate_corpus(30, 2, 3, seed=7, exact_copies=2)
    for t in [t for t in data if t.domain == "terminal"][:2]:
        t.turns[1].action.text, t.turns[1].action.name = "", None
    with ShardWriter(store.raw / "syn") as w:
        w.write(data)
    r = run_cli(store, "process")
    assert r.exit_code == 0, r.output
    outside = []
    for d in [d for d in records(60, seed=11) if d["domain"] == "web"][:5]:
        d["source"].update(kind="collector", name="mycollector", origin_format=None)
        d["environment"]["backend"] = "docker"  # a real collector's (else: generated, 1205g)
        outside.append(d)
    outside += [d for d in records(60, seed=12) if d["domain"] == "terminal"][:3]
    r = run_cli(store, "process", "--input", str(write_jsonl(tmp / "ext.jsonl", outside)))
    assert r.exit_code == 0, r.output
    return store


def test_a_source_only_process_input_read_has_its_row(mixed):
    rows = stats_json(mixed)["sections"]["sources"]
    by = {(r["domain"], r["source_kind"], r["source"]): r for r in rows}
    assert by[("web", "collector", "mycollector")] == {
        "domain": "web", "source_kind": "collector", "source": "mycollector",
        "raw": 0, "raw_turns": 0, "processed": 5, "processed_not_in_raw": 5,
    }  # fmt: skip
    out = run_cli(mixed, "stats").stdout
    assert re.search(r"web\s*│\s*collector\s*│\s*mycollector\s*│\s*0\s*│\s*0\s*│\s*5\s*│\s*5", out)


def test_processed_above_raw_says_by_how_many_and_why(mixed):
    rows = stats_json(mixed)["sections"]["sources"]
    con = connect(mixed)
    for r in rows:
        # what the raw data gave is never above it (turn-filtered and deduplicated ones
        # are matched to their raw record)
        assert r["processed"] - r["processed_not_in_raw"] <= r["raw"], r
    [term] = [r for r in rows if (r["domain"], r["source_kind"]) == ("terminal", "synthetic")]
    assert term["processed_not_in_raw"] == 3
    assert term["processed"] > term["raw"]  # the 3 from outside: said beside it
    removed = con.execute("SELECT count(*) FROM rejects WHERE stage = 'turn_filter'").fetchone()
    assert removed[0] == 2  # the turn-filtered records count as read from raw/
    assert sum(r["processed_not_in_raw"] for r in rows) == 8


def test_a_store_processed_from_outside_only_lists_its_sources_and_says_why_raw_is_0(tmp_path):
    store = processed_from(tmp_path, records(12, seed=5))
    rows = stats_json(store)["sections"]["sources"]
    assert rows and all(r["raw"] == 0 and r["processed"] == r["processed_not_in_raw"] for r in rows)
    assert sum(r["processed"] for r in rows) == 12
    out = " ".join(run_cli(store, "stats").stdout.split())
    assert "trajectories by domain and source: raw/ holds no shard" in out
    assert "processed_not_in_raw" in out


# -- 3. explain of raw data not processed yet ---------------------------------------------
def test_explain_of_an_id_only_in_raw_data_says_to_run_process(tmp_path):
    store = Store.at(tmp_path / "store")
    assert (
        run_cli(store, "--create", "import", str(chats(tmp_path / "a.jsonl", 0, 4))).exit_code == 0
    )
    assert run_cli(store, "process").exit_code == 0
    late = chats(tmp_path / "b.jsonl", 100, 1)
    late.write_text(late.read_text().replace('"id": "r100"', '"id": "late-1"'))
    assert run_cli(store, "import", str(late)).exit_code == 0

    r = run_cli(store, "explain", "late-1")
    assert r.exit_code == 1
    out = " ".join(r.stdout.split())
    assert "no processed trajectory matches 'late-1'" in out
    assert (
        "'late-1' names a raw trajectory not processed yet: run `worldtrace process` to include it"
    ) in out
    assert f"{late}:line 1 terminal" in out
    assert "leaves out 1 raw shard(s)" in r.stderr and "run `worldtrace process`" in r.stderr

    r = run_cli(store, "explain", "late-1", "--json")
    doc = json.loads(r.stdout)
    assert r.exit_code == 1 and doc["status"] == "unprocessed"
    assert [(m["origin_id"], m["origin_path"]) for m in doc["raw"]] == [("late-1", str(late))]

    r = run_cli(store, "explain", "r1")  # processed: explained, with the stale hint too
    assert r.exit_code == 0 and "leaves out 1 raw shard(s)" in r.stderr

    assert run_cli(store, "process").exit_code == 0
    r = run_cli(store, "explain", "late-1")
    assert r.exit_code == 0 and "origin=openai:late-1" in r.stdout and r.stderr == ""


# -- 4. explain prints what a record has -------------------------------------------------
def test_explain_prints_only_the_origin_a_record_has(mixed):
    con = connect(mixed)
    ids = [r[0] for r in con.execute("SELECT trajectory_id FROM trajectories").fetchall()]
    prefix = next(p for p in "0123456789abcdef" if sum(i.startswith(p) for i in ids) > 1)
    r = run_cli(mixed, "explain", prefix)
    assert r.exit_code == 1
    lines = r.stdout.splitlines()[1:]
    assert lines and all(re.fullmatch(r"  [0-9a-f]{32}  [a-z]+", x) for x in lines), lines

    [collected] = con.execute(
        "SELECT trajectory_id FROM trajectories WHERE source_name = 'mycollector' LIMIT 1"
    ).fetchone()
    head = run_cli(mixed, "explain", collected).stdout.splitlines()[0]
    assert " origin=mycollector cluster=" in head, head

    [(kept, copy)] = con.execute(
        "SELECT k.trajectory_id, d.source FROM clusters d JOIN clusters k "
        "ON k.cluster_id = d.cluster_id AND k.representative "
        "WHERE d.role = 'exact' AND NOT d.representative LIMIT 1"
    ).fetchall()
    out = run_cli(mixed, "explain", kept).stdout
    assert f"  exact copy, not kept: {copy}\n" in out, out
    assert "- (" not in out


# -- 5. jobs ------------------------------------------------------------------------------
def test_job_success_rate_is_over_finished_episodes(tmp_path):
    store = Store.at(tmp_path / "store")
    job = "name: {}\nepisodes: 4\nsandbox: {{kind: terminal}}\ntasks: [{{id: t, instruction: x, actions: ['ls\\n']}}]\n"
    for name in ("started", "waiting"):  # claims take the older job first
        f = tmp_path / f"{name}.yaml"
        f.write_text(job.format(name))
        r = run_cli(store, "--create", "jobs", "submit", str(f))
        assert r.exit_code == 0, r.output
    js = open_job_store(store.jobs_db)
    assert js.finish(js.claim("w1", 60), "succeeded", "ab" * 16, None, 0)
    assert js.finish(js.claim("w1", 60), "failed", None, "the shell exited (status 2)", 0)
    rows = stats_json(store)["sections"]["jobs"]
    assert rows == [
        {"status": "queued", "jobs": 1, "episodes": 4, "succeeded": 0, "failed": 0,
         "success_rate": None},
        {"status": "running", "jobs": 1, "episodes": 4, "succeeded": 1, "failed": 1,
         "success_rate": 0.5},
    ]  # fmt: skip
    out = run_cli(store, "stats").stdout
    assert re.search(r"queued\s*│\s*1\s*│\s*4\s*│\s*0\s*│\s*0\s*│\s*│", out), out
