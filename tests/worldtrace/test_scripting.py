"""The command line as scripts and people meet it (issue 17), and the perturbations view
with the redaction counts (issues 18 and 11).

JSON documents, what `jobs cancel` says, hints instead of silent empty answers, one-line
errors, ids that stay whole off and on a terminal (a real pty), import progress, and an
example in every `--help`. Commands run in process (CliRunner) unless the test is about
the terminal or the pipe, which need a real subprocess.
"""

from __future__ import annotations

import fcntl
import json
import os
import pty
import re
import struct
import subprocess
import termios
from pathlib import Path

import click
import pytest
from click.testing import CliRunner
from worldtrace.collectors.jobstore import open_job_store
from worldtrace.pipelines.process import ProcessConfig, run
from worldtrace.schemas import (
    Action,
    Observation,
    ShardWriter,
    Source,
    Store,
    System,
    Trajectory,
    Turn,
    read_records,
)
from worldtrace.schemas.redact import redact_trajectory
from worldtrace.schemas.store import row_count
from worldtrace.schemas.views import PERTURBATION_COLUMNS, VIEW_DOCS, connect

from worldtrace.cli import cli

SECRETS = "GITHUB_TOKEN=ghp_a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8 AWS=AKIAIOSFODNN7EXAMPLE"


def invoke(store: Store, *args: str):
    return CliRunner().invoke(cli, ["--store", str(store.root), *args], obj={})


def _mcp(i: int, perturbations: list[dict | None], secrets: bool = False) -> Trajectory:
    tools = [{"name": "read_file", "input_schema": {"type": "object"}}]
    turns = []
    for k, p in enumerate(perturbations):
        path = f"/srv/data/report-{i}-{k}.txt"
        text = f"contents of {path}: quarterly figures {i * 37 + k} rising steadily"
        if secrets and k == 1:
            text += " " + SECRETS
        turns.append(
            Turn(
                k,
                Action("tool_call", f"read_file({path})", "read_file", json.dumps({"path": path})),
                Observation(text, is_error=p is not None and p["kind"] == "error"),
                perturbation=None if p is None else json.dumps(p),
            )
        )
    t = Trajectory(
        domain="mcp",
        turns=turns,
        system=System(task_description=f"read reports {i}", action_space=json.dumps(tools)),
        source=Source(kind="collector", name="mcp", job_id="j", episode_id=f"e{i}", attempt=1),
    ).with_id()
    return redact_trajectory(t)  # as the recorder does: real placeholders, a real count


def _terminal(i: int, n: int, conditions: list[dict] | None, metadata=None, secrets=False):
    turns = [
        Turn(
            k,
            Action("keystrokes", f"echo step-{i}-{k} > /root/f{k}\n"),
            Observation(
                f"bash: /root/f{k}: No space left on device (run {i}, step {k})"
                + (f" {SECRETS}" if secrets and k == 0 else "")
            ),
        )
        for k in range(n)
    ]
    t = Trajectory(
        domain="terminal",
        turns=turns,
        system=System(task_description=f"write files {i}", initial_state="Condition: disk full"),
        conditions=None if conditions is None else json.dumps(conditions),
        metadata=metadata or {},
    ).with_id()
    return redact_trajectory(t)


RECORDS = [
    # MCP fault proxy flags: two timeouts (one with latency) and an error, two secrets
    _mcp(1, [{"kind": "timeout"}, None, {"kind": "timeout", "latency_ms": 300}, {"kind": "error"}],
         secrets=True),
    _mcp(2, [None, {"kind": "truncate", "kept_chars": 10, "total_chars": 40}, None]),
    # conditions of episodes, in the record's field and (older writers) in metadata only
    _terminal(3, 3, [{"kind": "disk_full", "size": "16m"}, {"kind": "memory_low", "limit": "64m"}]),
    _terminal(4, 2, None, {"conditions": json.dumps([{"kind": "clock", "offset": "-3y"}])}),
    # one turn: dropped by the min_turns filter, so it is raw only
    _terminal(5, 1, [{"kind": "disk_full", "size": "16m"}], secrets=True),
    _terminal(6, 2, None),
]  # fmt: skip


