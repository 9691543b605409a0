"""`worldtrace report`: one self-contained HTML page of plots and tables over a store.

Plots are plotly figures (`report_charts`) with plotly.js embedded once in the page, so
it opens offline and sends no request (about 4.9 MB, nearly all of it plotly.js).
Plotly rather than Vega-Lite through vl-convert: hover values, zoom and date axes come
built in, it is pure Python (vl-convert is a 33 MB native wheel that took 8.6 s to
bundle one page here), and its static SVG output has no hover at all.
"""

from __future__ import annotations

import html
import shlex
from datetime import datetime, timezone
from pathlib import Path

import duckdb

from worldtrace.freshness import next_step
from worldtrace.schemas import Store
from worldtrace.schemas import fields as F

from .report_charts import CATEGORY_COLORS, NO_DATA, PLOTS, RAW_PLOTS, UNKNOWN_COLOR
from .summary import (
    KEPT_NONE,
    NO_RAW_SAID,
    PROCESSED,
    RAW_UNREAD,
    STATS_SECTIONS,
    UNPROCESSED,
    Section,
    answer,
    store_state,
    trajectory_place,
)

TABLES = (
    "trajectories by domain and source",
    "effective keep by domain",
    "dedup",
    "filters and rejects",
    "perturbations and conditions",
    "redactions (secrets replaced by placeholders)",
    "exports",
    "jobs",
)
"""Tables of `worldtrace stats` repeated in the report, in page order."""
WORST_PER_CATEGORY = 3
EXCERPT_CHARS = 90
MASKED_BELOW = 0.5
"""A category whose mean keep is below this is 'masked': its worst turns are the most
novel ones (information the loss drops); otherwise the least novel turns in the loss."""

WORST_SQL = """
WITH cats AS (SELECT category, avg(keep) < {masked} AS masked FROM turns GROUP BY category),
ranked AS (
  SELECT u.*, c.masked, row_number() OVER (
      PARTITION BY u.category
      ORDER BY CASE WHEN c.masked THEN -u.nov ELSE u.cond_novelty END NULLS LAST,
               CASE WHEN c.masked THEN -u.cond_novelty ELSE u.nov END NULLS LAST,
               u.trajectory_id, u.origin_id, u.domain, u.turn_index) AS rk
  FROM (SELECT DISTINCT trajectory_id, origin_id, domain, turn_index, category, keep, in_loss,
               nov, ol, r, cond_novelty FROM turns) u
  JOIN cats c USING (category)
  WHERE c.masked OR u.in_loss),
top AS (SELECT * FROM ranked WHERE rk <= {n}),
copies AS (
  SELECT r.category, r.rk,
         list(list_filter(t.turns, lambda x: x.index = r.turn_index)[1]
              ORDER BY t.dedup.cluster_id)[1] AS turn,
         list({{'origin_path': t.origin_path, 'origin_index': t.origin_index,
                'origin_format': t.origin_format, 'origin_id': t.origin_id,
                'job_id': t.job_id, 'episode_id': t.source.episode_id}}
              ORDER BY t.dedup.cluster_id) AS copies
  FROM top r
  JOIN trajectories t ON t.trajectory_id = r.trajectory_id AND t.domain = r.domain
       AND t.origin_id IS NOT DISTINCT FROM r.origin_id
  GROUP BY r.category, r.rk),
names AS MATERIALIZED (SELECT trajectory_id, origin_id FROM trajectories),
ids AS (SELECT trajectory_id, count(*) AS n FROM names GROUP BY ALL),
origins AS (SELECT origin_id, count(*) AS n FROM names WHERE origin_id IS NOT NULL GROUP BY ALL)
SELECT r.category, r.masked, r.domain, r.trajectory_id, r.turn_index, r.nov, r.ol, r.r,
       r.cond_novelty, r.keep, r.in_loss, c.turn,
       {{'trajectory_id': r.trajectory_id, 'origin_id': r.origin_id, 'same_id': i.n,
         'same_origin': o.n, 'origin_is_id': r.origin_id IN (SELECT trajectory_id FROM ids),
         'copies': c.copies}} AS whence
FROM top r
JOIN copies c USING (category, rk)
JOIN ids i ON i.trajectory_id = r.trajectory_id
LEFT JOIN origins o ON o.origin_id = r.origin_id
ORDER BY r.category, r.rk
"""
"""Per category the turns most worth a look, each one row with the processed trajectories
it is a turn of (`whence.copies`, by cluster). With `dedup.exact=false` exact copies kept
apart share an id: a `turns` row's trajectory is the one of its id, origin id and domain
(the view has no cluster column; ranking the trajectories' own turns, which carry it,
took twice as long on 20k), and copies that share those too have the same turns decided
alike (the same content, domain and draw), so they are one row. Joined by the id alone,
each copy's turn met every trajectory of its id: one turn listed two and four times,
under an `explain ID` that matched two. `whence` also says which `explain` argument names
the trajectory alone (`explain_command`)."""


