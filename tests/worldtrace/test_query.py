"""DuckDB views and the query/stats/explain commands (the report: test_report.py)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from worldtrace.collectors.synthetic import near_duplicate_corpus
from worldtrace.pipelines.export import ExportConfig, export
from worldtrace.pipelines.process import ProcessConfig, run
from worldtrace.pipelines.tokens import default_tokenizer
from worldtrace.schemas import ShardWriter, Store
from worldtrace.schemas.views import VIEW_DOCS, connect

DOCUMENTED = {
    "trajectories": ["trajectory_id", "domain", "origin_format", "origin_id", "num_turns"],
    "turns": ["trajectory_id", "origin_id", "domain", "turn_index", "action_kind", "tool_name", "action_chars",
              "obs_chars", "ol", "nov", "jac", "r", "byte_entropy", "zlib_ratio", "cond_novelty",
              "corpus_surprisal", "category", "keep"],
    "clusters": ["trajectory_id", "origin_id", "cluster_id", "representative"],
    "rejects": ["source_path", "record", "reason"],
    "raw_trajectories": ["trajectory_id", "domain", "origin_format", "origin_id", "num_turns"],
    "raw_turns": ["trajectory_id", "domain", "turn_index", "action_chars", "obs_chars"],
    "jobs": ["job_id", "status"],
    "episodes": ["job_id", "episode_id", "status"],
    "exports": ["name", "format", "samples", "tokens", "loss_tokens"],
}  # fmt: skip


@pytest.fixture(scope="module")
def full_store(tmp_path_factory):
    store = Store.at(tmp_path_factory.mktemp("q") / "store")
    data, _ = near_duplicate_corpus(150, 10, 3, seed=4, exact_copies=3)
    with ShardWriter(store.raw / "s") as w:
        w.write(data)
    run(ProcessConfig(inputs=[str(store.raw)], output=str(store.processed), workers=1))
    export(
        ExportConfig(
            input=str(store.table("trajectories")),
            output=str(store.export / "parquet"),
            tokenizer=str(default_tokenizer()),
        )
    )
    return store


@pytest.mark.parametrize("view", list(DOCUMENTED))
def test_views_have_documented_columns_and_rows(full_store, view):
    con = connect(full_store)
    cols = [d[0] for d in con.execute(f"SELECT * FROM {view} LIMIT 0").description]
    for c in DOCUMENTED[view]:
        assert c in cols, (view, c)
        assert c in VIEW_DOCS[view], f"{view}.{c} is not documented"
    n = con.execute(f"SELECT count(*) FROM {view}").fetchone()[0]
    assert n > 0 or view in ("jobs", "episodes", "rejects")


@pytest.mark.parametrize("view", list(DOCUMENTED))
def test_views_on_an_empty_store_are_empty_not_errors(tmp_path, view):
    con = connect(Store.at(tmp_path / "nothing"))
    cols = [d[0] for d in con.execute(f"SELECT * FROM {view}").description]
    assert con.execute(f"SELECT count(*) FROM {view}").fetchone()[0] == 0
    assert set(DOCUMENTED[view]) <= set(cols)


def test_views_agree(full_store):
    con = connect(full_store)
    assert (
        con.execute("SELECT count(*) FROM turns").fetchone()
        == con.execute("SELECT sum(num_turns) FROM trajectories").fetchone()
    )
    raw = con.execute("SELECT count(*) FROM raw_trajectories").fetchone()[0]
    assert raw == 150 + 20 + 3
    assert con.execute("SELECT count(*) FROM clusters").fetchone()[0] == raw


def wt(env, *args, input=None):
    return subprocess.run(
        ["worldtrace", *args], capture_output=True, text=True, env=env, input=input
    )


def test_query_formats(full_store, wt_env, tmp_path):
    env = dict(wt_env, WORLDTRACE_STORE=str(full_store.root))
    sql = "SELECT domain, count(*) AS n FROM turns GROUP BY domain ORDER BY domain"
    r = wt(env, "query", sql, "--format", "json")
    rows = json.loads(r.stdout)
    assert [x["domain"] for x in rows] == ["mcp", "swe", "terminal", "web"]
    r = wt(env, "query", sql, "--format", "csv")
    lines = r.stdout.splitlines()  # quoted only when needed, as the DuckDB CLI does
    assert lines[0] == "domain,n" and lines[1].startswith("mcp,") and len(lines) == 5
    out = tmp_path / "q.parquet"
    r = wt(env, "query", sql, "--format", "parquet", "--output", str(out))
    import pyarrow.parquet as pq

    assert pq.read_table(out).num_rows == 4
    f = tmp_path / "q.sql"
    f.write_text("SELECT count(*) AS n FROM exports")
    assert json.loads(wt(env, "query", "--sql-file", str(f), "--format", "json").stdout) == [
        {"n": 1}
    ]
    r = wt(env, "query", sql)
    assert "terminal" in r.stdout and "┃" in r.stdout


def test_sql_error_without_traceback(full_store, wt_env):
    env = dict(wt_env, WORLDTRACE_STORE=str(full_store.root))
    r = wt(env, "query", "SELECT nope FROM turns")
    assert r.returncode == 1
    assert "Binder Error" in r.stderr and "nope" in r.stderr
    assert "Traceback" not in r.stderr


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (("SELECT 1", "--sql-file", "{q}"), "give SQL or --sql-file, not both"),
        (("--sql-file", "{latin1}"), "not UTF-8 (byte 0xe9 at offset 6)"),
        (("   ",), "give SQL, --sql-file, --shell or --views"),
        (("SELECT 1", "--max-rows", "-1"), "-1 is not in the range x>=1"),
    ],
)
def test_query_misuse_is_a_usage_error(full_store, tmp_path, args, says):
    """Found: SQL given with --sql-file ran the file's and dropped the argument; a
    Latin-1 --sql-file ended in a UnicodeDecodeError traceback; blank SQL printed `ok`;
    --max-rows -1 printed `first -1 rows shown`."""
    (tmp_path / "q.sql").write_text("SELECT count(*) AS n FROM turns")
    (tmp_path / "latin1.sql").write_bytes("-- caf\u00e9\nSELECT 1;\n".encode("latin-1"))
    files = {"q": tmp_path / "q.sql", "latin1": tmp_path / "latin1.sql"}
    r = run_cli(full_store, "query", *(a.format(**files) for a in args))
    assert r.exit_code == 2 and says in r.output, r.output
    assert r.exception is None or isinstance(r.exception, SystemExit)


def test_shell(full_store, wt_env):
    env = dict(wt_env, WORLDTRACE_STORE=str(full_store.root))
    r = wt(
        env, "query", "--shell", input="SELECT count(*) AS n\nFROM clusters;\nSELECT bad;\n.exit\n"
    )
    assert r.returncode == 1  # piped: a failed statement fails the script (found 12-04)
    assert "173" in r.stdout and "error:" in r.stderr and "error:" not in r.stdout


def test_stats_sections(full_store, wt_env):
    r = wt(dict(wt_env, WORLDTRACE_STORE=str(full_store.root)), "stats")
    assert r.returncode == 0
    for section in (
        "trajectories by domain and source",
        "category shares",
        "effective keep",
        "dedup",
        "exports",
    ):
        assert section in r.stdout
    # found: a store filled by `collect` said 'jobs: no data yet' (collect uses no queue)
    assert (
        "jobs: no queued job (`jobs submit`); what `collect` ran is in raw_trajectories" in r.stdout
    )


def test_explain(full_store, wt_env):
    con = connect(full_store)
    tid, n = con.execute(
        "SELECT trajectory_id, num_turns FROM trajectories ORDER BY trajectory_id LIMIT 1"
    ).fetchone()
    env = dict(wt_env, WORLDTRACE_STORE=str(full_store.root))
    r = wt(env, "explain", tid[:10])
    assert r.returncode == 0, r.stderr
    assert r.stdout.count("\nturn ") + r.stdout.startswith("turn ") == n
    assert "rule: " in r.stdout and "cond_novelty=" in r.stdout and "in loss=" in r.stdout
    dup = con.execute("SELECT trajectory_id FROM clusters WHERE role = 'near' LIMIT 1").fetchone()[
        0
    ]
    r = wt(env, "explain", dup)
    assert "near duplicate in cluster" in r.stdout
    assert wt(env, "explain", "zzzz").returncode == 1


def test_a_duplicate_or_filtered_record_is_explained_by_the_origin_id_its_source_gave(
    tmp_path, wt_env
):
    """An exact duplicate shares its representative's trajectory id; `explain oa:7` (the
    id the user's file gave it) said `not_found` though its clusters row names it. Found
    too: a record a filter dropped (one turn: `min_turns`) was `not_found` by its origin
    id, though its id prefix found its rejects row."""
    msgs = [
        {"role": "user", "content": "list the files"},
        {"role": "assistant", "tool_calls": [
            {"id": "c", "function": {"name": "bash", "arguments": '{"cmd": "ls"}'}}]},
        {"role": "tool", "tool_call_id": "c", "content": "a.txt b.txt"},
        {"role": "assistant", "tool_calls": [
            {"id": "d", "function": {"name": "bash", "arguments": '{"cmd": "cat a.txt"}'}}]},
        {"role": "tool", "tool_call_id": "d", "content": "hello"},
    ]  # fmt: skip
    f = tmp_path / "chats.jsonl"
    f.write_text("".join(json.dumps({"id": i, "messages": msgs}) + "\n" for i in ("oa:1", "oa:2")))
    with f.open("a") as fh:
        fh.write(json.dumps({"id": "oa:short", "messages": msgs[:3]}) + "\n")
    assert wt(wt_env, "import", str(f)).returncode == 0
    assert wt(wt_env, "process").returncode == 0
    con = connect(Store.at(wt_env["WORLDTRACE_STORE"]))
    [(dup,)] = con.execute("SELECT origin_id FROM clusters WHERE NOT representative").fetchall()
    r = wt(wt_env, "explain", dup)
    assert r.returncode == 0 and "exact duplicate in cluster" in r.stdout, r.stdout + r.stderr
    r = wt(wt_env, "explain", "oa:short")
    assert r.returncode == 0 and "dropped by filter: min_turns" in r.stdout, r.stdout + r.stderr


def test_a_filtered_copy_is_explained_by_its_own_origin_and_named_by_the_imported_file(
    tmp_path, wt_env
):
    """Found: `explain b` of a record imported from two files (the same content: one
    trajectory id), both dropped by a filter, listed the copy from a.json too, and named
    each only by our raw shard's row, not the file the user imported."""
    msgs = [
        {"role": "user", "content": "list the files"},
        {"role": "assistant", "tool_calls": [
            {"id": "c", "function": {"name": "bash", "arguments": '{"cmd": "ls"}'}}]},
        {"role": "tool", "tool_call_id": "c", "content": "a.txt b.txt"},
    ]  # one turn: `min_turns` drops it  # fmt: skip
    for name in ("a", "b"):
        (tmp_path / f"{name}.jsonl").write_text(json.dumps({"id": name, "messages": msgs}) + "\n")
    assert (
        wt(wt_env, "import", str(tmp_path / "a.jsonl"), str(tmp_path / "b.jsonl")).returncode == 0
    )
    assert wt(wt_env, "process").returncode == 0
    r = wt(wt_env, "explain", "b")
    assert r.returncode == 0, r.stderr
    (line,) = r.stdout.splitlines()
    assert "dropped by filter: min_turns" in line and f"({tmp_path / 'b.jsonl'}:line 1, " in line
    doc = json.loads(wt(wt_env, "explain", "--json", "b").stdout)
    (reject,) = doc["rejects"]
    assert (reject["origin_id"], reject["origin_path"]) == ("b", str(tmp_path / "b.jsonl"))
    r = wt(wt_env, "explain", reject["trajectory_id"][:8])  # by id: every copy
    assert len(r.stdout.splitlines()) == 2 and "a.jsonl:line 1, " in r.stdout