@pytest.fixture(scope="module")
def pstore(tmp_path_factory) -> Store:
    """Raw shards of the records above, processed by the real pipeline."""
    store = Store.at(tmp_path_factory.mktemp("p") / "store")
    with ShardWriter(store.raw / "collect") as w:
        w.write(RECORDS)
    run(ProcessConfig(inputs=[str(store.raw)], output=str(store.processed), workers=1))
    return store


# -- the perturbations view and its stats (issues 18 and 11) -----------------------------
def test_raw_perturbations_one_row_per_trajectory_source_kind(pstore):
    con = connect(pstore)
    cols = [d[0] for d in con.execute("SELECT * FROM raw_perturbations LIMIT 0").description]
    assert tuple(cols) == PERTURBATION_COLUMNS
    assert ", ".join(PERTURBATION_COLUMNS) in VIEW_DOCS["raw_perturbations"]
    rows = con.execute(
        "SELECT trajectory_id, domain, source, kind, turns, turn_indexes, details "
        "FROM raw_perturbations ORDER BY ALL"
    ).fetchall()
    by_id = {t.trajectory_id: i for i, t in enumerate(RECORDS)}
    got = sorted((by_id[r[0]], *r[1:6]) for r in rows)
    assert got == sorted([
        (0, "mcp", "perturbation", "error", 1, [3]),
        (0, "mcp", "perturbation", "timeout", 2, [0, 2]),
        (0, "mcp", "perturbation", "latency", 1, [2]),  # the timeout delayed (12-06q)
        (1, "mcp", "perturbation", "truncate", 1, [1]),
        (2, "terminal", "condition", "disk_full", 3, None),
        (2, "terminal", "condition", "memory_low", 3, None),
        (3, "terminal", "condition", "clock", 2, None),
        (4, "terminal", "condition", "disk_full", 1, None),
    ])  # fmt: skip
    timeout = next(r for r in rows if r[3] == "timeout")
    assert [json.loads(d) for d in timeout[6]] == [
        {"kind": "timeout"},
        {"kind": "timeout", "latency_ms": 300},
    ]


def test_stats_counts_perturbations_conditions_and_redactions(pstore):
    r = invoke(pstore, "stats", "--json")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    kept = list(read_records(pstore.table("trajectories")))
    # processed side, counted here from the processed records themselves
    processed: dict[tuple[str, str, str], list[int]] = {}
    for t in kept:
        kinds: dict[str, int] = {}
        for turn in t.turns:
            if turn.perturbation:
                p = json.loads(turn.perturbation)
                for k in {p["kind"], *(["latency"] if "latency_ms" in p else [])}:
                    kinds[k] = kinds.get(k, 0) + 1
        for k, n in kinds.items():
            processed.setdefault(("perturbation", k, t.domain), []).append(n)
        conds = t.conditions or t.metadata.get("conditions")
        for c in json.loads(conds) if conds else []:
            processed.setdefault(("condition", c["kind"], t.domain), []).append(len(t.turns))
    rows = {(x["source"], x["kind"], x["domain"]): x for x in doc["sections"]["perturbations"]}
    raw = {
        ("perturbation", "error", "mcp"): (1, 1),
        ("perturbation", "timeout", "mcp"): (1, 2),
        ("perturbation", "latency", "mcp"): (1, 1),
        ("perturbation", "truncate", "mcp"): (1, 1),
        ("condition", "clock", "terminal"): (1, 2),
        ("condition", "disk_full", "terminal"): (2, 4),
        ("condition", "memory_low", "terminal"): (1, 3),
    }
    assert set(rows) == set(raw)
    for key, (n, turns) in raw.items():
        assert (rows[key]["raw_trajectories"], rows[key]["raw_turns"]) == (n, turns), key
        mine = processed.get(key, [])
        assert rows[key]["processed_trajectories"] == len(mine), key
        assert rows[key]["processed_turns"] == sum(mine), key
    # the one-turn trajectory under disk_full was filtered: raw 2, processed 1
    assert rows["condition", "disk_full", "terminal"]["processed_trajectories"] == 1

    red = {x["domain"]: x for x in doc["sections"]["redactions"]}
    assert RECORDS[0].redactions == 2 and RECORDS[4].redactions == 2
    assert red["mcp"]["raw_with_redactions"] == 1 and red["mcp"]["raw_placeholders"] == 2
    assert red["terminal"]["raw_trajectories"] == 4
    assert red["terminal"]["raw_with_redactions"] == 1 and red["terminal"]["raw_placeholders"] == 2
    assert red["terminal"]["processed_placeholders"] == sum(
        t.redactions or 0 for t in kept if t.domain == "terminal"
    )

    text = invoke(pstore, "stats").stdout
    assert "perturbations and conditions" in text and "memory_low" in text
    assert "redactions (secrets replaced by placeholders)" in text