def explain_command(whence: dict, store: str) -> tuple[str | None, str]:
    """(the `worldtrace explain` command that names the turn's trajectory alone, or None;
    why none does). Its id, unless exact copies kept apart share it (`dedup.exact=false`):
    then its origin id, which `explain` takes when no trajectory has it for an id and it is
    this one's alone; else nothing `explain` accepts picks one of the copies, and the line
    says so, with where the copies of the row came from, instead of a command that lists
    them and exits 1."""
    tid, oid = whence["trajectory_id"], whence["origin_id"]
    if whence["same_id"] == 1:
        return f"worldtrace explain {tid}{store}", ""
    if oid and whence["same_origin"] == 1 and not whence["origin_is_id"]:
        arg = shlex.quote(oid)
        return (
            f"worldtrace explain{store} -- {arg}"
            if oid.startswith("-")
            else f"worldtrace explain {arg}{store}"
        ), ""
    shared = (
        "it has no origin id"
        if not oid
        else f"{whence['same_origin']} its origin id {oid}"
        if whence["same_origin"] > 1
        else f"its origin id {oid} is another trajectory's id"
    )
    copies = whence["copies"]
    places = [p for p in map(trajectory_place, copies[:COPIES_NAMED]) if p]
    more = f" and {len(copies) - COPIES_NAMED} more" if copies[COPIES_NAMED:] else ""
    whose = (
        f"; it came from {places[0]}"
        if len(copies) == 1 and places
        else f"; this row stands for {len(copies)} of them, alike (the same origin id and "
        f"domain), from {', '.join(places)}{more}"
        if places
        else ""
    )
    return None, (
        f"no `worldtrace explain` argument names this trajectory alone: "
        f"{whence['same_id']} processed trajectories have its id {tid} (exact copies kept "
        f"apart, dedup.exact=false), and {shared}{whose}"
    )


COPIES_NAMED = 3
"""Copies of one turn named by where they came from in the report's line (the rest counted)."""


def _esc(x: object) -> str:
    """A value in the page: markup escaped, and a control or bidi character of the data
    written as its escape (`\\u202e`), as `explain` and `query` write it: a
    right-to-left override would show the rest of its cell reversed."""
    from worldtrace.output import printable

    return html.escape(printable(str(x), True))


def _excerpt(text: str | None) -> str:
    text = " ".join((text or "").split())
    return text if len(text) <= EXCERPT_CHARS else text[: EXCERPT_CHARS - 1] + "…"


def _num(v: float | None) -> str:
    return "" if v is None else f"{v:.2f}"


