"""Found (hunt 1206j), around processing and what users read:

1. a JSONL file with one line processing had rejected as not JSON (or not UTF-8) was
   called damaged after any later change, valid lines appended too, and `process` and
   `process --rebuild` both refused it: its new records could never be processed
   (`stats` hinted "damaged", `doctor` failed it); the advice to "move it out of the
   store" was given of a file `--input` read from outside the store;
2. `explain` named a worldtrace record of a JSONL file `record N` (0-based) where
   `import` names it `line N + 1`;
3. with `dedup.exact=false`, the report's "turns to look at" joined each turn to every
   trajectory of its id (exact copies share one): a turn listed two and four times, under
   an `explain ID` that exits 1 as ambiguous;
4. `process` ignored an inherited SIG_IGN of SIGINT except while its run block ran;
5. `stats`' dedup counted a cluster of exact copies in two domains in each, so its
   clusters summed to more than there are and a domain had more than it kept;
6. docs/pipeline.md gave `zlib_ratio` a range of `~0..1.1`, where `x` scores 3.0.

Real parts: worldtrace records in JSONL, the real CLI (in process, as `test_query` runs
it, or as a subprocess for signals), the real Beam pipeline, Parquet and DuckDB."""

from __future__ import annotations

import html
import json
import os
import re
import shlex
import signal
import subprocess
import sys
from pathlib import Path

from worldtrace.schemas import Store
from worldtrace.schemas import fields as F
from worldtrace.schemas.records import (
    Action,
    Observation,
    Outcome,
    Source,
    Trajectory,
    Turn,
)

from worldtrace import summary

from ..conftest import VENV_BIN, wait_until
from .test_interrupts_1205c import blocked_writing, full_pipe
from .test_query import run_cli

ROOT = Path(__file__).resolve().parents[2]


def said(r) -> str:
    return " ".join(r.output.split())


def record(origin: str, turns: list[tuple[str, str]], domain: str = "terminal", **turn) -> str:
    """One worldtrace record (a JSONL line) of `turns` (action, observation)."""
    steps = [
        Turn(index=i, action=Action(kind="command", text=a), observation=Observation(text=o),
             **(turn if i == 0 else {}))
        for i, (a, o) in enumerate(turns)
    ]  # fmt: skip
    t = Trajectory(
        domain=domain,
        turns=steps,
        source=Source(kind="import", origin_format="test", origin_id=origin),
        outcome=Outcome(status="unknown"),
    )
    return t.with_id().to_json() + "\n"


def distinct(origin: str, n: int = 3, domain: str = "terminal") -> str:
    """A record of `n` turns no other record here shares words with."""
    turns = [(f"{origin} run {k}", f"{origin} out {k} {origin * 3}") for k in range(n)]
    return record(origin, turns, domain)


# -- 1: a line rejected when processed is no damage ------------------------------------


def test_a_jsonl_line_rejected_when_processed_is_not_damage_after_an_append(tmp_path):
    """Outside the store (`process --input`): lines appended after a rejected line are
    processed by the rebuild `process` names; a line that read and no longer does is
    still damage, and the way to drop it is to leave it out of `--input`."""
    store = Store.at(tmp_path / "store")
    store.root.mkdir()
    runs = tmp_path / "runs.jsonl"
    runs.write_text("".join(distinct(f"r{i}") for i in range(3)) + '{"oops\n')
    r = run_cli(store, "process", "--input", str(runs))
    assert r.exit_code == 0 and "in 4 = kept 3 + filtered 0 + duplicates 0 + rejected 1" in said(r)
    with runs.open("a") as f:
        f.write(distinct("r3") + distinct("r4"))
    r = run_cli(store, "process", "--input", str(runs))
    assert r.exit_code == 1 and "damaged" not in said(r), r.output
    assert f"{runs}: changed since it was processed; run `worldtrace process --rebuild`" in said(r)
    r = run_cli(store, "process", "--rebuild", "--input", str(runs))
    assert r.exit_code == 0, r.output
    assert "in 6 = kept 5 + filtered 0 + duplicates 0 + rejected 1" in said(r)
    assert f"rejected: {runs}:line 4: validate: <json>: invalid JSON" in said(r)
    # a line that read when processed, cut short: damage, refused by both runs
    lines = runs.read_text().splitlines(keepends=True)
    runs.write_text("".join([lines[0], lines[1][:40] + "\n", *lines[2:]]))
    for args in ((), ("--rebuild",)):
        r = run_cli(store, "process", *args, "--input", str(runs))
        assert r.exit_code == 1, r.output
        line = said(r)
        assert f"raw file {runs} is damaged: " in line and "line 2 is not JSON" in line, line
        assert "5 processed trajectories come only from it" in line
        assert "run `worldtrace process --rebuild` without it among its `--input` files" in line
        assert "out of the store" not in line  # it never was in it


