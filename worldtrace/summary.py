"""`worldtrace stats` and `worldtrace explain`: what is in the store, and why a turn
counts in the loss or not."""

from __future__ import annotations

import contextlib
import dataclasses
import json
from dataclasses import dataclass
from typing import Any

import duckdb
from rich.console import Console
from rich.table import Table

from worldtrace.freshness import next_step
from worldtrace.output import make_table, print_table, printable
from worldtrace.pipelines.mask import keep_turn
from worldtrace.schemas import Store
from worldtrace.schemas import fields as F
from worldtrace.schemas.records import Trajectory
from worldtrace.schemas.spec import fields_of


@dataclass(frozen=True)
class Section:
    """One table of `worldtrace stats`."""

    key: str
    """Its key in `stats --json` (`sections.KEY`: a list of row objects)."""
    title: str
    sql: str
    empty: str = "no data yet"
    """What `stats` prints when the query has no row (for a table of the processed data:
    when the store holds no trajectory at all)."""
    none: str | None = None
    """A table of the processed data: what it prints when `process` ran and the table
    has no row (None: `empty`). Before `process`, `UNPROCESSED`."""
    raw: bool = False
    """A table of the raw data only: empty beside processed data, its shards are gone or
    unreadable (`RAW_UNREAD`), not "no data yet"."""
    raw_column: str | None = None
    """A table of raw and processed data side by side: its column counting raw rows.
    When no row has any (the raw views read nothing), the table is printed and says
    below it why, as an empty table of the raw data says it (`note`)."""
    shown: int | None = None
    """Rows the table prints (`stats`, the report); the others are summed in one last
    row and named with where to read them (`rest`), never left out in silence.
    `stats --json` lists every row."""
    tally: str = "count"
    """With `shown`: the column the last row sums over the rows not shown."""
    rest: str = ""
    """With `shown`: the command that lists every row in detail."""
    rows_are: str = "rows"
    """With `shown`: what a row is, in the last row's label (`5 more reasons`)."""

    def message(self, state: str | None = None) -> str:
        """What to print for no row, the store being `state` (`store_state`): a table of
        the processed data says whether `process` has run; None: `empty`."""
        if self.raw and state in PROCESSED:
            return RAW_UNREAD
        if self.raw and state in NO_RAW_SAID:
            return NO_RAW_SAID[state]
        if self.none is None or state in (None, "empty"):
            return self.empty
        return UNPROCESSED if state == "raw" else self.none

    current_column: str | None = None
    """A table of exports: its column saying whether each was made from the tables the
    processed data holds now (`exports.current_run`); `note` names those that were not."""

    def note(self, columns: list[str], rows: list[tuple], state: str | None) -> str | None:
        """What the table says below its rows (None: nothing): exports made from an
        earlier processing run (`current_column`), or for a table of raw and processed
        data, that the raw views read nothing (every row's raw count is 0: shards gone,
        unread, or the data was processed from files outside the store)."""
        if self.current_column is not None:
            return _older_exports(columns, rows, self.current_column)
        if self.raw_column is None or not rows or state not in (*PROCESSED, *NO_RAW_SAID):
            return None
        i = columns.index(self.raw_column)
        if any(r[i] for r in rows):
            return RAW_BESIDE_SAID if state == RAW_BESIDE else None
        return RAW_UNREAD if state in PROCESSED else NO_RAW_SAID[state]


def _older_exports(columns: list[str], rows: list[tuple], current: str) -> str | None:
    """The exports of `rows` made from an earlier `process` run than the processed data's
    (its `current` column false), or None: training on one trains on data the store no
    longer holds as it was (another dedup, filters, mask draw)."""
    at, name = columns.index(current), columns.index("name")
    older = [r[name] for r in rows if r[at] is False]
    if not older:
        return None
    shown = ", ".join(older[:5]) + (f" and {len(older) - 5} more" if len(older) > 5 else "")
    return (
        f"{len(older)} of {len(rows)} made from an earlier `worldtrace process` run than the "
        f"processed data now ({shown}): export again to train on it (`SELECT name, "
        "processing_run FROM exports WHERE NOT current_run` lists them)"
    )


UNPROCESSED = "not processed yet: run `worldtrace process`"
"""What a table of the processed data says before `process` ran on raw data."""
RAW_UNREAD = (
    "no raw shard read: they are gone or unreadable (any damaged one is named above); "
    "the processed tables still hold what was processed"
)
NO_RAW = "processed_without_raw"
"""A `store_state`: processed data, and no raw shard in the store's raw/."""
RAW_ELSEWHERE = (
    "raw/ holds no shard: the processed data came from files outside the store "
    "(`process --input`); the processed tables hold what was processed"
)
RAW_JSONL = "processed_from_raw_jsonl"
"""A `store_state`: processed data, and raw/ holds JSONL records but no Parquet shard."""
RAW_JSONL_SAID = (
    "raw/ holds JSONL records and no Parquet shard: `process` reads both, the raw views "
    "read shards only (for shards instead, move the JSONL files out of raw/ and "
    "`worldtrace import` them); the processed tables hold what was processed"
)
RAW_BESIDE = "processed_with_raw_jsonl"
"""A `store_state`: processed data, and raw/ holds JSONL records beside its shards."""
RAW_BESIDE_SAID = (
    "raw/ holds JSONL records beside its shards: `process` reads both, the raw views read "
    "shards only, so the raw columns leave those records out and `processed_not_in_raw` "
    "counts them (to count them as raw, move the JSONL files out of raw/ and `worldtrace "
    "import` them)"
)
PROCESSED = ("processed", RAW_BESIDE)
"""The `store_state`s of processed data whose raw views read shards."""
NO_RAW_SAID = {NO_RAW: RAW_ELSEWHERE, RAW_JSONL: RAW_JSONL_SAID}
"""What a table of the raw data says, empty beside processed data, by `store_state`."""
KEPT_NONE = "none: the processed data holds no trajectory (every one was filtered or rejected)"