def test_perturbation_stats_say_none_when_nothing_was_perturbed(store, corpus):
    with ShardWriter(store.raw / "s") as w:
        w.write(corpus[:3])
    out = invoke(store, "stats").stdout
    assert "perturbations and conditions: none recorded" in out
    assert "redactions (secrets replaced by placeholders): none" in out


def test_a_perturbation_that_is_not_json_does_not_break_the_view(store):
    t = _mcp(9, [{"kind": "timeout"}, None])
    t.turns[0].perturbation = "{not json"
    with ShardWriter(store.raw / "s") as w:
        w.write(t)
    rows = connect(store).execute("SELECT kind, turns FROM raw_perturbations").fetchall()
    assert rows == [("invalid", 1)]


# -- --json ---------------------------------------------------------------------------------
def test_stats_json_is_one_document_with_every_section(pstore):
    from worldtrace.summary import STATS_SECTIONS

    r = invoke(pstore, "stats", "--json")
    doc = json.loads(r.stdout)  # the whole stdout is one document
    assert list(doc) == ["store", "notes", "sections"]
    assert list(doc["sections"]) == [s.key for s in STATS_SECTIONS]
    assert doc["store"] == str(pstore.root) and doc["notes"] == []
    assert "\x1b" not in r.stdout and "┃" not in r.stdout


def test_explain_json_has_whole_ids_texts_and_perturbations(pstore):
    con = connect(pstore)
    tid = con.execute("SELECT trajectory_id FROM perturbations WHERE kind = 'timeout'").fetchone()[
        0
    ]
    r = invoke(pstore, "explain", tid[:8], "--json")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["status"] == "explained" and doc["trajectory_id"] == tid
    assert doc["turns"][0]["perturbation"] == {"kind": "timeout"}
    assert all(len(t["observation"]) > 40 for t in doc["turns"])  # whole, not excerpts
    assert set(doc["turns"][0]) >= {"index", "category", "keep", "in_loss", "rule", "stats"}
    text = invoke(pstore, "explain", tid).stdout
    assert 'perturbation: {"kind": "timeout"}' in text

    cond = con.execute(
        "SELECT trajectory_id FROM perturbations WHERE kind = 'memory_low'"
    ).fetchone()
    assert "conditions=disk_full,memory_low" in invoke(pstore, "explain", cond[0]).stdout

    r = invoke(pstore, "explain", "zzzz", "--json")
    assert r.exit_code == 1 and json.loads(r.stdout) == {"query": "zzzz", "status": "not_found"}
    # a blank id is a usage error on the command line (review 1203: it listed every
    # trajectory); the library still takes "" as the prefix of every id, which lists
    # every candidate here
    assert invoke(pstore, "explain", "", "--json").exit_code == 2
    import io

    from rich.console import Console

    from worldtrace.summary import explanation, print_explanation

    doc = json.loads(json.dumps(explanation(con, ""), default=str))
    assert doc["status"] == "ambiguous" and all(
        len(m["trajectory_id"]) == 32 for m in doc["matches"]
    )
    # found: a collected candidate showed ':' where an imported one shows its file and row
    collected = [m for m in doc["matches"] if m["job_id"]]
    assert collected and all(m["origin_path"] is None for m in collected)
    buf = io.StringIO()
    assert not print_explanation(explanation(con, ""), Console(file=buf, width=1 << 20))
    listed = buf.getvalue()
    for m in collected:
        assert f"{m['trajectory_id']}  job {m['job_id']} episode {m['episode_id']}" in listed


def test_doctor_json(wt_env):
    r = CliRunner().invoke(cli, ["doctor", "--json"], obj={})
    assert r.exit_code == 0
    doc = json.loads(r.stdout)
    assert list(doc) == ["checks", "available", "total", "problems"]
    assert doc["total"] == len(doc["checks"]) and doc["available"] <= doc["total"]
    assert all(list(c) == ["name", "ok", "detail", "fix", "problem"] for c in doc["checks"])
    assert doc["problems"] == sum(c["problem"] for c in doc["checks"]) == 0
    assert {"docker engine", "tokenizer"} <= {c["name"] for c in doc["checks"]}