def test_a_jsonl_file_in_the_store_with_a_rejected_line_changes_and_is_rebuilt(tmp_path):
    """In raw/ (a line not UTF-8 this time): `stats` says changed, `doctor` passes it,
    `process` names `--rebuild` and the rebuild processes the new records."""
    store = Store.at(tmp_path / "store")
    (store.raw / "j").mkdir(parents=True)
    f = store.raw / "j" / "x.jsonl"
    f.write_bytes("".join(distinct(f"x{i}") for i in range(3)).encode() + b'{"a": "caf\xe9"}\n')
    r = run_cli(store, "process")
    assert r.exit_code == 0 and "in 4 = kept 3 + filtered 0 + duplicates 0 + rejected 1" in said(r)
    with f.open("a") as out:
        out.write(distinct("x3") + distinct("x4"))
    r = run_cli(store, "stats")
    assert r.exit_code == 0, r.output
    assert f"hint: raw shard {f} changed since it was processed" in said(r)
    assert "damaged" not in said(r)
    d = run_cli(store, "doctor", "--store-only")
    assert str(f) not in said(d) and "FAIL" not in d.output, d.output
    r = run_cli(store, "process")
    assert r.exit_code == 1 and "changed since it was processed" in said(r), r.output
    r = run_cli(store, "process", "--rebuild")
    assert r.exit_code == 0, r.output
    assert "in 6 = kept 5 + filtered 0 + duplicates 0 + rejected 1" in said(r)


# -- 2: a worldtrace record of a JSONL file is named by its line -----------------------


def test_explain_names_a_worldtrace_record_of_a_jsonl_file_by_its_line(tmp_path):
    """The record on line 2 was `FILE:record 1`; `import` names it `line 2`."""
    runs = tmp_path / "runs.jsonl"
    one_turn = record("short", [("ls", "a b c")])  # min_turns drops it
    twins = [record("twin", [("a", f"x {k} y"), ("b", f"z {k} w")]) for k in range(2)]
    runs.write_text(distinct("w0") + distinct("w1") + one_turn + "".join(twins))
    store = Store.at(tmp_path / "store")
    r = run_cli(store, "import", "--create", str(runs))
    assert r.exit_code == 0, r.output
    assert run_cli(store, "process").exit_code == 0
    r = run_cli(store, "explain", "w1")
    assert r.exit_code == 0 and f"from {runs}:line 2\n" in r.output, r.output
    doc = json.loads(run_cli(store, "explain", "w1", "--json").output)
    assert doc["files"] == [{"path": str(runs), "index": 1, "place": f"{runs}:line 2"}]
    r = run_cli(store, "explain", "short")
    assert f"({runs}:line 3, " in r.output, r.output  # dropped by min_turns
    r = run_cli(store, "explain", "twin")  # two records of one origin id: listed
    assert r.exit_code == 1 and f"{runs}:line 4 " in r.output and f"{runs}:line 5 " in r.output
    # the session formats read a JSONL file whole: their index is a conversation's
    assert summary.origin_place("s.jsonl", 0, "claude-code") == "s.jsonl:record 0"
    from worldtrace.collectors.importers import SESSION_FORMATS

    assert tuple(SESSION_FORMATS) == F.SESSION_FORMATS