def store_state(store: Store) -> str:
    """`empty` (no trajectory), `raw` (raw data, nothing processed), `processed`,
    `NO_RAW` (processed from files outside the store: its raw tables are empty, and
    nothing is gone), `RAW_JSONL` (processed; raw/ holds only JSONL records, which the
    raw views do not read) or `RAW_BESIDE` (processed; raw/ holds shards and JSONL
    records: the raw views read the shards alone)."""
    from worldtrace.freshness import missing_processed, raw_inputs
    from worldtrace.schemas.store import shard_files

    shards = set(shard_files(store.raw))
    inputs = raw_inputs(store)
    raw = bool(shards or inputs)
    if missing_processed(store) is None:
        if shards:
            return RAW_BESIDE if any(p not in shards for p in inputs) else "processed"
        return RAW_JSONL if raw else NO_RAW
    return "raw" if raw else "empty"


def _map_paths(cls: type, path: str = "") -> list[str]:
    """Paths of the map fields of records of `cls` as validation names them, list
    indexes written `[N]` (`metadata`): below one, a path names a key the data chose."""
    out = []
    for f in fields_of(cls):
        here = f"{path}.{f.name}" if path else f.name
        if f.kind == "map":
            out.append(here)
        elif f.kind == "struct":
            out += _map_paths(f.hint, here)
        elif f.kind == "list" and dataclasses.is_dataclass(f.item):
            out += _map_paths(f.item, f"{here}[N]")
    return out


def _reason_kind() -> str:
    """SQL of a `rejects` row's kind of reason, one `filters and rejects` row each: a
    filter's or a turn filter's name (what its reason says before `:`), and for a record
    validation refused, the field path of its first problem with list indexes as `[N]`
    and map keys as `KEY` (`turns[N].index`, `metadata.KEY`): a producer's one mistake
    made in many records is one row, not one per turn index or key."""
    path = r"regexp_replace(reason, '\[[0-9]+\]', '[N]', 'g')"
    keys = " ".join(
        f"WHEN starts_with({path}, '{m}.') THEN '{m}.KEY'" for m in _map_paths(Trajectory)
    )
    return (
        f"CASE WHEN stage <> 'validate' THEN split_part(reason, ':', 1) {keys} "
        f"ELSE split_part({path}, ':', 1) END"
    )


SOURCE_KIND = (
    f"CASE WHEN source_kind = '{F.SYNTHETIC}' OR environment.backend = '{F.SYNTHETIC}' "
    f"THEN '{F.SYNTHETIC}' ELSE source_kind END"
)
"""SQL of a trajectory's source kind as `stats` counts it: `synthetic` for a generated
record in either form, the older one saying `collector` (`records.is_synthetic`,
as export and import count it), never taken for a real collector's data. SQL: `stats`
and `report` run it on the views."""


def _share(part: str, whole: str) -> str:
    """SQL of the share `part` / `whole` (counts) in 4 decimals, or more where 4 would
    round a share that is neither none nor all to 0.0 or 1.0: two significant digits of
    its distance from them (1 turn cut in 54,990 is 1.8e-05; it was `0.0`, "none")."""
    return (
        f"CASE WHEN {part} IN (0, {whole}) THEN {part} / {whole} ELSE round({part} / {whole}, "
        f"greatest(4, 1 - floor(log10(least({part}, {whole} - {part}) / {whole}))::INT)) END"
    )


REJECT_REASONS = "SELECT stage, reason, count(*) AS n FROM rejects GROUP BY ALL ORDER BY n DESC"
"""The query `stats` names for every reason in detail (its table groups them)."""

