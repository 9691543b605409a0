"""`worldtrace report`: one self-contained HTML page (inline SVG, no scripts, no CDN)."""

from __future__ import annotations

import html
from datetime import datetime, timezone
from pathlib import Path

import duckdb

from worldtrace.schemas.store import write_bytes_atomic

from .summary import STATS_QUERIES

W, H, PAD = 540, 240, 40
PALETTE = [
    "#4e79a7",
    "#f28e2b",
    "#e15759",
    "#76b7b2",
    "#59a14f",
    "#edc948",
    "#b07aa1",
    "#ff9da7",
    "#9c755f",
]


def _esc(x: object) -> str:
    return html.escape(str(x))


def _figure(name: str, title: str, body: str, note: str = "") -> str:
    return (
        f'<figure class="plot" data-plot="{name}"><figcaption>{_esc(title)}</figcaption>'
        f'<svg width="{W}" height="{H}" viewBox="0 0 {W} {H}">{body}</svg>'
        f"{f'<p class=note>{_esc(note)}</p>' if note else ''}</figure>"
    )


def _empty(name: str, title: str) -> str:
    body = f'<text x="{W / 2}" y="{H / 2}" text-anchor="middle" class="empty">no data yet</text>'
    return _figure(name, title, body)


def bars(name: str, title: str, labels: list[str], values: list[float], note: str = "") -> str:
    """Vertical bars, one per label."""
    if not values or max(values) <= 0:
        return _empty(name, title)
    top = max(values)
    bw = (W - 2 * PAD) / len(values)
    parts = [f'<line x1="{PAD}" y1="{H - PAD}" x2="{W - PAD / 2}" y2="{H - PAD}" stroke="#333"/>']
    for i, (label, v) in enumerate(zip(labels, values, strict=True)):
        h = (H - 2 * PAD) * v / top
        x = PAD + i * bw
        parts.append(
            f'<rect class="bar" x="{x + 1:.1f}" y="{H - PAD - h:.1f}" width="{max(bw - 2, 1):.1f}" height="{h:.1f}" fill="{PALETTE[0]}"><title>{_esc(label)}: {v:g}</title></rect>'
        )
        if len(values) <= 12 or i % -(-len(values) // 12) == 0:
            parts.append(
                f'<text x="{x + bw / 2:.1f}" y="{H - PAD + 14}" text-anchor="middle" class="tick">{_esc(label)}</text>'
            )
    parts.append(f'<text x="{PAD - 4}" y="{PAD}" text-anchor="end" class="tick">{top:g}</text>')
    return _figure(name, title, "".join(parts), note)


def stacked(name: str, title: str, rows: list[tuple[str, dict[str, float]]]) -> str:
    """Horizontal 100% stacked bars (e.g. category shares by domain)."""
    if not rows:
        return _empty(name, title)
    keys = sorted({k for _, d in rows for k in d})
    color = {k: PALETTE[i % len(PALETTE)] for i, k in enumerate(keys)}
    bh = (H - 2 * PAD) / len(rows)
    parts = []
    for i, (label, d) in enumerate(rows):
        total = sum(d.values()) or 1
        x = x0 = PAD + 40
        full = W - x0 - 10
        y = PAD / 2 + i * bh
        parts.append(
            f'<text x="{x - 4}" y="{y + bh / 2 + 4:.1f}" text-anchor="end" class="tick">{_esc(label)}</text>'
        )
        for k in keys:
            w = full * d.get(k, 0) / total
            if w > 0:
                parts.append(
                    f'<rect class="bar" x="{x:.1f}" y="{y + 2:.1f}" width="{w:.1f}" height="{bh - 4:.1f}" fill="{color[k]}"><title>{_esc(label)} {_esc(k)}: {d.get(k, 0) / total:.1%}</title></rect>'
                )
                x += w
    for j, k in enumerate(keys):
        lx = PAD + j * ((W - PAD) / len(keys))
        parts.append(f'<rect x="{lx:.1f}" y="{H - 18}" width="10" height="10" fill="{color[k]}"/>')
        parts.append(
            f'<text x="{lx + 13:.1f}" y="{H - 9}" class="tick" text-anchor="start">{_esc(k)}</text>'
        )
    return _figure(name, title, "".join(parts))


def _hist(con, sql: str, lo: float, hi: float, n: int) -> tuple[list[str], list[float]]:
    width = (hi - lo) / n
    q = f"""SELECT least(greatest(floor((v - {lo}) / {width}), 0), {n - 1})::INT AS b, count(*)
            FROM ({sql}) WHERE v IS NOT NULL AND NOT isnan(v) GROUP BY b"""
    counts = dict(con.execute(q).fetchall())
    labels = [f"{lo + i * width:.2g}" for i in range(n)]
    return labels, [float(counts.get(i, 0)) for i in range(n)]


def _table(con, title: str, sql: str) -> str:
    cur = con.execute(sql)
    cols = [d[0] for d in cur.description]
    rows = cur.fetchall()
    if not rows:
        return f"<h3>{_esc(title)}</h3><p class=empty>no data yet</p>"
    head = "".join(f"<th>{_esc(c)}</th>" for c in cols)
    body = "".join(
        "<tr>" + "".join(f"<td>{'' if v is None else _esc(v)}</td>" for v in r) + "</tr>"
        for r in rows
    )
    return (
        f"<h3>{_esc(title)}</h3><table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
    )


CSS = """
body{font-family:system-ui,sans-serif;margin:24px;color:#222;max-width:1200px}
h1{font-size:22px} h2{font-size:18px;margin-top:28px} h3{font-size:15px}
.grid{display:flex;flex-wrap:wrap;gap:16px}
figure.plot{margin:0;border:1px solid #ddd;border-radius:6px;padding:8px;background:#fff}
figcaption{font-weight:600;font-size:14px;margin-bottom:4px}
.tick{font-size:10px;fill:#555} .empty{fill:#999;font-size:14px}
table{border-collapse:collapse;font-size:12px;margin-bottom:12px} td,th{border:1px solid #ddd;padding:3px 6px;text-align:right}
th{background:#f3f3f3} td:first-child{text-align:left} .note{font-size:11px;color:#666;margin:2px 0 0}
"""

PLOTS = ("categories", "nov", "ol", "r", "obs_len", "clusters", "throughput")


def build(con: duckdb.DuckDBPyConnection, title: str = "worldtrace report") -> str:
    figs = []
    rows: dict[str, dict[str, float]] = {}
    for domain, cat, n in con.execute(
        "SELECT domain, category, count(*) FROM turns GROUP BY ALL ORDER BY ALL"
    ).fetchall():
        rows.setdefault(domain, {})[cat] = n
    figs.append(stacked("categories", "category shares by domain (turns)", sorted(rows.items())))
    for col, label in (("nov", "Nov"), ("ol", "OL")):
        figs.append(
            bars(
                col,
                f"histogram of {label}",
                *_hist(con, f"SELECT {col} AS v FROM turns", 0, 1.0000001, 20),
            )
        )
    figs.append(
        bars(
            "r",
            "histogram of R = len(obs)/len(action), log10",
            *_hist(con, "SELECT log10(r) AS v FROM turns WHERE r > 0", -2, 4, 24),
        )
    )
    obs_src = "turns" if con.execute("SELECT count(*) FROM turns").fetchone()[0] else "raw_turns"
    figs.append(
        bars(
            "obs_len",
            f"observation length, log10 characters ({obs_src})",
            *_hist(
                con, f"SELECT log10(obs_chars) AS v FROM {obs_src} WHERE obs_chars > 0", 0, 6, 24
            ),
        )
    )
    sizes = con.execute(
        "SELECT size, count(*) FROM (SELECT cluster_id, count(*) AS size FROM clusters GROUP BY cluster_id) GROUP BY size ORDER BY size"
    ).fetchall()
    figs.append(
        bars(
            "clusters",
            "dedup cluster sizes (clusters per size)",
            [str(s) for s, _ in sizes],
            [float(c) for _, c in sizes],
        )
    )
    tp = con.execute(
        """SELECT strftime(date_trunc('hour', ts), '%m-%d %H:00') AS h, count(*) FROM (
             SELECT ended_at AS ts FROM episodes WHERE ended_at IS NOT NULL
             UNION ALL SELECT started_at FROM raw_trajectories WHERE started_at IS NOT NULL
               AND (SELECT count(*) FROM episodes) = 0)
           GROUP BY h ORDER BY h"""
    ).fetchall()
    figs.append(
        bars(
            "throughput",
            "collection throughput (episodes per hour)",
            [h for h, _ in tp],
            [float(c) for _, c in tp],
            "from jobs' episodes, else raw trajectories' start times",
        )
    )
    tables = "".join(
        _table(con, t, STATS_QUERIES[t])
        for t in (
            "trajectories by domain and source",
            "effective keep by domain",
            "dedup",
            "filters and rejects",
            "exports",
            "jobs",
        )
    )
    now = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    return (
        f"<!doctype html><html><head><meta charset=utf-8><title>{_esc(title)}</title><style>{CSS}</style></head>"
        f"<body><h1>{_esc(title)}</h1><p>generated {now}</p><h2>Plots</h2><div class=grid>{''.join(figs)}</div>"
        f"<h2>Tables</h2>{tables}</body></html>"
    )


def write(con: duckdb.DuckDBPyConnection, output: str | Path) -> Path:
    return write_bytes_atomic(output, build(con).encode())
