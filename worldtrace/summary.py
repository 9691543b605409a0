"""`worldtrace stats` and `worldtrace explain`: what is in the store, and why a turn
counts in the loss or not."""

from __future__ import annotations

from typing import Any

import duckdb
from rich.console import Console
from rich.table import Table

from worldtrace.pipelines.mask import keep_turn

STATS_QUERIES: dict[str, str] = {
    "trajectories by domain and source": """
        SELECT domain, source_kind, coalesce(origin_format, source_name) AS source,
               count(*) AS raw, sum(num_turns) AS raw_turns,
               (SELECT count(*) FROM trajectories p WHERE p.domain = r.domain) AS processed_in_domain
        FROM raw_trajectories r GROUP BY ALL ORDER BY ALL""",
    "turn lengths (characters)": """
        SELECT domain, count(*) AS turns,
               round(avg(action_chars), 1) AS action_mean,
               quantile_disc(obs_chars, 0.5) AS obs_p50, quantile_disc(obs_chars, 0.9) AS obs_p90,
               max(obs_chars) AS obs_max, round(avg(CASE WHEN truncated THEN 1 ELSE 0 END), 4) AS truncated
        FROM raw_turns GROUP BY domain ORDER BY domain""",
    "turns per trajectory": """
        SELECT domain, count(*) AS trajectories, round(avg(num_turns), 2) AS mean,
               quantile_disc(num_turns, 0.5) AS p50, max(num_turns) AS max
        FROM trajectories GROUP BY domain ORDER BY domain""",
    "category shares and effective keep by domain": """
        SELECT domain, category, count(*) AS turns,
               round(count(*) / sum(count(*)) OVER (PARTITION BY domain), 4) AS share,
               round(sum(keep * obs_chars) / nullif(sum(obs_chars), 0), 4) AS effective_keep
        FROM turns GROUP BY domain, category ORDER BY domain, turns DESC""",
    "effective keep by domain": """
        SELECT domain, count(*) AS turns,
               round(sum(keep * obs_chars) / nullif(sum(obs_chars), 0), 4) AS effective_keep_chars,
               round(avg(CASE WHEN in_loss THEN 1 ELSE 0 END), 4) AS turns_in_loss
        FROM turns GROUP BY domain ORDER BY domain""",
    "dedup": """
        SELECT domain, count(*) AS trajectories,
               sum(CASE WHEN role = 'exact' THEN 1 ELSE 0 END) AS exact_dups,
               sum(CASE WHEN role = 'near' THEN 1 ELSE 0 END) AS near_dups,
               round(avg(CASE WHEN representative THEN 0 ELSE 1 END), 4) AS dup_rate,
               count(DISTINCT cluster_id) AS clusters
        FROM clusters GROUP BY domain ORDER BY domain""",
    "filters and rejects": """
        SELECT stage, split_part(reason, ':', 1) AS reason, count(*) AS count
        FROM rejects GROUP BY ALL ORDER BY count DESC LIMIT 20""",
    "exports": "SELECT name, format, samples, rows, tokens, loss_tokens, round(loss_tokens / nullif(tokens, 0), 4) AS loss_share, keep_mode FROM exports ORDER BY name",
    "jobs": """
        SELECT status, count(*) AS jobs, sum(episodes) AS episodes, sum(succeeded) AS succeeded,
               round(sum(succeeded) / nullif(sum(episodes), 0), 4) AS success_rate
        FROM jobs GROUP BY status ORDER BY status""",
}


def result_table(
    cur: duckdb.DuckDBPyConnection, title: str | None = None, max_rows: int | None = None
) -> Table:
    t = Table(title=title, title_justify="left")
    for d in cur.description:
        t.add_column(d[0])
    for n, row in enumerate(cur.fetchall()):
        if max_rows is not None and n >= max_rows:
            t.caption = f"first {max_rows} rows shown"
            break
        t.add_row(*("" if v is None else str(v) for v in row))
    return t


def print_stats(con: duckdb.DuckDBPyConnection, console: Console | None = None) -> None:
    console = console or Console()
    for title, sql in STATS_QUERIES.items():
        cur = con.execute(sql)
        table = result_table(cur, title)
        if table.row_count:
            console.print(table)
        else:
            console.print(f"[dim]{title}: no data yet[/]")


def _excerpt(text: str, n: int = 160) -> str:
    text = text.replace("\n", "⏎")
    return text if len(text) <= n else text[: n - 1] + "…"


MAX_CANDIDATES = 50
"""Candidates listed for an ambiguous id (all are counted)."""