STATS_SECTIONS = (
    # processed per source, not per domain: a source whose every trajectory was filtered
    # shows 0 beside the others of its domain; a source only `process --input` read
    # (files outside the store) has its row, raw 0. `processed` counts every processed
    # trajectory of the source, `processed_not_in_raw` those whose raw record (its id or
    # raw id) the raw views do not hold: read from outside the store or from raw shards
    # since gone, so processed can be above raw only by that many
    Section("sources", "trajectories by domain and source", f"""
        WITH r AS (SELECT domain, {SOURCE_KIND} AS source_kind,
                          coalesce(origin_format, source_name) AS source,
                          count(*) AS raw, sum(num_turns) AS raw_turns
                   FROM raw_trajectories GROUP BY ALL),
             ids AS (SELECT DISTINCT trajectory_id FROM raw_trajectories),
             p AS (SELECT t.domain, {SOURCE_KIND} AS source_kind,
                          coalesce(t.origin_format, t.source_name) AS source, count(*) AS n,
                          count(*) FILTER (WHERE a.trajectory_id IS NULL
                                           AND b.trajectory_id IS NULL) AS elsewhere
                   FROM trajectories t
                   LEFT JOIN ids a ON a.trajectory_id = t.trajectory_id
                   LEFT JOIN ids b
                          ON b.trajectory_id = map_extract(t.metadata, 'raw_trajectory_id')[1]
                   GROUP BY ALL)
        SELECT coalesce(r.domain, p.domain) AS domain,
               coalesce(r.source_kind, p.source_kind) AS source_kind,
               coalesce(r.source, p.source) AS source,
               coalesce(r.raw, 0) AS raw, coalesce(r.raw_turns, 0) AS raw_turns,
               coalesce(p.n, 0) AS processed, coalesce(p.elsewhere, 0) AS processed_not_in_raw
        FROM r FULL JOIN p ON p.domain = r.domain
             AND p.source_kind IS NOT DISTINCT FROM r.source_kind
             AND p.source IS NOT DISTINCT FROM r.source
        ORDER BY ALL""", raw=True, raw_column="raw"),
    # the count of the turns an output cap cut beside their share (`_share`)
    Section("turn_lengths", "turn lengths (characters)", f"""
        SELECT *, {_share("truncated_turns", "turns")} AS truncated FROM (
            SELECT domain, count(*) AS turns,
                   round(avg(action_chars), 1) AS action_mean,
                   quantile_disc(obs_chars, 0.5) AS obs_p50, quantile_disc(obs_chars, 0.9) AS obs_p90,
                   max(obs_chars) AS obs_max, count(*) FILTER (WHERE truncated) AS truncated_turns
            FROM raw_turns GROUP BY domain)
        ORDER BY domain""", raw=True),
    Section("turns_per_trajectory", "turns per trajectory", """
        SELECT domain, count(*) AS trajectories, round(avg(num_turns), 2) AS mean,
               quantile_disc(num_turns, 0.5) AS p50, max(num_turns) AS max
        FROM trajectories GROUP BY domain ORDER BY domain""", none=KEPT_NONE),
    Section("categories", "category shares and effective keep by domain", """
        SELECT domain, category, count(*) AS turns,
               round(count(*) / sum(count(*)) OVER (PARTITION BY domain), 4) AS share,
               round(sum(keep * obs_chars) / nullif(sum(obs_chars), 0), 4) AS effective_keep
        FROM turns GROUP BY domain, category ORDER BY domain, turns DESC""", none=KEPT_NONE),
    Section("effective_keep", "effective keep by domain", """
        SELECT domain, count(*) AS turns,
               round(sum(keep * obs_chars) / nullif(sum(obs_chars), 0), 4) AS effective_keep_chars,
               round(avg(CASE WHEN in_loss THEN 1 ELSE 0 END), 4) AS turns_in_loss
        FROM turns GROUP BY domain ORDER BY domain""", none=KEPT_NONE),
    # a cluster counts in its representative's domain: exact copies in two domains share
    # one (the content id leaves the domain out); counted in the domain of each of its
    # members, the domains' clusters summed to more than there are, and a domain showed
    # more clusters than it kept trajectories (28 kept, 29 clusters)
    Section("dedup", "dedup", """
        SELECT domain, count(*) AS trajectories,
               sum(CASE WHEN role = 'exact' THEN 1 ELSE 0 END) AS exact_dups,
               sum(CASE WHEN role = 'near' THEN 1 ELSE 0 END) AS near_dups,
               round(avg(CASE WHEN representative THEN 0 ELSE 1 END), 4) AS dup_rate,
               count(*) FILTER (WHERE representative) AS clusters
        FROM clusters GROUP BY domain ORDER BY domain""", none=KEPT_NONE),
    Section("rejects", "filters and rejects", f"""
        SELECT stage, {_reason_kind()} AS reason, count(*) AS count
        FROM rejects GROUP BY ALL ORDER BY count DESC, stage, reason""",
        none="none: no record was rejected or filtered, no turn removed", shown=20,
        rest=f'worldtrace query "{REJECT_REASONS}"', rows_are="reasons"),
    # issue 18: MCP faults (turn perturbations) and episode conditions share one
    # vocabulary of kinds, so one table counts both; raw beside processed shows what the
    # filters dropped
    Section("perturbations", "perturbations and conditions", """
        WITH r AS (SELECT source, kind, domain, count(*) AS n, sum(turns) AS t
                   FROM raw_perturbations GROUP BY ALL),
             p AS (SELECT source, kind, domain, count(*) AS n, sum(turns) AS t
                   FROM perturbations GROUP BY ALL)
        SELECT source, kind, domain, coalesce(r.n, 0) AS raw_trajectories,
               coalesce(r.t, 0) AS raw_turns, coalesce(p.n, 0) AS processed_trajectories,
               coalesce(p.t, 0) AS processed_turns
        FROM r FULL JOIN p USING (source, kind, domain) ORDER BY source, kind, domain""",
        empty="none recorded (no turn perturbation, no episode condition)"),
    # issue 11: the per-trajectory count of replaced secrets, summed
    Section("redactions", "redactions (secrets replaced by placeholders)", """
        WITH r AS (SELECT domain, count(*) AS n, count(*) FILTER (WHERE redactions > 0) AS hit,
                          coalesce(sum(redactions), 0) AS placeholders
                   FROM raw_trajectories GROUP BY domain),
             p AS (SELECT domain, count(*) FILTER (WHERE redactions > 0) AS hit,
                          coalesce(sum(redactions), 0) AS placeholders
                   FROM trajectories GROUP BY domain)
        SELECT domain, coalesce(r.n, 0) AS raw_trajectories,
               coalesce(r.hit, 0) AS raw_with_redactions,
               coalesce(r.placeholders, 0) AS raw_placeholders,
               coalesce(p.hit, 0) AS processed_with_redactions,
               coalesce(p.placeholders, 0) AS processed_placeholders
        FROM r FULL JOIN p USING (domain)
        WHERE coalesce(r.placeholders, 0) + coalesce(p.placeholders, 0) > 0 ORDER BY domain""",
        empty="none: no secret was replaced"),
    Section("exports", "exports", "SELECT name, format, samples, rows, tokens, loss_tokens, round(loss_tokens / nullif(tokens, 0), 4) AS loss_share, keep_mode, current_run FROM exports ORDER BY name",
        empty="none (`worldtrace export` writes one)", current_column="current_run"),
    Section("jobs", "jobs", """
        SELECT status, count(*) AS jobs, sum(episodes) AS episodes, sum(succeeded) AS succeeded,
               sum(failed) AS failed,
               round(sum(succeeded) / nullif(sum(succeeded) + sum(failed), 0), 4) AS success_rate
        FROM jobs GROUP BY status ORDER BY status""",
        empty="no queued job (`jobs submit`); what `collect` ran is in raw_trajectories by job_id"),
)  # fmt: skip