JOB = "name: {name}\nsandbox: {{kind: terminal}}\ntasks: [{{id: t, instruction: x, actions: ['ls\\n']}}]\n"


def _submit(store: Store, tmp_path: Path, name: str) -> str:
    f = tmp_path / f"{name}.yaml"
    f.write_text(JOB.format(name=name))
    r = invoke(store, "jobs", "submit", str(f), "--create")
    assert r.exit_code == 0, r.output
    return r.stdout.strip()


def _finish(store: Store, tid: str = "f" * 32) -> None:
    """What a worker does when its episode ends (the job store's real API)."""
    js = open_job_store(store.jobs_db)
    claim = js.claim("w1", 60)
    assert js.finish(claim, "succeeded", tid, None, 0)


def test_jobs_list_and_show_json(store, tmp_path):
    done = _submit(store, tmp_path, "done")
    _finish(store, "ab" * 16)
    queued = _submit(store, tmp_path, "waiting")
    doc = json.loads(invoke(store, "jobs", "list", "--json").stdout)
    assert list(doc) == ["jobs", "schedules", "workers"]
    assert {j["job_id"]: j["status"] for j in doc["jobs"]} == {done: "succeeded", queued: "queued"}
    assert set(doc["jobs"][0]) >= {"job_id", "name", "status", "episodes", "succeeded", "failed"}

    doc = json.loads(invoke(store, "jobs", "show", done[:6], "--json").stdout)
    assert doc["job_id"] == done and doc["episodes"] == 1 and doc["spec"]["name"] == "done"
    [attempt] = doc["attempts"]
    assert attempt["trajectory_id"] == "ab" * 16 and attempt["status"] == "succeeded"
    r = invoke(store, "jobs", "list", "--json", "--watch")
    assert r.exit_code == 2


def test_jobs_list_shows_live_workers_only(store):
    """A worker killed with -9 (or crashed) never deregisters; its heartbeat kept it
    listed as live for the lease's 120 s though its pid was gone from this host."""
    import socket

    from worldtrace.collectors.owners import process_start

    js = open_job_store(store.jobs_db)
    dead = subprocess.Popen(["true"])
    dead.wait()  # a pid of this host that no longer runs
    js.register_worker("gone-w", socket.gethostname(), dead.pid, 1)
    js.register_worker("live-w", socket.gethostname(), os.getpid(), process_start(os.getpid()))
    js.register_worker("far-w", "another-host", dead.pid, 1)  # not ours to check
    doc = json.loads(invoke(store, "jobs", "list", "--json").stdout)
    assert sorted(w["worker"] for w in doc["workers"]) == ["far-w", "live-w"]


def test_jobs_list_shows_a_schedules_overlap(store, tmp_path):
    """Found: `jobs list` (table and JSON) left out whether a schedule's runs may
    overlap (`overlap: queue`) or a due run is skipped while one runs (`skip`)."""
    f = tmp_path / "s.yaml"
    f.write_text(JOB.format(name="s") + "schedule: {every: 1h, overlap: queue}\n")
    assert invoke(store, "jobs", "submit", str(f), "--create").exit_code == 0
    [s] = json.loads(invoke(store, "jobs", "list", "--json").stdout)["schedules"]
    assert (s["every"], s["overlap"]) == ("1h", "queue")
    table = invoke(store, "jobs", "list").stdout
    assert "overlap" in table and "queue" in table