def matches(con: duckdb.DuckDBPyConnection, tid: str) -> list[tuple[Any, ...]]:
    """(trajectory_id, origin_path, origin_index, domain, origin_format, origin_id) of the
    processed trajectories `tid` names: an exact id alone, else every id with that prefix,
    raw id or origin id (the same origin id comes from many files)."""
    cols = "trajectory_id, origin_path, origin_index, domain, origin_format, origin_id"
    exact = con.execute(
        f"SELECT {cols} FROM trajectories WHERE trajectory_id = $p", {"p": tid}
    ).fetchall()
    if exact:
        return exact
    return con.execute(
        f"""SELECT {cols} FROM trajectories
           WHERE starts_with(trajectory_id, $p) OR origin_id = $p
              OR list_contains(map_extract(metadata, 'raw_trajectory_id'), $p)
           ORDER BY trajectory_id""",
        {"p": tid},
    ).fetchall()


def record(con: duckdb.DuckDBPyConnection, trajectory_id: str) -> dict[str, Any]:
    cur = con.execute("SELECT * FROM trajectories WHERE trajectory_id = $t", {"t": trajectory_id})
    names = [d[0] for d in cur.description]
    return dict(zip(names, cur.fetchone(), strict=True))


def find(con: duckdb.DuckDBPyConnection, tid: str) -> dict[str, Any] | None:
    """The processed trajectory by id, id prefix, raw id or origin id, if exactly one."""
    ids = {r[0] for r in matches(con, tid)}
    return record(con, ids.pop()) if len(ids) == 1 else None


def print_candidates(rows: list[tuple[Any, ...]], tid: str, console: Console) -> None:
    console.print(f"{tid!r} matches {len(rows)} trajectories; give one of these ids:")
    for t_id, path, index, domain, fmt, origin in rows[:MAX_CANDIDATES]:
        where = f"{path}:{index}" if path else f"{fmt or ''}:{origin or ''}"
        console.print(f"  {t_id}  {where}  {domain}", highlight=False, markup=False, soft_wrap=True)
    if len(rows) > MAX_CANDIDATES:
        console.print(f"  ... {len(rows) - MAX_CANDIDATES} more", highlight=False)


def explain(
    con: duckdb.DuckDBPyConnection, tid: str, seed: int = 0, console: Console | None = None
) -> bool:
    console = console or Console()
    rows = matches(con, tid)
    if len({r[0] for r in rows}) > 1:
        print_candidates(rows, tid, console)
        return False
    rec = record(con, rows[0][0]) if rows else None
    if rec is None:
        hits = con.execute(
            "SELECT stage, reason, source_path || ':' || record FROM rejects WHERE trajectory_id LIKE $p || '%'",
            {"p": tid},
        ).fetchall()
        dup = con.execute(
            "SELECT cluster_id, role FROM clusters WHERE trajectory_id LIKE $p || '%' AND NOT representative",
            {"p": tid},
        ).fetchall()
        if hits or dup:
            for stage, reason, where in hits:
                console.print(f"{tid}: dropped by {stage}: {reason} ({where})")
            for cluster, role in dup:
                console.print(
                    f"{tid}: {role} duplicate in cluster {cluster}; the representative is kept"
                )
            return True
        console.print(
            f"no processed trajectory matches {tid!r} (an id, id prefix, raw id or origin id)"
        )
        return False
    console.print(
        f"[bold]{rec['trajectory_id']}[/] domain={rec['domain']} turns={rec['num_turns']} "
        f"origin={rec['origin_format'] or rec['source_name']}:{rec['origin_id'] or ''} "
        f"cluster={(rec['dedup'] or {}).get('cluster_id')}"
    )
    for r in rows:  # the same content can come from several files
        if r[1]:
            console.print(f"  from {r[1]}:{r[2]}", highlight=False, markup=False, soft_wrap=True)
    for turn in rec["turns"]:
        st = turn["stats"] or {}
        keep = turn["keep"]
        in_loss = keep is not None and keep_turn(rec["trajectory_id"], turn["index"], seed, keep)
        console.print(
            f"[bold]turn {turn['index']}[/]  category={turn['category']}  keep={keep:.2f}  "
            f"in loss={'yes' if in_loss else 'no'}",
            highlight=False,
        )
        console.print(f"  rule: {turn['rule']}", highlight=False, markup=False)
        console.print(
            "  stats: OL={ol:.3f} Nov={nov:.3f} Jac={jac:.3f} R={r:.3f} | byte_entropy={byte_entropy:.2f} "
            "zlib_ratio={zlib_ratio:.2f} cond_novelty={cond_novelty:.2f} corpus_surprisal={corpus_surprisal:.2f} bits".format(
                **st
            ),
            highlight=False,
        )
        console.print(
            f"  action: {_excerpt(turn['action']['text'])}", highlight=False, markup=False
        )
        console.print(
            f"  observation: {_excerpt(turn['observation']['text'])}", highlight=False, markup=False
        )
    console.print(
        f"[dim]in loss: keep_mode=turn, seed={seed} (export --keep-mode/--seed change it)[/]"
    )
    return True