def _rows(con: duckdb.DuckDBPyConnection, sql: str) -> tuple[list[str], list[tuple]]:
    cur = con.execute(sql)
    return [d[0] for d in cur.description], cur.fetchall()


def result_table(
    cur: duckdb.DuckDBPyConnection, title: str | None = None, max_rows: int | None = None
) -> Table:
    columns = [d[0] for d in cur.description]
    rows = cur.fetchall()
    t = make_table(columns, rows[:max_rows] if max_rows is not None else rows, title)
    if max_rows is not None and len(rows) > max_rows:
        t.caption = f"first {max_rows} rows shown"
    return t


@dataclass(frozen=True)
class Answer:
    """A stats table as `stats` and the report print it."""

    columns: list[str]
    rows: list[tuple]
    """The rows shown: past `Section.shown`, the rest summed in one last row."""
    notes: list[str]
    """Lines said below the table: rows not shown and where to read them, raw data not
    read, exports made from an earlier run (`Section.note`)."""


def answer(s: Section, columns: list[str], rows: list[tuple], state: str | None = None) -> Answer:
    """The table `s` as printed, from every row of its query (`state`: the store's)."""
    notes = [note] if (note := s.note(columns, rows, state)) else []
    if s.shown is not None and len(rows) > s.shown + 1:  # one row is shown, not summed
        left = rows[s.shown :]
        t = columns.index(s.tally)
        total = sum(r[t] or 0 for r in left)
        more: list[Any] = [None] * len(columns)
        more[max(t - 1, 0)], more[t] = f"{len(left)} more {s.rows_are}", total
        rows = [*rows[: s.shown], tuple(more)]
        notes.append(
            f"{s.shown} of {s.shown + len(left)} {s.rows_are} shown, the most common first; "
            f"the last row sums the other {len(left)} ({s.tally} {total}); in full: {s.rest}"
        )
    return Answer(columns, rows, notes)


def print_stats(
    con: duckdb.DuckDBPyConnection, console: Console | None = None, store: Store | None = None
) -> None:
    """Every stats table; none cuts an id, on a terminal or piped. A table with no row
    is one line saying why; with `store`, those of the processed data say whether
    `process` has run (a table that is empty after it says what is not there)."""
    console = console or Console()
    state = store_state(store) if store is not None else None
    # every query first: a shard that fails one (`views.read_failure`) ends the command
    # with its one line, not after half the tables
    answers = [(s, *_rows(con, s.sql)) for s in STATS_SECTIONS]
    for s, columns, rows in answers:
        if rows:
            shown = answer(s, columns, rows, state)
            print_table(make_table(shown.columns, shown.rows, s.title), console)
            notes = list(shown.notes)
            if s.key == "jobs" and store is not None and (other := jobs_elsewhere(store)):
                notes.append(f"these are {store.jobs_db}'s; {other}")
            for note in notes:
                console.print(
                    f"{s.title}: {note}", style="dim", markup=False, highlight=False, soft_wrap=True
                )
        else:
            said = s.message(state)
            if s.key == "jobs" and store is not None and _job_store_unread(store):
                said = JOBS_UNREAD  # not "no queued job": it may hold many
            elif s.key == "jobs" and store is not None and (other := jobs_elsewhere(store)):
                said = f"none in {store.jobs_db}; {other}"  # not "no queued job" either
            console.print(
                f"{s.title}: {said}",
                style="dim", markup=False, highlight=False, soft_wrap=True,
            )  # fmt: skip


JOBS_UNREAD = (
    "the job store did not read (the warning above says why and what to do): its jobs are "
    "not counted"
)
"""What the jobs table says when `jobs.db` is left out of the views (damaged, locked)."""


def jobs_elsewhere(store: Store) -> str | None:
    """What the `jobs` table leaves out when `$WORLDTRACE_JOBS` names another job store
    than the store's jobs.db (a PostgreSQL server, another file): the views read jobs.db
    alone, and `stats` said `no queued job` while that store held many. None otherwise."""
    from worldtrace.collectors.jobstore import JOBS_ENV, other_job_store, shown_address

    url = other_job_store(store.jobs_db)
    if url is None:
        return None
    return (
        f"the job store ${JOBS_ENV} names, {shown_address(url)}, is not read here: "
        "`worldtrace jobs list` lists its jobs"
    )


def _job_store_unread(store: Store) -> bool:
    from worldtrace.schemas.views import unreadable_job_store

    return unreadable_job_store(store.jobs_db) is not None


def stats_document(con: duckdb.DuckDBPyConnection, store: Store) -> dict[str, Any]:
    """`stats --json`: `{"store", "notes", "sections": {key: [row objects]}}`; every
    section is present (an empty list when it has no row), keys as in STATS_SECTIONS,
    with every row (a table `stats` prints shortened, `Section.shown`, is whole here)."""
    sections, said = {}, []
    state = store_state(store)
    for s in STATS_SECTIONS:
        columns, rows = _rows(con, s.sql)
        sections[s.key] = [dict(zip(columns, r, strict=True)) for r in rows]
        if note := s.note(columns, rows, state):  # what the raw columns leave out
            said.append(f"{s.key}: {note}")
    note = next_step(store)
    notes = [note, *said] if note else said
    if not sections["jobs"] and _job_store_unread(store):  # not "no job": it may hold many
        notes.append(f"jobs: {JOBS_UNREAD.replace('the warning above', 'the warning on stderr')}")
    elif other := jobs_elsewhere(store):
        notes.append(f"jobs: from {store.jobs_db} only; {other}")
    return {"store": str(store.root), "notes": notes, "sections": sections}


def _said(value: Any) -> str:
    """A value from the data inside a line printed with markup: as text, never markup."""
    from rich.markup import escape

    return escape(printable(str(value or ""), True))


