"""`worldtrace demo`: the main job end to end on embedded defaults."""

from __future__ import annotations

from collections import Counter

from rich.console import Console
from rich.table import Table

from worldtrace.collectors.synthetic import SyntheticConfig, generate
from worldtrace.schemas import ShardWriter, Store, read_records, validate_dict
from worldtrace.schemas.store import input_files, scan_file


def run_demo(store: Store, episodes: int = 6) -> int:
    console = Console()
    console.rule(f"worldtrace demo -> {store.root}")

    records = generate(SyntheticConfig(n=episodes, seed=7))
    with ShardWriter(store.raw / "demo", prefix="synthetic") as w:
        w.write(records)
    console.print(
        f"[bold]write[/]: {len(records)} trajectories -> {', '.join(p.name for p in w.paths)}"
    )

    problems = []
    for f in input_files([store.raw / "demo"]):
        for where, d in scan_file(f):
            problems += validate_dict(d, where) if isinstance(d, dict) else [d]
    console.print(f"[bold]validate[/]: {len(problems)} problem(s)")
    for p in problems:
        console.print(f"  {p}")

    back = list(read_records(store.raw / "demo"))
    ids = {t.trajectory_id for t in records}
    same = sum(t.trajectory_id in ids for t in back)
    console.print(f"[bold]read back[/]: {len(back)} trajectories, {same} match what was written")

    table = Table(title="raw trajectories by domain")
    for col in ("domain", "trajectories", "turns", "obs chars"):
        table.add_column(col, justify="right" if col != "domain" else "left")
    by_domain: Counter[str] = Counter()
    turns: Counter[str] = Counter()
    chars: Counter[str] = Counter()
    for t in back:
        by_domain[t.domain] += 1
        turns[t.domain] += len(t.turns)
        chars[t.domain] += sum(len(x.observation.text) for x in t.turns)
    for dom in sorted(by_domain):
        table.add_row(dom, str(by_domain[dom]), str(turns[dom]), str(chars[dom]))
    console.print(table)
    return 0 if not problems and same == len(records) else 1