def _table(con: duckdb.DuckDBPyConnection, section: Section, state: str | None = None) -> str:
    """One `stats` table, saying what `stats` says when it has no row (`state`: the
    store's, `summary.store_state`)."""
    title = section.title
    cur = con.execute(section.sql)
    cols = [d[0] for d in cur.description]
    rows = cur.fetchall()
    if not rows:
        return f"<h3>{_esc(title)}</h3><p class=empty>{_esc(section.message(state))}</p>"
    shown = answer(section, cols, rows, state)  # as `stats` prints it: rows, then notes
    head = "".join(f"<th>{_esc(c)}</th>" for c in shown.columns)
    body = "".join(
        "<tr>" + "".join(f"<td>{'' if v is None else _esc(v)}</td>" for v in r) + "</tr>"
        for r in shown.rows
    )
    notes = "".join(f"<p class=note>{_esc(n)}</p>" for n in shown.notes)
    return (
        f"<h3>{_esc(title)}</h3><table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
        f"{notes}"
    )


NO_DATA_YET = "no data yet"
EMPTY_STORE = (
    "no data yet: add trajectories with `worldtrace import PATH` or `worldtrace collect "
    "JOB_FILE`, then run `worldtrace process`"
)


def empty_message(state: str | None, raw: bool = False) -> str:
    """What an empty plot says, the store being `state` (`summary.store_state`; None:
    not known): as the `stats` tables do, why it is empty and what to run."""
    if state == "empty":
        return EMPTY_STORE
    if state == "raw" and not raw:
        return UNPROCESSED
    if state in PROCESSED:
        return RAW_UNREAD if raw else KEPT_NONE
    if state in NO_RAW_SAID:
        return NO_RAW_SAID[state] if raw else KEPT_NONE
    return NO_DATA_YET


def _look_closer(whence: dict, store: str) -> str:
    """The report's cell for a turn's trajectory: its `explain` command (one click selects
    it), or why no command names it alone (`explain_command`)."""
    command, why = explain_command(whence, store)
    return (
        f"<code class=cmd>{_esc(command)}</code>"
        if command
        else f"<span class=note>{_esc(why)}</span>"
    )


def worst_turns(
    con: duckdb.DuckDBPyConnection, store_root: Path | None, state: str | None = None
) -> str:
    """Per category, the turns most worth a second look, each with its `explain` command."""
    rows = con.execute(WORST_SQL.format(masked=MASKED_BELOW, n=WORST_PER_CATEGORY)).fetchall()
    if not rows:
        why = "" if state is None else f": {empty_message(state)}"
        return f"<p class=empty>no processed turns yet{_esc(why)}</p>"
    store = f" --store {shlex.quote(str(store_root))}" if store_root else ""
    order = {c: i for i, c in enumerate(F.CATEGORIES)}
    rows.sort(key=lambda r: order.get(r[0], len(order)))  # stable: keeps the rank order
    head = (
        "<tr><th>domain</th><th>turn</th><th>Nov</th><th>OL</th><th>R</th><th>cond. novelty</th>"
        "<th>keep</th><th>in loss</th><th>action</th><th>observation</th>"
        "<th>look closer (click selects the command)</th></tr>"
    )
    body, seen = [], set()
    for cat, masked, domain, _tid, idx, nov, ol, r, cn, keep, in_loss, turn, whence in rows:
        if cat not in seen:
            seen.add(cat)
            why = (
                f"masked (keep {keep:.2f}): the most novel turns, information the loss drops"
                if masked
                else "in the loss: the least new turns (lowest conditional novelty)"
            )
            color = CATEGORY_COLORS.get(cat, UNKNOWN_COLOR)
            body.append(
                f'<tr class=group><th colspan=11><span class=swatch style="background:{color}">'
                f"</span>{_esc(cat)} <span class=why>{why}</span></th></tr>"
            )
        turn = turn or {}
        cells = [domain, idx, _num(nov), _num(ol), _num(r), _num(cn), _num(keep)]
        body.append(
            f'<tr data-category="{_esc(cat)}">'
            + "".join(f"<td>{_esc(c)}</td>" for c in cells)
            + f"<td>{'yes' if in_loss else 'no'}</td>"
            f"<td class=text>{_esc(_excerpt((turn.get('action') or {}).get('text')))}</td>"
            f"<td class=text>{_esc(_excerpt((turn.get('observation') or {}).get('text')))}</td>"
            f"<td>{_look_closer(whence, store)}</td></tr>"
        )
    return f"<table class=worst><thead>{head}</thead><tbody>{''.join(body)}</tbody></table>"


