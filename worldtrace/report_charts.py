"""The report's plots: plotly figures built from DuckDB aggregates of the store's views.

Counts are aggregated in DuckDB (bins, shares, time buckets), so a figure holds a few
hundred numbers whatever the store's size. Colours are fixed per category and per domain
(CATEGORY_COLORS, DOMAIN_COLORS: the same in every report, so a reader learns them once);
distributions are drawn per domain (one facet each), since domains differ by orders of
magnitude in size and shape and a pooled histogram shows mostly the largest one.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timezone

import duckdb
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from worldtrace.schemas import fields as F

CATEGORY_COLORS: dict[str, str] = {
    # masked or down-weighted by the policies: warm colours
    "echo": "#e15759",
    "boilerplate": "#f28e2b",
    "repeat": "#ff9da7",
    "injected": "#bab0ac",
    "common": "#edc948",
    "transform": "#b07aa1",
    # in the loss: cool colours
    "retrieval": "#4e79a7",
    "expansion": "#59a14f",
    "action": "#76b7b2",
    "other": "#9c755f",
}
"""One colour per turn category of `schemas.fields.CATEGORIES`, in every report."""
DOMAIN_COLORS: dict[str, str] = {
    "mcp": "#0072b2",
    "search": "#e69f00",
    "terminal": "#009e73",
    "swe": "#cc79a7",
    "android": "#56b4e9",
    "web": "#d55e00",
    "os": "#6a5acd",
}
"""One colour per domain of `schemas.fields.DOMAINS`, in every report."""
UNKNOWN_COLOR = "#8c8c8c"
"""A category or domain that is not (yet) in schemas.fields."""
assert set(CATEGORY_COLORS) == set(F.CATEGORIES), "a category without a colour"
assert set(DOMAIN_COLORS) == set(F.DOMAINS), "a domain without a colour"

FACET_COLUMNS = 4
FACET_ROW_PX, PLOT_PX = 210, 380
BUCKETS = (
    ("minute", 60),
    ("10 minutes", 600),
    ("hour", 3600),
    ("day", 86400),
    ("week", 7 * 86400),
    ("30 days", 30 * 86400),
)
"""Time buckets of the throughput plot: the first that gives at most MAX_BUCKETS."""
MAX_BUCKETS = 120
BUCKET_ORIGIN = 4 * 86400
"""Buckets count from Monday 1970-01-05 (epoch 0 is a Thursday): weeks start on Mondays."""
LOG_TICKS = {
    -2: "0.01",
    -1: "0.1",
    0: "1",
    1: "10",
    2: "100",
    3: "1k",
    4: "10k",
    5: "100k",
    6: "1M",
}


def _order(names, known: tuple[str, ...]) -> list[str]:
    """Known names in their schema order, then the others sorted."""
    names = set(names)
    return [n for n in known if n in names] + sorted(names - set(known))


def _rank(name: str | None, known: tuple[str, ...]) -> int:
    """Legend position: schema order, the same in every plot."""
    return 1000 + (known.index(name) if name in known else len(known))


def _layout(fig: go.Figure, title: str, height: int) -> go.Figure:
    fig.update_layout(
        title={"text": title, "x": 0.01, "font": {"size": 15}},
        height=height,
        margin={"l": 70, "r": 20, "t": 60, "b": 55},
        template="plotly_white",
        legend={"title": {"text": ""}, "traceorder": "normal"},
        bargap=0.05,
    )
    return fig


NO_DATA = "no-data"
"""The name of the annotation an empty plot carries (`report` says there why it is empty)."""


def _no_data(fig: go.Figure, text: str = "no data yet") -> go.Figure:
    """An empty plot says so; "no data yet" is `report`'s to replace with why (the
    store's state), a text of its own is the plot's reason."""
    fig.add_annotation(
        name=NO_DATA,
        text=text,
        x=0.5,
        y=0.5,
        xref="paper",
        yref="paper",
        showarrow=False,
        font={"size": 16, "color": "#999"},
    )
    return fig


def _facets(domains: list[str], x_title: str, y_title: str, title: str) -> go.Figure:
    """One subplot per domain, every axis titled (readers look at one facet at a time)."""
    cols = min(FACET_COLUMNS, max(len(domains), 1))
    rows = max(-(-len(domains) // cols), 1)
    fig = make_subplots(
        rows=rows,
        cols=cols,
        subplot_titles=domains or None,
        horizontal_spacing=0.07,
        vertical_spacing=0.22 if rows > 1 else 0.1,
    )
    fig.update_xaxes(title_text=x_title, title_font_size=11)
    fig.update_yaxes(title_text=y_title, title_font_size=11)
    return _layout(fig, title, 90 + FACET_ROW_PX * rows)


def histogram(
    con: duckdb.DuckDBPyConnection,
    *,
    value: str,
    source: str,
    lo: float,
    hi: float,
    bins: int,
    x_title: str,
    title: str,
    by_category: bool = True,
    log_ticks: bool = False,
) -> go.Figure:
    """Per-domain histogram of `value` (SQL over `source`), stacked by category: bins
    [edge, next edge), the last one closed, values outside [lo, hi] in the end bins."""
    edges = bin_edges(lo, hi, bins)
    width = (hi - lo) / bins
    cat = "coalesce(category, 'none')" if by_category else "NULL"
    e = "([" + ", ".join(map(repr, edges)) + "]::DOUBLE[])"
    # numpy.histogram's way: a guess from the width, then moved by one where it is on
    # the wrong side of an edge (a division alone put 0.5 in [0.45, 0.5): 0.5 / 0.05 can
    # round below 10, and 0.3 / 0.05 does)
    rows = con.execute(
        f"""SELECT domain, category,
                   least(greatest(g - (v < {e}[g + 1])::INT
                                  + (g < {bins - 1} AND v >= {e}[g + 2])::INT, 0), {bins - 1}) AS b,
                   count(*)
            FROM (SELECT domain, category, v,
                         least(greatest(floor((v - {lo!r}) / {width!r}), 0), {bins - 1})::INT AS g
                  FROM (SELECT domain, {cat} AS category, {value} AS v FROM {source})
                  WHERE v IS NOT NULL AND isfinite(v))
            GROUP BY ALL ORDER BY ALL"""
    ).fetchall()
    domains = _order({r[0] for r in rows}, F.DOMAINS)
    fig = _facets(domains, x_title, "turns", title)
    if not rows:
        return _no_data(fig)
    shown: set[str] = set()
    cols = min(FACET_COLUMNS, len(domains))
    for i, domain in enumerate(domains):
        here = [r for r in rows if r[0] == domain]
        for category in _order({r[1] for r in here}, F.CATEGORIES) if by_category else [None]:
            pts = [(b, n) for d, c, b, n in here if c == category]
            name = category or domain
            color = (CATEGORY_COLORS if by_category else DOMAIN_COLORS).get(name, UNKNOWN_COLOR)
            fig.add_trace(
                go.Bar(
                    x=[(edges[b] + edges[b + 1]) / 2 for b, _ in pts],
                    y=[n for _, n in pts],
                    width=width,
                    name=name,
                    marker_color=color,
                    legendgroup=name,
                    showlegend=by_category and name not in shown,
                    legendrank=_rank(name, F.CATEGORIES if by_category else F.DOMAINS),
                    customdata=[
                        [_edge(edges[b], log_ticks), _edge(edges[b + 1], log_ticks)] for b, _ in pts
                    ],
                    hovertemplate=f"{domain}, {name}<br>{x_title}: %{{customdata[0]}} to %{{customdata[1]}}"
                    "<br>%{y} turns<extra></extra>",
                ),
                row=i // cols + 1,
                col=i % cols + 1,
            )
            shown.add(name)
    fig.update_layout(barmode="stack", showlegend=by_category)
    fig.update_xaxes(range=[lo, hi])
    if log_ticks:
        ticks = [t for t in LOG_TICKS if lo <= t <= hi]
        fig.update_xaxes(tickvals=ticks, ticktext=[LOG_TICKS[t] for t in ticks])
    return fig


def bin_edges(lo: float, hi: float, bins: int) -> list[float]:
    """`bins` + 1 edges from `lo` to `hi`, each the number its label shows (0.3, not
    0.30000000000000004, which is 6 * 0.05): a value equal to a threshold the rules
    compare with (`Nov >= 0.5`) is drawn in the bin that starts there."""
    return [float(f"{lo + (hi - lo) * k / bins:.12g}") for k in range(bins + 1)]


def _edge(x: float, log: bool) -> str:
    return f"{10**x:.3g}" if log else f"{x:.2f}"


def category_shares(con: duckdb.DuckDBPyConnection) -> go.Figure:
    rows = con.execute(
        """SELECT domain, coalesce(category, 'none'), count(*) AS n,
                  100.0 * count(*) / sum(count(*)) OVER (PARTITION BY domain)
           FROM turns GROUP BY 1, 2"""
    ).fetchall()
    domains = _order({r[0] for r in rows}, F.DOMAINS)
    fig = go.Figure()
    for category in _order({r[1] for r in rows}, F.CATEGORIES):
        pts = [next((r for r in rows if r[0] == d and r[1] == category), None) for d in domains]
        fig.add_trace(
            go.Bar(
                y=domains,
                x=[p[3] if p else 0 for p in pts],
                customdata=[p[2] if p else 0 for p in pts],
                orientation="h",
                name=category,
                marker_color=CATEGORY_COLORS.get(category, UNKNOWN_COLOR),
                legendrank=_rank(category, F.CATEGORIES),
                hovertemplate=f"%{{y}}, {category}: %{{x:.1f}}% (%{{customdata}} turns)<extra></extra>",
            )
        )
    fig.update_layout(barmode="stack")
    fig.update_xaxes(title_text="share of the domain's turns (%)", range=[0, 100])
    fig.update_yaxes(title_text="domain", autorange="reversed")
    _layout(fig, "Turn categories by domain", max(PLOT_PX, 120 + 40 * len(domains)))
    return fig if rows else _no_data(fig)


def cluster_sizes(con: duckdb.DuckDBPyConnection) -> go.Figure:
    """Clusters by size, each in its representative's domain with all its members, as the
    `stats` dedup table counts them: a cluster of exact copies in two domains was drawn
    as one per domain, the dropped copy a cluster of 1, "no duplicate" (hunt 12-06)."""
    rows = con.execute(
        """SELECT domain, size, count(*) FROM (
             SELECT coalesce(any_value(domain) FILTER (WHERE representative), any_value(domain))
                    AS domain, cluster_id, count(*) AS size
             FROM clusters GROUP BY cluster_id)
           GROUP BY ALL ORDER BY ALL"""
    ).fetchall()
    fig = go.Figure()
    for domain in _order({r[0] for r in rows}, F.DOMAINS):
        pts = [(s, n) for d, s, n in rows if d == domain]
        fig.add_trace(
            go.Bar(
                x=[s for s, _ in pts],
                y=[n for _, n in pts],
                name=domain,
                marker_color=DOMAIN_COLORS.get(domain, UNKNOWN_COLOR),
                legendrank=_rank(domain, F.DOMAINS),
                hovertemplate=f"{domain}: %{{y}} cluster(s) of %{{x}} trajectories<extra></extra>",
            )
        )
    fig.update_layout(barmode="group")
    fig.update_xaxes(title_text="cluster size (trajectories per dedup cluster)", dtick=1)
    fig.update_yaxes(title_text="clusters (log scale)", type="log", dtick=1)
    _layout(fig, "Dedup cluster sizes (1 = no duplicate)", PLOT_PX)
    return fig if rows else _no_data(fig)


def throughput(con: duckdb.DuckDBPyConnection) -> go.Figure:
    """Trajectories recorded per time bucket, at their dates (gaps stay gaps)."""
    shown = f"epoch(started_at) BETWEEN {EPOCH_RANGE[0]} AND {EPOCH_RANGE[1]}"
    span = con.execute(
        f"""SELECT epoch(max(started_at) FILTER ({shown})) - epoch(min(started_at) FILTER ({shown})),
                   count(*) FILTER (started_at IS NULL),
                   count(*) FILTER (started_at IS NOT NULL AND NOT ({shown}))
            FROM raw_trajectories"""
    ).fetchone()
    unit, seconds = next((b for b in BUCKETS if (span[0] or 0) / b[1] <= MAX_BUCKETS), BUCKETS[-1])
    o = BUCKET_ORIGIN
    rows = con.execute(
        f"""SELECT domain, floor((epoch(started_at) - {o}) / {seconds}) * {seconds} + {o} AS t, count(*)
            FROM raw_trajectories WHERE {shown} GROUP BY ALL ORDER BY ALL"""
    ).fetchall()
    fig = go.Figure()
    for domain in _order({r[0] for r in rows}, F.DOMAINS):
        pts = [(t, n) for d, t, n in rows if d == domain]
        fig.add_trace(
            go.Bar(
                x=[_iso(t + seconds / 2) for t, _ in pts],
                y=[n for _, n in pts],
                width=seconds * 1000 * 0.9,
                name=domain,
                customdata=[_iso(t) for t, _ in pts],
                marker_color=DOMAIN_COLORS.get(domain, UNKNOWN_COLOR),
                legendrank=_rank(domain, F.DOMAINS),
                hovertemplate=f"{domain}: %{{y}} trajectories in the {unit} from %{{customdata}}<extra></extra>",
            )
        )
    fig.update_layout(barmode="stack")
    fig.update_xaxes(title_text="start time (UTC)", type="date")
    fig.update_yaxes(title_text=f"trajectories per {unit}")
    missing = f"; {span[1]} without a start time not shown" if span[1] else ""
    missing += f"; {span[2]} dated outside years 1-9999 UTC not shown" if span[2] else ""
    _layout(fig, f"Trajectories recorded over time (raw){missing}", PLOT_PX)
    if rows:
        return fig
    if span[1] or span[2]:  # raw data, none of it with a start time it can draw
        why = [f"{span[1]} have no start time"] if span[1] else []
        why += [f"{span[2]} are dated outside years 1-9999 UTC"] if span[2] else []
        return _no_data(fig, f"no trajectory to draw: {' and '.join(why)}")
    return _no_data(fig)


EPOCH_RANGE = (-62135596800, 253402300799)
"""Epoch seconds of 0001-01-01 and 9999-12-31 23:59:59 UTC: what a Python datetime holds
(another writer's shard may hold year 10000, which DuckDB reads and Python cannot)."""


def _iso(epoch_s: float) -> str:
    """A bucket's time; a bucket's middle past the last second Python holds is that second."""
    epoch_s = min(max(epoch_s, EPOCH_RANGE[0]), EPOCH_RANGE[1])
    return datetime.fromtimestamp(epoch_s, timezone.utc).strftime("%Y-%m-%d %H:%M:%S")


def _share(value: str, x_title: str, title: str) -> tuple[str, Callable]:
    """A word-share statistic (0..1) per domain, stacked by category."""
    return (
        "Stacked by category; each domain has its own y scale.",
        lambda con: histogram(
            con, value=value, source="turns", lo=0, hi=1, bins=20,
            x_title=x_title, title=f"{title} per domain",
        ),
    )  # fmt: skip


PLOTS: dict[str, tuple[str, Callable[[duckdb.DuckDBPyConnection], go.Figure]]] = {
    "categories": (
        "Shares of the turn categories (report Table 3) per domain.",
        category_shares,
    ),
    "nov": _share("nov", "Nov (share of observation words not in the action)", "Novelty (Nov)"),
    "ol": _share("ol", "OL (share of action words in the observation)", "Overlap (OL)"),
    "r": (
        "R = observation characters / action characters, on a log scale; turns with R = 0 are left out.",
        lambda con: histogram(
            con,
            value="log10(r)",
            source="turns WHERE r > 0",
            lo=-2,
            hi=4,
            bins=24,
            x_title="R (observation chars / action chars, log scale)",
            log_ticks=True,
            title="Length ratio (R) per domain",
        ),
    ),
    "obs_len": (
        "Raw turns (before filters), so domains that processing dropped still show.",
        lambda con: histogram(
            con,
            value="log10(obs_chars)",
            source="raw_turns WHERE obs_chars > 0",
            lo=0,
            hi=6,
            bins=24,
            x_title="observation length (characters, log scale)",
            log_ticks=True,
            title="Observation length per domain (raw)",
            by_category=False,
        ),
    ),
    "clusters": (
        "Dedup clusters per size and domain, counted over every trajectory that reached dedup.",
        cluster_sizes,
    ),
    "throughput": (
        "Bars sit at their dates: a gap in collection is a gap on the axis.",
        throughput,
    ),
}
"""name -> (note under the plot, figure builder), in page order."""
RAW_PLOTS = frozenset({"obs_len", "throughput"})
"""The plots of the raw data (the others draw the processed data)."""