# -- jobs cancel says what happened ---------------------------------------------------------
def test_cancel_reports_only_a_cancel_that_happened(store, tmp_path):
    done = _submit(store, tmp_path, "done")
    _finish(store)
    r = invoke(store, "jobs", "cancel", done)
    assert r.exit_code == 1
    assert r.stderr.strip() == f"{done}: already finished (succeeded); nothing to cancel"
    assert "cancelled" not in r.stdout
    assert json.loads(invoke(store, "jobs", "show", done, "--json").stdout)["status"] == "succeeded"

    queued = _submit(store, tmp_path, "waiting")
    r = invoke(store, "jobs", "cancel", queued[:9])  # a prefix names it
    assert r.exit_code == 0
    assert r.stdout.strip() == f"{queued}: cancelled (queued before); 1 queued episode(s) dropped"
    [attempt] = json.loads(invoke(store, "jobs", "show", queued, "--json").stdout)["attempts"]
    assert attempt["status"] == "cancelled"  # with its reason, as every ended attempt
    assert attempt["error"] == "cancelled by `worldtrace jobs cancel` before it ran"
    r = invoke(store, "jobs", "cancel", queued)
    assert r.exit_code == 0 and r.stdout.strip() == f"{queued}: already cancelled; nothing to do"
    r = invoke(store, "jobs", "cancel", "nope")
    assert r.exit_code == 1 and "no job matches 'nope'" in r.stderr
    # found: a prefix naming several jobs said 'no single job matches', naming none
    other = _submit(store, tmp_path, "waiting")
    r = invoke(store, "jobs", "show", "waiting")
    both = ", ".join(sorted((queued, other)))
    assert r.exit_code == 1 and f"'waiting' matches 2 jobs: {both}; give more" in r.stderr
    # a prefix naming one of them: `queued[:9]` matched both one time in 16 (ids are
    # name-8hex), so the prefix is all but the last digit
    r = invoke(store, "jobs", "retry", queued[:-1])
    assert r.exit_code == 0 and r.stdout.strip() == f"{queued}: 1 episode(s) queued again"


# -- silent states ----------------------------------------------------------------------------
def test_reading_commands_name_the_step_to_run(store, corpus, tmp_path):
    for args in (["stats"], ["explain", "abc"]):
        r = invoke(store, *args)
        assert "worldtrace import PATH" in r.stderr and "worldtrace collect" in r.stderr, args
    with ShardWriter(store.raw / "s") as w:
        w.write(corpus[:4])
    for args in (
        ["stats"],
        ["stats", "--json"],
        ["explain", corpus[0].trajectory_id],
        ["query", "SELECT count(*) FROM turns"],
        ["report", "-o", str(tmp_path / "r.html")],
    ):
        r = invoke(store, *args)
        assert "no processed data yet" in r.stderr, args
        assert "run `worldtrace process`" in r.stderr, args
    doc = json.loads(invoke(store, "stats", "--json").stdout)
    assert "run `worldtrace process`" in doc["notes"][0]


def test_processed_data_older_than_raw_data_is_said(store, corpus):
    from worldtrace.freshness import stale_processed

    with ShardWriter(store.raw / "a") as w:
        w.write(corpus[:6])
    run(ProcessConfig(inputs=[str(store.raw)], output=str(store.processed), workers=1))
    assert stale_processed(store) is None
    assert invoke(store, "stats").stderr == ""
    with ShardWriter(store.raw / "b") as w:  # a new collect after processing
        w.write(corpus[6:8])
    [new] = w.paths
    msg = stale_processed(store)
    assert msg and "leaves out 1 raw shard(s)" in msg and str(new) in msg
    assert "run `worldtrace process`" in msg
    assert msg in invoke(store, "stats").stderr
    assert msg in invoke(store, "query", "SELECT count(*) FROM trajectories").stderr
    assert invoke(store, "query", "SELECT count(*) FROM raw_trajectories").stderr == ""
    # moved in with an old mtime (mv, cp -p): not among the run's inputs, still said
    old = store.raw / "moved" / "part-0.parquet"
    old.parent.mkdir()
    old.write_bytes(new.read_bytes())
    os.utime(old, ns=(0, 0))
    new.unlink()
    msg = stale_processed(store)
    assert msg and str(old) in msg