# -- 3: the report's turns with exact copies kept apart --------------------------------


def test_report_lists_each_copy_once_with_a_command_that_names_it(tmp_path):
    """Two records of one content, origin id and domain (alike: one row, and nothing
    `explain` takes picks one), two of another content and two origin ids (a row and a
    command each), one alone; dedup off."""
    fault = {"perturbation": json.dumps({"kind": "rate_limit"})}
    inj = record("inj", [("get 1", "rate limited"), ("get 2", "result one two three")],
                 domain="mcp", **fault)  # fmt: skip
    twin = [record(o, [("cat a", "alpha beta gamma delta"), ("cat b", "epsilon zeta")])
            for o in ("t1", "t2")]  # fmt: skip
    runs = tmp_path / "runs.jsonl"
    runs.write_text(inj + inj + "".join(twin) + distinct("solo"))
    store = Store.at(tmp_path / "store")
    assert run_cli(store, "import", "--create", str(runs)).exit_code == 0
    r = run_cli(store, "process", "--set", "dedup.exact=false", "--set", "dedup.near=false")
    assert r.exit_code == 0 and "kept 5" in said(r), r.output
    out = tmp_path / "report.html"
    assert run_cli(store, "report", "-o", str(out)).exit_code == 0
    page = out.read_text()
    start = page.index("<table class=worst>")
    rows = re.findall(r'<tr data-category="([^"]+)">(.*?)</tr>', page[start : page.index("</table>", start)])  # fmt: skip
    looks = [(cat, re.findall(r"<td[^>]*>(.*?)</td>", row)) for cat, row in rows]
    # each (category, turn, trajectory) once: a copy's turn met every copy of its id before
    assert len(looks) == len({(cat, cells[1], cells[-1]) for cat, cells in looks}), looks
    [injected] = [cells for cat, cells in looks if cat == "injected"]  # was four rows
    note = html.unescape(re.sub(r"<[^>]+>", "", injected[-1]))
    assert note.startswith("no `worldtrace explain` argument names this trajectory alone: ")
    assert "2 processed trajectories have its id" in note and "2 its origin id inj" in note
    assert f"from {runs}:line 1, {runs}:line 2" in note  # which records the row stands for
    explained = set()
    for _, cells in looks:
        cmd = re.fullmatch(r"<code class=cmd>(.*)</code>", cells[-1])
        if cmd is None:  # the copies of `inj`, said as above
            assert "origin id inj" in cells[-1]
            continue
        argv = shlex.split(html.unescape(cmd.group(1)))
        assert argv[:2] == ["worldtrace", "explain"] and argv[-2:] == ["--store", str(store.root)]
        r = run_cli(store, "explain", *argv[2:-2])
        assert r.exit_code == 0, argv  # exit 1 before: it matched two trajectories
        explained.add(re.search(r"origin=test:(\S+)", r.output).group(1))
    assert {"t1", "t2", "solo"} <= explained  # each copy its own command, by origin id


# -- 4: a SIGINT ignored by whoever started the command --------------------------------

STOP_IN_BLOCK = """
import os, signal
from worldtrace.errors import cli_stops, interrupts
cli_stops()  # the CLI's start, as run_guarded does it
with interrupts(lambda: "nothing was written"):  # a command's block (`process`'s run)
    os.kill(os.getpid(), signal.SIGINT)
    sum(range(1000))  # the handler, had one been set, runs at the next bytecodes
print("ignored after:", signal.getsignal(signal.SIGINT) is signal.SIG_IGN)
"""


def ignore_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def test_an_inherited_sig_ign_stays_ignored_inside_a_commands_block():
    """Started with SIGINT ignored (`cmd &` in a script, nohup), the command ignored it
    before and after its run block but stopped with 130 inside it."""
    r = subprocess.run(
        [sys.executable, "-c", STOP_IN_BLOCK], capture_output=True, text=True, timeout=60,
        preexec_fn=ignore_sigint,
    )  # fmt: skip
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout == "ignored after: True\n" and "interrupted" not in r.stderr