def _excerpt(text: str, n: int = 160) -> str:
    text = text.replace("\n", "⏎")
    return text if len(text) <= n else text[: n - 1] + "…"


MAX_CANDIDATES = 50
"""Candidates listed for an ambiguous id (all are counted)."""
MAX_COPIES = 10
"""Exact copies `explain` lists of a kept trajectory; a last line counts the others and
names the query that lists them all (`explain --json` has every one): a record imported
1,000 times printed 999 lines before its first turn."""


COPY_ORDER = "length(origin_id), origin_id, length(source), source"
"""The order of a kept trajectory's exact copies (`explain`, its `copies`, the query it
names for them): by origin id, then where each was read, the shorter first, so numbered
ones go by number (S2 before S10, `row 9` before `row 10`; as text S1, S10, S100, S101
came before S2)."""


def copies_query(trajectory_id: str) -> str:
    """The query listing every exact copy dedup dropped of the kept `trajectory_id`, in
    `explain`'s order."""
    tid = trajectory_id.replace("'", "''")
    return (
        f"SELECT origin_id, source FROM clusters WHERE trajectory_id = '{tid}' "
        f"AND NOT representative ORDER BY {COPY_ORDER}"
    )


def matches(con: duckdb.DuckDBPyConnection, tid: str) -> list[tuple[Any, ...]]:
    """(trajectory_id, origin_path, origin_index, domain, origin_format, origin_id, job_id,
    episode_id) of the processed trajectories `tid` names (`lookup`)."""
    return lookup(con, tid)[1]


SHOWN_ORIGIN = "coalesce(nullif(origin_format, ''), source_name) || ':' || origin_id"
"""A trajectory's origin as `explain`'s header shows it (`_origin`: `openai:chats:2`), in
SQL: `explain` takes it back (hunt 1207: it printed `origin=openai:chats:2`, then said
`no processed trajectory matches 'openai:chats:2'`)."""
NAMED_BY = {"origin": "origin_id = $p", "shown": f"{SHOWN_ORIGIN} = $p"}
"""How `lookup` named trajectories by their origin, as a condition on a trajectory view."""


def lookup(con: duckdb.DuckDBPyConnection, tid: str) -> tuple[str, list[tuple[Any, ...]]]:
    """How `tid` names processed trajectories, and their rows (`matches`): `id` (an exact
    id, alone), else `origin` (every trajectory whose origin id is `tid`: the same origin
    id comes from many files), else `shown` (those whose `FORMAT:ORIGIN_ID`, as the
    header shows it, is `tid`), else `prefix` (every id or raw id that starts with it).
    A whole id is never read as a prefix: the ids sources give are short and often hex
    (`c1`, `42`), and would name every trajectory whose hash starts with them."""
    cols = CANDIDATE_COLUMNS
    for how, where in (
        ("id", "trajectory_id = $p"),
        *NAMED_BY.items(),
        ("prefix", "starts_with(trajectory_id, $p) "
                   "OR starts_with(coalesce(map_extract(metadata, 'raw_trajectory_id')[1], ''), $p)"),
    ):  # fmt: skip
        rows = con.execute(
            f"SELECT {cols} FROM trajectories WHERE {where} ORDER BY trajectory_id", {"p": tid}
        ).fetchall()
        if rows:
            return how, rows
    return "prefix", []


def _raw_origin(con: duckdb.DuckDBPyConnection, tid: str) -> bool:
    """Whether `tid` is the origin id of a raw record (one processing dropped, when no
    processed trajectory has it)."""
    sql = "SELECT 1 FROM raw_trajectories WHERE origin_id = $p LIMIT 1"
    return con.execute(sql, {"p": tid}).fetchone() is not None


def _dropped_namesakes(
    con: duckdb.DuckDBPyConnection, origin: str, how: str = "origin"
) -> list[dict[str, Any]]:
    """The raw trajectories of origin `origin` (`how` it is named: `NAMED_BY`) no processed
    one stands for (neither by its id nor by the raw id a turn filter's change left in
    its metadata) that a `process` run read: near duplicates and records the filters
    dropped, other contents than the kept ones of that id (an edited record imported
    again beside the old one). `explain ORIGIN_ID` explained the kept one alone and said
    nothing of them (12-06)."""
    named = NAMED_BY[how]  # of the view in whose FROM it stands, `r` outside the subquery
    rows = con.execute(
        f"SELECT DISTINCT {CANDIDATE_COLUMNS} FROM raw_trajectories r WHERE {named} "
        f"AND r.trajectory_id NOT IN (SELECT trajectory_id FROM trajectories WHERE {named} "
        "UNION ALL SELECT map_extract(metadata, 'raw_trajectory_id')[1] FROM trajectories "
        f"WHERE {named} AND map_extract(metadata, 'raw_trajectory_id')[1] IS NOT NULL) "
        "AND (r.trajectory_id IN (SELECT trajectory_id FROM clusters) "
        "OR r.trajectory_id IN (SELECT trajectory_id FROM rejects)) ORDER BY ALL",
        {"p": origin},
    ).fetchall()
    return [dict(zip(CANDIDATE_KEYS, r, strict=True)) for r in rows]


def _unprocessed(con: duckdb.DuckDBPyConnection, tid: str) -> list[dict[str, Any]]:
    """The raw trajectories `tid` names (`CANDIDATE_KEYS`), as `lookup` names processed
    ones: its id, else its origin id, alone or as `FORMAT:ORIGIN_ID`, else the ids that
    start with it."""
    cols = CANDIDATE_COLUMNS
    for where in ("trajectory_id = $p", *NAMED_BY.values(), "starts_with(trajectory_id, $p)"):
        rows = con.execute(
            f"SELECT DISTINCT {cols} FROM raw_trajectories WHERE {where} ORDER BY ALL",
            {"p": tid},
        ).fetchall()
        if rows:
            return [dict(zip(CANDIDATE_KEYS, r, strict=True)) for r in rows]
    return []