def test_an_unreadable_raw_shard_is_named_not_sent_to_process(store, corpus):
    """Found: a raw shard cut short after the last run got `run worldtrace process to
    include them`, and process only rejects it; doctor names it, so does the hint now."""
    from worldtrace.freshness import stale_processed

    with ShardWriter(store.raw / "a") as w:
        w.write(corpus[:6])
    [good] = w.paths
    run(ProcessConfig(inputs=[str(store.raw)], output=str(store.processed), workers=1))
    torn = store.raw / "copied" / "part-0.parquet"  # a copy cut short
    torn.parent.mkdir()
    torn.write_bytes(good.read_bytes()[: good.stat().st_size // 2])
    [hint] = [x for x in invoke(store, "stats").stderr.splitlines() if x.startswith("hint:")]
    assert hint.startswith(f"hint: raw shard {torn} is unreadable: unreadable Parquet ("), hint
    assert (
        "`worldtrace process` cannot include it" in hint and "run `worldtrace process`" not in hint
    )
    with ShardWriter(store.raw / "b") as w:  # and a readable new one: both are said
        w.write(corpus[6:8])
    msg = stale_processed(store)
    assert msg.startswith("the processed data leaves out 1 raw shard(s)") and str(w.paths[0]) in msg
    assert f"raw shard {torn} is unreadable" in msg


def test_a_changed_raw_shard_is_sent_to_rebuild_not_to_process(store, corpus):
    """Found: a raw shard rewritten after it was processed got `run worldtrace process`,
    which refuses it (`changed since it was processed; run --rebuild`). A shard whose
    mtime alone moved is the same file to `process`, which records its new time and
    processes nothing again: said so (hunt 1205c: it was named left out)."""
    from worldtrace.freshness import stale_processed

    with ShardWriter(store.raw / "a") as w:
        w.write(corpus[:6])
    [shard] = w.paths
    run(ProcessConfig(inputs=[str(store.raw)], output=str(store.processed), workers=1))
    os.utime(shard)  # touched: the same content
    msg = stale_processed(store)
    assert msg.startswith("1 raw shard(s) processed before have newer times, the same content")
    assert "`worldtrace process` records their times and processes nothing again" in msg
    with ShardWriter(store.raw / "b") as w:  # rewritten with other records, same name
        w.write(corpus[6:9])
    os.replace(w.paths[0], shard)
    msg = stale_processed(store)
    assert msg == (
        f"raw shard {shard} changed since it was processed: `worldtrace process` refuses it; "
        "`worldtrace process --rebuild` reprocesses everything"
    )
    with pytest.raises(ValueError, match="changed since it was processed"):
        run(ProcessConfig(inputs=[str(store.raw)], output=str(store.processed), workers=1))


# -- one line, no traceback ---------------------------------------------------------------
def test_job_file_typos_are_one_line(store, tmp_path):
    f = tmp_path / "job.yaml"
    f.write_text(
        "name: j\nsandbox: {kind: terminal}\n"
        "tasks: [{id: t, instrucion: x, actions: [{keystrokes: 'ls\\n'}]}]\n"
    )
    for args in (["collect", str(f)], ["jobs", "submit", str(f)]):
        r = invoke(store, *args)
        assert r.exit_code == 1, args
        assert r.stderr.splitlines() == [f"{f}:3: tasks[0].instrucion: unknown key"], args
        assert r.exception is None or isinstance(r.exception, SystemExit)


@pytest.mark.parametrize("with_repo", [True, False], ids=["repo", "no-repo"])
@pytest.mark.parametrize("tool", ["bash:ls", "bash:[1]"])
def test_quick_collect_tool_without_json_is_one_line(store, repo, with_repo, tool):
    """docs/cli.md: exit 2, "the arguments after `:` must be a JSON object". Found:
    without --repo, `policy scripted needs the task's actions` (exit 1)."""
    where = ["--repo", str(repo)] if with_repo else []
    r = invoke(store, "collect", "--sandbox", "docker", *where, "--tool", tool)
    assert r.exit_code == 2 and isinstance(r.exception, SystemExit)
    assert r.stderr.splitlines()[-1].startswith(
        f"Error: Invalid value for --tool: {tool!r}: the arguments after ':' must be a JSON object"
    )
    assert "Traceback" not in r.output


def test_a_broken_tokenizer_is_one_line(pstore, tmp_path):
    broken = tmp_path / "broken.json"
    broken.write_text('{"version": "1.0", "model": ')
    r = invoke(pstore, "export", "--tokenizer", str(broken), "-o", str(tmp_path / "out"))
    assert r.exit_code == 1 and isinstance(r.exception, SystemExit), r.exception
    [line] = r.stderr.splitlines()
    assert line.startswith("Error: ") and str(broken) in line


# -- ids stay whole -------------------------------------------------------------------------
LONG = "nightly-terminal-collection-with-a-long-descriptive-name"


def _pty(args: list[str], env: dict[str, str], cols: int = 60) -> tuple[int, str]:
    """Run `args` on a real pseudo-terminal `cols` wide; its whole output."""
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 40, cols, 0, 0))
    env = {k: v for k, v in env.items() if k not in ("COLUMNS", "LINES")}
    p = subprocess.Popen(args, stdin=follower, stdout=follower, stderr=follower, env=env)
    os.close(follower)
    out = b""
    while True:
        try:
            chunk = os.read(leader, 1 << 16)
        except OSError:  # EIO: the child closed its side
            break
        if not chunk:
            break
        out += chunk
    os.close(leader)
    return p.wait(timeout=60), out.decode(errors="replace")