def test_process_started_with_sigint_ignored_runs_through_it(tmp_path):
    """The hunter's case on the real command: a Ctrl-C that comes while `process` runs its
    pipeline, held there writing its first progress line into a full pipe (stderr)."""
    runs = tmp_path / "runs.jsonl"
    runs.write_text("".join(distinct(f"p{i}") for i in range(40)))
    env = dict(os.environ, PATH=f"{VENV_BIN}:{os.environ.get('PATH', '')}")
    cmd = ["worldtrace", "process", "--create", "--store", str(tmp_path / "st"),
           "--input", str(runs), "--progress-every", "0"]  # fmt: skip
    r, w = full_pipe()
    proc = subprocess.Popen(
        cmd, env=env, stdout=subprocess.PIPE, stderr=w, text=True, preexec_fn=ignore_sigint
    )
    os.close(w)
    try:
        wait_until(lambda: blocked_writing(proc.pid) or proc.poll() is not None, timeout=120,
                   what="process writing its first progress line")  # fmt: skip
        assert proc.poll() is None, proc.communicate()
        os.kill(proc.pid, signal.SIGINT)
        with os.fdopen(r, "rb") as reader:
            err = reader.read().decode(errors="replace")  # drained: the run goes on
        out = proc.communicate(timeout=120)[0]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, (proc.returncode, err.lstrip("x")[-2000:])
    assert " process: " in err and "interrupted" not in err
    assert "in 40 = kept 40" in " ".join(out.split())


# -- 5: stats' dedup clusters, one per kept trajectory ---------------------------------


def test_stats_counts_a_cluster_of_copies_in_two_domains_once(tmp_path):
    """The same content in terminal and swe (one content id, one cluster), and two
    more swe records: swe kept 2 and had 3 clusters; the domains summed to 4 of 3."""
    turns = [("make", "built target all"), ("make test", "12 passed 0 failed")]
    runs = tmp_path / "runs.jsonl"
    runs.write_text(
        record("a", turns) + record("b", turns, "swe") + distinct("c", domain="swe")
        + distinct("d", domain="swe")
    )  # fmt: skip
    store = Store.at(tmp_path / "store")
    assert run_cli(store, "import", "--create", str(runs)).exit_code == 0
    assert run_cli(store, "process").exit_code == 0
    sections = json.loads(run_cli(store, "stats", "--json").output)["sections"]
    clusters = {r["domain"]: r["clusters"] for r in sections["dedup"]}
    kept = {r["domain"]: r["trajectories"] for r in sections["turns_per_trajectory"]}
    assert clusters == kept == {"terminal": 1, "swe": 2}, (clusters, kept)
    assert {r["domain"]: r["exact_dups"] for r in sections["dedup"]} == {"terminal": 0, "swe": 1}


# -- 6: zlib_ratio's range ---------------------------------------------------------------


def test_the_documented_zlib_ratio_range_holds_short_texts():
    """`x` scores 3.0, `ok` 2.0: deflate's fixed cost (block header, end-of-block code)
    over a text of a byte or two. The range the docs give must hold them."""
    from worldtrace.pipelines.stats import zlib_ratio

    doc = (ROOT / "docs" / "pipeline.md").read_text()
    [row] = [x for x in doc.splitlines() if x.startswith("| `zlib_ratio` |")]
    number = r"~?(\d+(?:\.\d+)?)"
    low, high = re.fullmatch(rf"{number}\.\.{number}", row.split("|")[-2].strip()).groups()
    ratios = [zlib_ratio(t.encode()) for t in ("x", "ok", "~", "é", "ok ok", "a" * 5000)]
    assert max(ratios) == zlib_ratio(b"x") == 3.0 and zlib_ratio(b"ok") == 2.0
    assert all(float(low) <= v <= float(high) for v in ratios), (row, ratios)
    assert float(high) == 3.0  # reached: one character, the most any text costs