def record(con: duckdb.DuckDBPyConnection, match: tuple[Any, ...]) -> dict[str, Any]:
    """The processed trajectory a row of `matches` names: by id and where it was read, as
    two copies of one content are two kept trajectories of one id when dedup is off."""
    cur = con.execute(
        "SELECT * FROM trajectories WHERE trajectory_id = $t AND origin_path IS NOT "
        "DISTINCT FROM $p AND origin_index IS NOT DISTINCT FROM $i",
        {"t": match[0], "p": match[1], "i": match[2]},
    )
    names = [d[0] for d in cur.description]
    return dict(zip(names, cur.fetchone(), strict=True))


def _loads(text: str | None) -> Any:
    """A JSON field of the record, parsed (the text itself if it is not JSON)."""
    if text is None:
        return None
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


CANDIDATE_KEYS = ("trajectory_id", "origin_path", "origin_index", "domain", "origin_format",
                  "origin_id", "job_id", "episode_id")  # fmt: skip
CANDIDATE_COLUMNS = ", ".join(
    "source.episode_id" if k == "episode_id" else k for k in CANDIDATE_KEYS
)
"""`CANDIDATE_KEYS` as a trajectory view's columns (the episode id is in `source`)."""


def explanation(con: duckdb.DuckDBPyConnection, tid: str, seed: int = 0) -> dict[str, Any]:
    """What `explain` says about `tid`, as data (`explain --json` prints it as is).

    `status`: `explained` (one processed trajectory, every turn), `ambiguous` (`matches`:
    every candidate), `dropped` (`rejects` and `duplicates` rows name why it is not in
    the processed data), `unprocessed` (`raw`: the raw trajectories it names, which no
    `process` run read yet) or `not_found`. Texts and ids are whole.
    """
    how, rows = lookup(con, tid)
    # the origin id of a record processing dropped names it, not the ids it starts
    by_origin = how == "origin" or (how == "prefix" and _raw_origin(con, tid))
    if how == "prefix" and by_origin:
        rows = []
    found = [dict(zip(CANDIDATE_KEYS, r, strict=True)) for r in rows]
    if how in NAMED_BY and rows:  # and the others of that origin processing dropped
        found += _dropped_namesakes(con, tid, how)
    if len(found) > 1:  # one id twice too: copies kept with dedup off, told by origin
        return {"query": tid, "status": "ambiguous", "matches": found}
    if not rows:
        # by origin id too, through the raw record it was read from: a filtered one is
        # known to its user by the id its source gave as much as by ours
        rejects = con.execute(
            "SELECT trajectory_id, stage, reason, source_path, record FROM rejects "
            "WHERE starts_with(trajectory_id, $p) OR trajectory_id IN "
            "(SELECT trajectory_id FROM raw_trajectories WHERE origin_id = $p) ORDER BY ALL",
            {"p": tid},
        ).fetchall()
        # by origin id too: an exact duplicate shares its representative's trajectory id,
        # so the id a user has of it is the one its source gave (`oa:7`); the kept one is
        # named by where it came from, as its id alone may be this one's
        dups = con.execute(
            "SELECT d.trajectory_id, d.cluster_id, d.role, d.origin_id, d.source, "
            "k.trajectory_id, k.origin_id, k.source FROM clusters d "
            "LEFT JOIN clusters k ON k.cluster_id = d.cluster_id AND k.representative "
            "WHERE (starts_with(d.trajectory_id, $p) OR d.origin_id = $p) "
            "AND NOT d.representative ORDER BY ALL",
            {"p": tid},
        ).fetchall()
        if not rejects and not dups:
            raw = _unprocessed(con, tid)
            if raw:  # in the raw data, and no `process` run read it
                return {"query": tid, "status": "unprocessed", "raw": raw}
            return {"query": tid, "status": "not_found"}
        keys = ("trajectory_id", "stage", "reason", "source_path", "record")
        found = _with_origins(con, [dict(zip(keys, r, strict=True)) for r in rejects])
        # asked by an origin id: the copies from other origins share the trajectory id
        # (the same content) but are not what was asked about
        found = [r for r in found if (r["trajectory_id"].startswith(tid) and not by_origin)
                 or r.get("origin_id") in (tid, None)]  # fmt: skip
        if by_origin:  # a whole origin id: only its copies, not the ids it starts
            dups = [d for d in dups if d[3] == tid]
        if dups:  # turns removed from these copies, not from the others of the same content
            found = [r for r in found if r["stage"] != "turn_filter" or _where(r) in
                     {d[4] for d in dups}]  # fmt: skip
        dup_keys = ("trajectory_id", "cluster_id", "role", "origin_id", "source")
        kept_keys = ("trajectory_id", "origin_id", "source")
        duplicates = [
            {**dict(zip(dup_keys, d[:5], strict=True)),
             "representative": dict(zip(kept_keys, d[5:], strict=True))}
            for d in dups
        ]  # fmt: skip
        return {"query": tid, "status": "dropped", "rejects": found, "duplicates": duplicates}
    rec = record(con, rows[0])
    raw_id = (dict(rec["metadata"] or {})).get("raw_trajectory_id")
    # where the kept record was read, and the exact copies of it dedup dropped
    members = con.execute(
        "SELECT representative, origin_id, source FROM clusters "
        f"WHERE trajectory_id = $t ORDER BY {COPY_ORDER}",
        {"t": rec["trajectory_id"]},
    ).fetchall()
    own = {m[2] for m in members if m[0]}
    # turns the filters removed keep the raw id: the kept record's id follows its content;
    # those of its copies (the same raw id, another file) are theirs
    removed = [
        r
        for r in con.execute(
            "SELECT record, reason, source_path FROM rejects "
            "WHERE trajectory_id = $r AND stage = 'turn_filter' ORDER BY ALL",
            {"r": raw_id or ""},
        ).fetchall()
        if not own or _where({"record": r[0], "source_path": r[2]}) in own
    ]
    turns = []
    for turn in rec["turns"]:
        keep = turn["keep"]
        turns.append(
            {
                "index": turn["index"],
                "category": turn["category"],
                "keep": keep,
                "in_loss": keep is not None
                and keep_turn(rec["trajectory_id"], turn["index"], seed, keep),
                "rule": turn["rule"],
                "stats": turn["stats"],
                "perturbation": _loads(turn.get("perturbation")),
                "action": turn["action"]["text"],
                "observation": turn["observation"]["text"],
            }
        )
    return {
        "query": tid,
        "status": "explained",
        "trajectory_id": rec["trajectory_id"],
        "domain": rec["domain"],
        "num_turns": rec["num_turns"],
        "origin_format": rec["origin_format"],
        "source_name": rec["source_name"],
        "origin_id": rec["origin_id"],
        "files": [
            {"path": r[1], "index": r[2], "place": origin_place(r[1], r[2], r[4])}
            for r in rows
            if r[1]
        ],
        "cluster_id": (rec["dedup"] or {}).get("cluster_id"),
        "conditions": _loads(rec.get("conditions")),
        "redactions": rec.get("redactions"),
        "raw_trajectory_id": raw_id,
        "removed_turns": [
            dict(zip(("record", "reason", "source_path"), r, strict=True)) for r in removed
        ],
        "copies": [{"origin_id": m[1], "source": m[2]} for m in members if not m[0]],
        "seed": seed,
        "keep_mode": "turn",
        "turns": turns,
    }