def test_a_raw_id_prefix_of_a_kept_trajectory_with_a_removed_turn_is_explained(full_store):
    """Found: `explain RAWPREFIX` of a trajectory kept without one of its turns said
    'dropped by turn_filter': a raw id was matched only whole, and a turn's removal read
    as the trajectory's."""
    con = connect(full_store)
    raw_id, where, why, kept = con.execute(  # the file too (hunt 1206: the row alone)
        "SELECT r.trajectory_id, source_path || ':' || record, reason, t.trajectory_id FROM rejects r "
        "JOIN trajectories t ON list_contains(map_extract(t.metadata, 'raw_trajectory_id'), r.trajectory_id) "
        "WHERE stage = 'turn_filter' ORDER BY ALL LIMIT 1"
    ).fetchone()
    assert kept != raw_id  # the id follows the content the filter changed
    r = run_cli(full_store, "explain", raw_id[:8])
    assert r.exit_code == 0, r.output
    assert r.output.startswith(kept) and "dropped" not in r.output
    assert f"removed before processing: {where} by turn_filter: {why}" in r.output
    doc = json.loads(run_cli(full_store, "explain", "--json", raw_id[:8]).output)
    assert doc["status"] == "explained" and doc["trajectory_id"] == kept
    assert doc["removed_turns"] and doc["raw_trajectory_id"] == raw_id