CSS = """
body{font-family:system-ui,sans-serif;margin:24px;color:#222;max-width:1400px}
h1{font-size:22px} h2{font-size:18px;margin-top:28px} h3{font-size:15px}
figure.plot{margin:0 0 16px;border:1px solid #ddd;border-radius:6px;padding:4px 8px;background:#fff}
.note{font-size:12px;color:#555;margin:0 0 4px 8px} .empty{color:#999}
table{border-collapse:collapse;font-size:12px;margin-bottom:12px} td,th{border:1px solid #ddd;padding:3px 6px;text-align:right}
th{background:#f3f3f3} td:first-child{text-align:left} td.text{text-align:left;font-family:monospace;min-width:14em;max-width:26em;overflow-wrap:anywhere}
tr.group th{text-align:left;background:#fafafa;font-size:13px} .why{font-weight:normal;color:#555}
code.cmd{user-select:all;background:#f6f6f6;padding:1px 4px;white-space:nowrap;cursor:copy}
.hint{background:#fff6d6;border:1px solid #e8d48a;border-radius:4px;padding:6px 10px}
.swatch{display:inline-block;width:10px;height:10px;margin-right:4px;border-radius:2px}
"""


def build(
    con: duckdb.DuckDBPyConnection, title: str = "worldtrace report", store_root: Path | None = None
) -> str:
    from plotly.offline import get_plotlyjs

    state = store_state(Store.at(store_root)) if store_root else None
    figures = []
    for name, (note, make) in PLOTS.items():
        fig = make(con)
        fig.update_annotations(
            selector={"name": NO_DATA, "text": NO_DATA_YET},
            text=empty_message(state, raw=name in RAW_PLOTS),
        )
        fig = fig.to_html(
            full_html=False,
            include_plotlyjs=False,
            div_id=f"plot-{name}",
            config={"displaylogo": False, "responsive": True},
        )
        figures.append(
            f'<figure class=plot data-plot="{name}">{fig}<p class=note>{_esc(note)}</p></figure>'
        )
    sections = {s.title: s for s in STATS_SECTIONS}
    tables = "".join(_table(con, sections[t], state) for t in TABLES)
    now = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    where = f"store {_esc(store_root)}, " if store_root else ""
    # the page is read later, away from the terminal's hint: it says it too
    step = next_step(Store.at(store_root)) if store_root else None
    hint = f"<p class=hint>{_esc(step)}</p>" if step else ""
    return (
        f"<!doctype html><html><head><meta charset=utf-8><title>{_esc(title)}</title>"
        f"<style>{CSS}</style><script>{get_plotlyjs()}</script></head>"
        f"<body><h1>{_esc(title)}</h1><p>{where}generated {now}</p>{hint}"
        f"<h2>Plots</h2>{''.join(figures)}"
        f"<h2>Turns to look at</h2><p class=note>Per category, the {WORST_PER_CATEGORY} turns most "
        f"worth a second look; the command shows every turn of the trajectory and why it counts.</p>"
        f"{worst_turns(con, store_root, state)}<h2>Tables</h2>{tables}</body></html>"
    )


def write(
    source: Store | duckdb.DuckDBPyConnection, output: str | Path, store_root: Path | None = None
) -> Path:
    """Write the report of a store (or of an open views connection over `store_root`)
    to `output` as `query -o` writes (`output.write_output`: a device or a pipe is
    written into, a symlink's target replaced; 2026-12-04: `-o /dev/null` replaced the
    device with a plain file)."""
    from worldtrace.output import write_output

    if isinstance(source, Store):
        from worldtrace.schemas.views import connect

        source, store_root = connect(source), source.root
    write_output(str(output), build(source, store_root=store_root).encode())
    return Path(output)