def test_tables_keep_ids_whole_piped_and_on_a_narrow_terminal(store, tmp_path, wt_env):
    job = _submit(store, tmp_path, LONG)
    _finish(store, "cd" * 16)
    env = dict(wt_env, WORLDTRACE_STORE=str(store.root))
    for args in (["jobs", "list"], ["jobs", "show", job]):
        piped = subprocess.run(["worldtrace", *args], capture_output=True, text=True, env=env)
        assert piped.returncode == 0, piped.stderr
        assert job in piped.stdout and "…" not in piped.stdout, piped.stdout
        rc, screen = _pty(["worldtrace", *args], env)
        assert rc == 0 and job in screen and "…" not in screen, screen
    assert "cd" * 16 in piped.stdout and "cd" * 16 in screen  # jobs show: the trajectory id


def test_table_titles_stay_whole_on_any_console():
    """A title is a line of its own: rich wrapped it at the table's width, mid-word."""
    import io

    from rich.console import Console

    from worldtrace.output import make_table, print_table

    title = f"import: 3 file(s) -> /srv/{LONG}/raw/import"
    for terminal in (False, True):
        buf = io.StringIO()
        console = Console(file=buf, width=30, force_terminal=terminal, color_system=None)
        table = make_table(("kind", "count"), [("imported", 3)], title)
        table.caption = "first 1 rows shown (--max-rows)"
        print_table(table, console)
        lines = buf.getvalue().splitlines()
        if terminal:  # wrapped between words only, as any line on a terminal
            assert f"/srv/{LONG}/raw/import" in lines, lines
        else:
            assert lines[0] == title and lines[-1] == table.caption, lines


def test_table_titles_stay_whole_piped(records, wt_env, tmp_path):
    """Found: piped, `import` printed `.../raw/i` then `mport`, and `process` its run id
    on one line and its time on the next."""
    deep = tmp_path / LONG / "store"
    args = ["worldtrace", "import", str(records), "--store", str(deep), "--create"]
    r = subprocess.run(args, capture_output=True, text=True, env=wt_env)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[0] == f"import: 3 file(s) -> {deep}/raw/import", r.stdout
    args = ["worldtrace", "process", "--store", str(deep)]
    r = subprocess.run(args, capture_output=True, text=True, env=wt_env)
    assert r.returncode == 0, r.stderr
    assert re.fullmatch(r"process run \S+ \([0-9.]+ s\)", r.stdout.splitlines()[0]), r.stdout