def run_cli(store, *args):
    """The real command line, in process (a subprocess costs a second of start-up)."""
    from click.testing import CliRunner

    from worldtrace.cli import cli

    return CliRunner().invoke(cli, ["--store", str(store.root), *args])


def test_csv_ids_feed_explain(full_store, wt_env):
    env = dict(wt_env, WORLDTRACE_STORE=str(full_store.root))
    pipe = (
        "worldtrace query 'SELECT trajectory_id FROM trajectories ORDER BY 1 LIMIT 1' "
        "--format csv | tail -n +2 | xargs worldtrace explain"
    )
    r = subprocess.run(
        ["bash", "-o", "pipefail", "-c", pipe], capture_output=True, text=True, env=env
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert "rule: " in r.stdout and "no processed trajectory" not in r.stdout


def test_nested_columns_are_json_in_csv_and_json(full_store):
    import csv
    import io

    sql = (
        "SELECT trajectory_id, source, metadata, turns[1].stats AS stats, [1, 2] AS l, "
        "'a,b' AS comma FROM trajectories ORDER BY 1 LIMIT 2"
    )
    r = run_cli(full_store, "query", sql, "--format", "csv")
    assert r.exit_code == 0, r.output
    rows = list(csv.DictReader(io.StringIO(r.stdout)))
    assert len(rows) == 2 and len(rows[0]["trajectory_id"]) == 32
    assert json.loads(rows[0]["source"])["kind"] == "synthetic"  # the generator's records
    assert "raw_trajectory_id" in json.loads(rows[0]["metadata"])  # a map is an object
    assert set(json.loads(rows[0]["stats"])) >= {"ol", "nov", "jac", "r"}
    assert json.loads(rows[0]["l"]) == [1, 2] and rows[0]["comma"] == "a,b"
    r = run_cli(full_store, "query", sql, "--format", "jsonl")
    first = json.loads(r.stdout.splitlines()[0])
    assert first["l"] == [1, 2] and "raw_trajectory_id" in first["metadata"]


def test_output_format_follows_the_extension(full_store, tmp_path):
    import pyarrow.parquet as pq

    sql = "SELECT domain, count(*) AS n FROM turns GROUP BY 1 ORDER BY 1"
    for name in ("t.csv", "t.json", "t.jsonl", "t.parquet", "t.txt"):
        r = run_cli(full_store, "query", sql, "-o", str(tmp_path / name))
        assert r.exit_code == 0, (name, r.output)
    assert (tmp_path / "t.csv").read_text().splitlines()[0] == "domain,n"
    assert json.loads((tmp_path / "t.json").read_text())[0]["domain"] == "mcp"
    assert len((tmp_path / "t.jsonl").read_text().splitlines()) == 4
    assert pq.read_table(tmp_path / "t.parquet").num_rows == 4
    assert "┃ domain" in (tmp_path / "t.txt").read_text()
    r = run_cli(full_store, "query", sql, "-o", str(tmp_path / "t.xyz"))
    assert r.exit_code == 2 and "give --format" in r.output and not (tmp_path / "t.xyz").exists()
    # a format the extension contradicts: CSV was written into c.json without a word
    r = run_cli(full_store, "query", sql, "--format", "csv", "-o", str(tmp_path / "c.json"))
    assert r.exit_code == 2 and not (tmp_path / "c.json").exists()
    assert "--format csv but c.json names json" in r.output
    r = run_cli(full_store, "query", sql, "--format", "csv", "-o", str(tmp_path / "c.out"))
    assert r.exit_code == 0 and (tmp_path / "c.out").read_text().startswith("domain,n")


def test_wide_tables_are_not_cut_off_a_terminal(full_store):
    ids = [r[0] for r in connect(full_store).execute(
        "SELECT trajectory_id FROM trajectories ORDER BY 1 LIMIT 3").fetchall()]  # fmt: skip
    r = run_cli(
        full_store,
        "query",
        "SELECT trajectory_id, system, source FROM trajectories ORDER BY 1 LIMIT 3",
    )
    assert r.exit_code == 0 and "…" not in r.stdout
    assert all(i in r.stdout for i in ids)


def test_hint_names_process_when_only_raw_data_exists(tmp_path, corpus):
    store = Store.at(tmp_path / "store")
    with ShardWriter(store.raw / "s") as w:
        w.write(corpus[:5])
    r = run_cli(store, "query", "SELECT count(*) AS n FROM turns")
    assert r.exit_code == 0 and "worldtrace process" in r.stderr and "turns" in r.stderr
    r = run_cli(store, "query", "SELECT count(*) AS n FROM raw_turns")
    assert r.exit_code == 0 and r.stderr == ""


def test_truncated_raw_shard_is_skipped_and_named(tmp_path, corpus, wt_env):
    store = Store.at(tmp_path / "store")
    with ShardWriter(store.raw / "good") as w:
        w.write(corpus[:6])
    good = w.paths[0]
    torn = store.raw / "torn" / "part-0.parquet"
    torn.parent.mkdir()
    torn.write_bytes(good.read_bytes()[: good.stat().st_size // 2])
    env = dict(wt_env, WORLDTRACE_STORE=str(store.root))
    r = wt(env, "query", "SELECT count(*) AS n FROM raw_trajectories", "--format", "csv")
    assert r.returncode == 0 and r.stdout == "n\n6\n"
    assert f"warning: skipped {torn}: unreadable Parquet" in r.stderr
    r = run_cli(store, "stats")
    assert r.exit_code == 0 and "trajectories by domain and source" in r.stdout
    assert str(torn) in r.stderr
    r = run_cli(store, "report", "--output", str(tmp_path / "r.html"))
    assert r.exit_code == 0 and str(torn) in r.stderr and (tmp_path / "r.html").stat().st_size
    from worldtrace.doctor import store_shards

    [check] = store_shards(store)
    assert not check.ok and str(torn) in check.detail and "unreadable Parquet" in check.detail


def test_output_inside_the_store_is_refused(tmp_path, corpus):
    """`-o` never writes into the store: a file under raw/ would be read as raw data.
    Symlinks are resolved: the store's, the output's and its parent directory's."""
    store = Store.at(tmp_path / "store")
    with ShardWriter(store.raw / "s") as w:
        w.write(corpus[:5])
    link = tmp_path / "link"  # the store through a symlink
    link.symlink_to(store.root)
    into = tmp_path / "out"  # a directory outside that is a symlink into the store
    into.symlink_to(store.raw)
    sql = "SELECT * FROM raw_trajectories"
    targets = [
        store.raw / "import" / "copy.parquet",
        store.root / "q.csv",
        link / "raw" / "copy.parquet",
        into / "copy.parquet",
    ]
    for via in (store, Store.at(link)):
        for out in targets:
            r = run_cli(via, "query", sql, "-o", str(out))
            assert r.exit_code == 2, (via.root, out, r.output)
            assert "will not write query output into the store" in r.stderr
            assert "give -o a path outside it" in r.stderr
            assert not out.exists()
    assert sorted(p.name for p in store.raw.iterdir()) == ["s"]
    assert not (store.root / "q.csv").exists()
    r = run_cli(store, "query", "SELECT count(*) AS n FROM raw_trajectories", "--format", "csv")
    assert r.exit_code == 0 and r.stdout == "n\n5\n"
    r = run_cli(Store.at(link), "query", sql, "-o", str(tmp_path / "copy.parquet"))
    assert r.exit_code == 0, r.output  # outside the store it is written as before
    assert (tmp_path / "copy.parquet").exists()


def test_output_goes_through_links_devices_and_dash(tmp_path, monkeypatch):
    """Found: `-o` replaced what it named: a symlink became a file (its target as it
    was), and run as root `-o /dev/stdout` replaced the system's link with a regular
    file; `-o -` wrote a file named `-`; a type Parquet has no form for (an INTERVAL)
    ended in a traceback. Now a link's target is replaced (atomically), a pipe or device
    is written into, `-` is stdout, and the type is one line."""
    import os
    import threading

    monkeypatch.chdir(tmp_path)  # where a file named `-` would be written
    store = Store.at(tmp_path / "store")
    store.root.mkdir()
    target, link = tmp_path / "target.csv", tmp_path / "link.csv"
    target.write_text("old\n")
    link.symlink_to(target)
    r = run_cli(store, "query", "SELECT 1 AS a", "-o", str(link))
    assert r.exit_code == 0, r.output
    assert link.is_symlink() and target.read_text() == "a\n1\n"
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()))
    reader.start()
    r = run_cli(store, "query", "SELECT 2 AS b", "--format", "csv", "-o", str(fifo))
    reader.join(timeout=30)
    assert r.exit_code == 0 and got == [b"b\n2\n"], r.output
    assert fifo.is_fifo()
    r = run_cli(store, "query", "SELECT 3 AS c", "--format", "json", "-o", "-")
    assert r.exit_code == 0 and r.stdout == '[{"c": 3}]\n' and not Path("-").exists()
    r = run_cli(store, "query", "SELECT INTERVAL 3 DAY AS iv", "-o", str(tmp_path / "t.parquet"))
    assert r.exit_code == 1 and "Traceback" not in r.output
    assert r.stderr.strip() == (
        "Error: cannot write Parquet: Unhandled type for Arrow to Parquet schema conversion: "
        "month_day_nano_interval"
    )
    assert not (tmp_path / "t.parquet").exists()


def test_json_output_is_strict_json_and_no_value_is_pythons_rendering(tmp_path):
    """Found: `--format json` wrote NaN and Infinity (not JSON: strict parsers refuse
    them), a BLOB as `"b'\\\\x00\\\\x01'"` and an INTERVAL as `"3 days, 0:00:00"`; a table
    showed a nested value as Python's rendering (`{'s': datetime.datetime(...)}`). Non-
    finite numbers are null at any depth, those types are DuckDB's text form (as CSV
    writes them), nested values in a table are JSON."""
    store = Store.at(tmp_path / "store")
    store.root.mkdir()
    sql = (
        "SELECT 'nan'::DOUBLE AS x, '-inf'::DOUBLE AS y, [1.5, 'inf'::DOUBLE] AS l, "
        "'\\x00\\x01'::BLOB AS b, INTERVAL 3 DAY AS iv, "
        "{'t': TIMESTAMPTZ '2026-01-01 05:02:00+00'} AS s"
    )

    def strict(text):
        return json.loads(text, parse_constant=lambda c: pytest.fail(f"{c} is not JSON"))

    for fmt in ("json", "jsonl"):
        r = run_cli(store, "query", sql, "--format", fmt)
        assert r.exit_code == 0, r.output
        row = strict(r.stdout)[0] if fmt == "json" else strict(r.stdout.splitlines()[0])
        assert row["x"] is None and row["y"] is None and row["l"] == [1.5, None]
        assert row["b"] == "\\x00\\x01" and row["iv"] == "3 days"
    r = run_cli(store, "query", sql)
    assert r.exit_code == 0 and '{"t":"2026-01-01 05:02:00+00"}' in r.stdout, r.stdout
    assert "datetime" not in r.stdout and "[1.5,null]" in r.stdout  # strict JSON, as json says


def test_an_output_under_a_file_names_the_file(tmp_path, wt_env):
    """Found: `query -o afile/q.csv` (and `report -o afile/r.html`), where afile is a
    file, said `cannot write afile/q.csv: File exists`."""
    (tmp_path / "afile").write_text("x")
    for out in (tmp_path / "afile" / "q.csv", tmp_path / "afile" / "sub" / "r.html"):
        cmd = ["query", "SELECT 1 AS a", "-o"] if out.suffix == ".csv" else ["report", "-o"]
        r = wt(wt_env, *cmd, str(out))
        said = f"cannot write {out}: {tmp_path / 'afile'} is a file, not a directory"
        assert r.returncode == 1 and said in r.stderr, r.stderr


def test_an_unreadable_job_store_is_named_not_taken_for_no_jobs(tmp_path, corpus, wt_env):
    """Found: a `jobs.db` that is no database made the `jobs` and `episodes` views empty
    and `stats` say "no queued job", without a word (`jobs list` said the truth)."""
    store = Store.at(tmp_path / "store")
    with ShardWriter(store.raw / "good") as w:
        w.write(corpus[:2])
    store.jobs_db.write_bytes(b"garbage\n" * 64)
    env = dict(wt_env, WORLDTRACE_STORE=str(store.root))
    r = wt(env, "query", "SELECT count(*) AS n FROM jobs", "--format", "csv")
    assert r.returncode == 0 and r.stdout == "n\n0\n"
    assert f"warning: skipped {store.jobs_db}: file is not a database" in r.stderr, r.stderr
    assert r.stderr.count(str(store.jobs_db)) == 1  # once, for both of its views
    r = run_cli(store, "stats")
    assert r.exit_code == 0 and str(store.jobs_db) in r.stderr