def _with_origins(
    con: duckdb.DuckDBPyConnection, rejects: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """`rejects` rows with the origin (`origin_id`, `origin_path`, `origin_index`,
    `origin_format`; None
    when unknown) of the raw record each is about, read from its raw shard: the file a
    user imported is what they know it by, not our shard."""
    paths = sorted({r["source_path"] for r in rejects if r["record"].startswith("row ")})
    origins: dict[tuple[str, str], tuple] = {}
    with contextlib.suppress(duckdb.Error):  # a shard gone or damaged since: views name it
        if paths:
            origins = {
                (path, f"row {n}"): tuple(rest)
                for path, n, *rest in con.execute(
                    "SELECT filename, file_row_number, source.origin_id, source.origin_path, "
                    "source.origin_index, source.origin_format FROM read_parquet($f, "
                    "filename = true, "
                    "file_row_number = true, union_by_name = true)",
                    {"f": paths},
                ).fetchall()
            }
    out = []
    for r in rejects:
        origin = origins.get((r["source_path"], r["record"].split("#", 1)[0]), (None,) * 4)
        keys = ("origin_id", "origin_path", "origin_index", "origin_format")
        out.append({**r, **dict(zip(keys, origin, strict=True))})
    return out


def _where(reject: dict[str, Any]) -> str:
    """The record a `rejects` row is about, as `clusters.source` names it (`FILE:row N`)."""
    return f"{reject['source_path']}:{reject['record'].split('#', 1)[0]}"


def origin_place(path: str, index: int | None, fmt: str | None) -> str:
    """Where a record is in its file, as `import` names it: `FILE:line N` (1-based) for a
    record of a JSONL file, read line by line, else `FILE:record N` (`source.origin_index`:
    its position in a JSON list, a session's conversation). Never `FILE:N`, which every
    reader and editor takes for a line. Every format but the session ones reads a JSONL
    file a record a line, at `origin_index` = line - 1: the record formats, and
    worldtrace's own records, which keep the `origin_format` they carry (until 2026-12-06
    they were named `record N` for that format, 0-based, beside `import`'s `line N + 1`)."""
    if index is None:
        return path
    if path.lower().endswith(F.LINE_SUFFIXES) and fmt not in F.SESSION_FORMATS:
        return f"{path}:line {index + 1}"
    return f"{path}:record {index}"


def _print_candidates(doc: dict[str, Any], console: Console) -> None:
    rows = doc["matches"]
    console.print(
        printable(f"{doc['query']!r} matches {len(rows)} trajectories; give one of these ids:"),
        markup=False,
        highlight=False,
    )
    _print_trajectories(rows, console)


def trajectory_place(m: dict[str, Any]) -> str:
    """Where a trajectory came from (`CANDIDATE_KEYS`), of what it records: its file and
    index, a collected one's job and episode, else its origin format and id ("" when none
    is known): how `explain` lists candidates and the report names a copy."""
    if m["origin_path"]:
        return origin_place(m["origin_path"], m["origin_index"], m["origin_format"])
    if m["job_id"]:  # collected: the job and episode say where it came from
        return f"job {m['job_id']} episode {m['episode_id']}"
    return _origin(m["origin_format"], m["origin_id"])


def _origin(fmt: str | None, origin_id: str | None) -> str:
    """`FORMAT:ID` of what is known (`terminal`, `oa:7`, `7`), "" for neither."""
    return ":".join(str(x) for x in (fmt, origin_id) if x)


def _print_trajectories(rows: list[dict[str, Any]], console: Console) -> None:
    """One line per trajectory (`CANDIDATE_KEYS`): id, where it came from, domain."""
    for m in rows[:MAX_CANDIDATES]:
        line = "  ".join(
            str(x) for x in (m["trajectory_id"], trajectory_place(m), m["domain"]) if x
        )
        console.print(printable(f"  {line}", True), highlight=False, markup=False, soft_wrap=True)
    if len(rows) > MAX_CANDIDATES:
        console.print(f"  ... {len(rows) - MAX_CANDIDATES} more", highlight=False)


def explain(
    con: duckdb.DuckDBPyConnection, tid: str, seed: int = 0, console: Console | None = None
) -> bool:
    """Print the explanation of `tid`; False when it names no trajectory or several."""
    return print_explanation(explanation(con, tid, seed), console)


def print_explanation(doc: dict[str, Any], console: Console | None = None) -> bool:
    """`explain` for people: a header, then per turn the decision, the rule, the
    statistics and excerpts; ids and paths are never wrapped."""
    console = console or Console()

    def say(text: str, markup: bool = True) -> None:
        """A line: data (`markup=False`) is printed as text, its control characters
        escaped; a marked-up line escapes its data where it is put in (`_said`)."""
        text = text if markup else printable(text, True)
        console.print(text, highlight=False, soft_wrap=True, markup=markup)

    tid = doc["query"]
    if doc["status"] == "ambiguous":
        _print_candidates(doc, console)
        return False
    if doc["status"] in ("not_found", "unprocessed"):
        say(f"no processed trajectory matches {tid!r} (an id, id prefix, raw id or origin id)",
            markup=False)  # fmt: skip
        raw = doc.get("raw") or []
        if raw:
            what = "a raw trajectory" if len(raw) == 1 else f"{len(raw)} raw trajectories"
            them = "it" if len(raw) == 1 else "them"
            say(f"{tid!r} names {what} not processed yet: run `worldtrace process` to include "
                f"{them}", markup=False)  # fmt: skip
            _print_trajectories(raw, console)
        return False
    if doc["status"] == "dropped":
        for r in doc["rejects"]:
            what = "a turn removed" if r["stage"] == "turn_filter" else "dropped"
            origin = (f"{origin_place(r['origin_path'], r['origin_index'], r['origin_format'])}, "
                      if r.get("origin_path") else "")  # fmt: skip
            say(f"{r['trajectory_id']}: {what} by {r['stage']}: {r['reason']} "
                f"({origin}{r['source_path']}:{r['record']})", markup=False)  # fmt: skip
        for d in doc["duplicates"]:
            k = d["representative"]  # an exact copy has its id: said, and told by origin
            same = ", the same id," if k["trajectory_id"] == d["trajectory_id"] else ""
            whence = ", ".join(str(x) for x in (d["origin_id"], d["source"]) if x)
            kept = (f"{k['origin_id']} ({k['source']})" if k["origin_id"] and k["source"]
                    else k["origin_id"] or k["source"])  # fmt: skip
            say(f"{d['trajectory_id']}{f' ({whence})' if whence else ''}: {d['role']} "
                f"duplicate in cluster {d['cluster_id']}, not kept; the kept one is "
                f"{k['trajectory_id']}{same}{f' from {kept}' if kept else ''}",
                markup=False)  # fmt: skip
        return True
    conditions = doc["conditions"]
    kinds = (
        ",".join(str(c.get("kind") if isinstance(c, dict) else c) for c in conditions)
        if isinstance(conditions, list)
        else None
    )
    origin = _origin(doc["origin_format"] or doc["source_name"], doc["origin_id"])
    say(
        f"[bold]{doc['trajectory_id']}[/] domain={doc['domain']} turns={doc['num_turns']} "
        + (f"origin={_said(origin)} " if origin else "")
        + f"cluster={doc['cluster_id']}"
        + (f" conditions={kinds}" if kinds else "")
        + (f" redactions={doc['redactions']}" if doc["redactions"] else "")
    )
    for f in doc["files"]:  # the same content can come from several files
        say(f"  from {f['place']}", markup=False)
    for c in doc["copies"][:MAX_COPIES]:
        copy = f"{c['origin_id']} ({c['source']})" if c["origin_id"] else c["source"]
        say(f"  exact copy, not kept: {copy}", markup=False)
    if len(doc["copies"]) > MAX_COPIES:
        say(f"  ... and {len(doc['copies']) - MAX_COPIES} more exact copies, not kept (all: "
            f"worldtrace query \"{copies_query(doc['trajectory_id'])}\")", markup=False)  # fmt: skip
    for r in doc["removed_turns"]:  # indexes below are the kept turns', renumbered
        where = f"{r['source_path']}:{r['record']}" if r.get("source_path") else r["record"]
        say(f"  removed before processing: {where} by turn_filter: {r['reason']} "
            f"(raw id {doc['raw_trajectory_id']})", markup=False)  # fmt: skip
    for turn in doc["turns"]:
        keep = turn["keep"]
        say(
            f"[bold]turn {turn['index']}[/]  category={turn['category']}  "
            f"keep={'-' if keep is None else f'{keep:.2f}'}  "
            f"in loss={'yes' if turn['in_loss'] else 'no'}"
        )
        say(f"  rule: {turn['rule']}", markup=False)
        if turn["stats"]:
            cs = turn["stats"].get("corpus_surprisal")  # joined in by the views; null without
            say(
                "  stats: OL={ol:.3f} Nov={nov:.3f} Jac={jac:.3f} R={r:.3f} | "
                "byte_entropy={byte_entropy:.2f} zlib_ratio={zlib_ratio:.2f} "
                "cond_novelty={cond_novelty:.2f} corpus_surprisal={cs} bits".format(
                    **turn["stats"], cs="-" if cs is None else f"{cs:.2f}"
                )
            )
        if turn["perturbation"] is not None:
            say(f"  perturbation: {json.dumps(turn['perturbation'])}", markup=False)
        say(f"  action: {_excerpt(turn['action'])}", markup=False)
        say(f"  observation: {_excerpt(turn['observation'])}", markup=False)
    say(
        f"[dim]in loss: keep_mode=turn, seed={doc['seed']} (export --keep-mode/--seed change it)[/]"
    )
    return True