# -- import progress --------------------------------------------------------------------------
@pytest.fixture
def records(tmp_path) -> Path:
    d = tmp_path / "in"
    d.mkdir()
    for f in range(3):
        rows = [
            {"id": f"{f}-{i}", "task": "t/terminal", "system_str": "s", "prompt": [f"ls {i}"],
             "response": [f"file-{f}-{i}"]}
            for i in range(4)
        ]  # fmt: skip
        (d / f"part{f}_test.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return d


@pytest.fixture
def imported(records, wt_env, tmp_path) -> Path:
    """A new store holding `records`, imported with the CLI (one shard, one row group)."""
    s = tmp_path / "s"
    args = ["worldtrace", "import", str(records), "--store", str(s), "--create"]
    assert subprocess.run(args, capture_output=True, env=wt_env).returncode == 0
    return s


def test_import_progress_lines_when_not_a_terminal(records, wt_env, tmp_path):
    r = subprocess.run(
        ["worldtrace", "import", str(records), "--progress-every", "0",
         "--store", str(tmp_path / "s"), "--create"],
        capture_output=True, text=True, env=wt_env,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    lines = [x for x in r.stderr.splitlines() if " import: " in x]
    assert [x.split(" import: ")[1].split(",")[0] for x in lines] == [
        "1/3 file(s)",
        "2/3 file(s)",
        "3/3 file(s)",
    ]
    assert lines[-1].split(", ")[1] == "12 record(s)" and "━" not in r.stderr
    r = subprocess.run(
        ["worldtrace", "import", str(records), "--store", str(tmp_path / "s")],
        capture_output=True, text=True, env=wt_env,
    )  # fmt: skip
    assert " import: " not in r.stderr  # the default: a line every 5 s, none for a short run


def test_import_progress_bar_on_a_terminal(records, wt_env, tmp_path):
    rc, screen = _pty(
        ["worldtrace", "import", str(records), "--progress-every", "0",
         "--store", str(tmp_path / "s"), "--create"],
        wt_env, cols=120,
    )  # fmt: skip
    assert rc == 0, screen
    assert "━" in screen and "3/3" in screen and "12 records" in screen
    assert " import: 1/3 file(s)" not in screen  # the bar, not the log lines


# -- --help -----------------------------------------------------------------------------------
def _commands(group: click.Group, path: tuple[str, ...] = ()):
    for name, cmd in group.commands.items():
        yield (*path, name), cmd
        if isinstance(cmd, click.Group):
            yield from _commands(cmd, (*path, name))


def test_every_help_has_an_example():
    missing = set()
    for path, _ in _commands(cli):
        r = CliRunner().invoke(cli, [*path, "--help"], obj={}, terminal_width=100)
        assert r.exit_code == 0, (path, r.output)
        if "\nExample:" not in r.output and "\n  Example:" not in r.output:
            missing.add(" ".join(path))
        else:
            example = r.output.split("Example:", 1)[1]
            assert "worldtrace " in example, path
    assert missing == set()


def test_export_progress_lines_and_bar(pstore, wt_env, tmp_path):
    args = ["worldtrace", "export", "--format", "agentworldbench", "--progress-every", "0",
            "--store", str(pstore.root), "-o", str(tmp_path / "awb")]  # fmt: skip
    r = subprocess.run(args, capture_output=True, text=True, env=wt_env)
    assert r.returncode == 0, r.stderr
    lines = [x for x in r.stderr.splitlines() if " export: " in x]
    total = row_count(pstore.table("trajectories"))
    assert lines and lines[-1].split(" export: ")[1].startswith(f"{total}/{total} trajectories")
    rc, screen = _pty(args, wt_env, cols=120)
    assert rc == 0, screen
    assert "━" in screen and f"{total}/{total}" in screen and " export: " not in screen


def test_process_with_worker_processes_writes_only_progress_to_stderr(imported, wt_env):
    """Found: Beam's SDK worker processes printed their start-up log lines (apitools,
    semi_persistent_directory, ...) on the user's terminal."""
    s = str(imported)
    args = ["worldtrace", "process", "--store", s, "--workers", "2", "--progress-every", "0"]
    r = subprocess.run([*args, "--json"], capture_output=True, text=True, env=wt_env)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["accounting"]["in"] == 12
    assert r.stderr.strip() and all(" process: " in x for x in r.stderr.splitlines()), r.stderr


def test_process_makes_a_new_store_with_create(imported, wt_env, tmp_path):
    """Found: `process --input ... --create` refused a new store, saying it "only reads"."""
    s = str(imported)
    new = tmp_path / "new"
    args = ["worldtrace", "process", "--input", f"{s}/raw", "--store", str(new), "--json"]
    r = subprocess.run(args, capture_output=True, text=True, env=wt_env)
    assert r.returncode == 1 and "pass --create to make it" in r.stderr and not new.exists()
    r = subprocess.run([*args, "--create"], capture_output=True, text=True, env=wt_env)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["accounting"]["in"] == 12
    assert (new / "processed" / "manifest.json").exists()


def test_process_progress_lines_and_bar(imported, wt_env):
    s = str(imported)
    args = ["worldtrace", "process", "--progress-every", "0", "--store", s]
    r = subprocess.run(args, capture_output=True, text=True, env=wt_env)
    assert r.returncode == 0, r.stderr
    lines = [x.split(" process: ")[1] for x in r.stderr.splitlines() if " process: " in x]
    # import wrote one shard of one row group: pass 1 and pass 2 of that unit
    assert lines[0].startswith("0/2 unit steps, 0 record(s)")
    assert lines[-1].startswith("2/2 unit steps, 12 record(s)")
    done = [int(x.split("/")[0]) for x in lines]
    assert done == sorted(done) and "━" not in r.stderr
    rc, screen = _pty([*args, "--rebuild"], wt_env, cols=120)
    assert rc == 0, screen
    assert "━" in screen and "2/2" in screen and "12 records" in screen
    assert " process: " not in screen
