"""The processing stages as composite PTransforms; per-element logic in private DoFns.

Elements are record dicts in the Arrow row shape, carried as (uid, record) until dedup,
where uid names the record's origin (`file:row N` or `file:line N`) for rejects.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import apache_beam as beam
from apache_beam.metrics import Metrics
from worldtrace.schemas import fields as F
from worldtrace.schemas.hashing import trajectory_id
from worldtrace.schemas.redact import redact_record
from worldtrace.schemas.store import scan_file, scan_units
from worldtrace.schemas.validate import Problem, validate_dict

from . import stats as S
from .filters import FilterConfig, apply_filters
from .mask import MaskPolicy, keep_turn

NS = "worldtrace"
REJECTS = "rejects"


class _Counters(dict):
    """Counters by name, created once per DoFn instance (creating one per element is slow).

    A second pass over the same data counts nothing (`enabled=False`): the first did.
    """

    def __init__(self, enabled: bool = True):
        super().__init__()
        self.enabled = enabled

    def inc(self, name: str, n: int = 1) -> None:
        if not self.enabled:
            return
        c = self.get(name)
        if c is None:
            c = self[name] = Metrics.counter(NS, name)
        c.inc(n)


def reject_row(uid: str, stage: str, reason: str, tid: str | None = None) -> dict[str, Any]:
    path, _, record = uid.rpartition(":")
    if not path:
        path, record = uid, ""
    return {
        "source_path": path,
        "record": record,
        "stage": stage,
        "reason": reason,
        "trajectory_id": tid,
    }


# -- read + validate ------------------------------------------------------------
class _ScanUnit(beam.DoFn):
    def __init__(self, counted: bool = True) -> None:
        self.counters = _Counters(counted)

    def process(self, unit: tuple[str, int | None]) -> Iterator[tuple[str, Any]]:
        path, row_group = unit
        for where, item in scan_file(Path(path), row_group):
            self.counters.inc("read")
            yield where, item


class _Validate(beam.DoFn):
    def __init__(self, counted: bool = True) -> None:
        self.counters = _Counters(counted)

    def process(self, item: tuple[str, Any]):
        where, d = item
        problems = [d] if isinstance(d, Problem) else validate_dict(d, where, check_id=False)
        if problems:
            self.counters.inc("rejected")
            tid = d.get(F.TRAJECTORY_ID) if isinstance(d, dict) else None
            reason = "; ".join(f"{p.field}: {p.message}" for p in problems)
            yield beam.pvalue.TaggedOutput(REJECTS, reject_row(where, "validate", reason, tid))
        else:
            yield where, d


class ReadUnits(beam.PTransform):
    """Units of work (file, row group) -> valid (uid, record); tagged `rejects` rows."""

    def __init__(self, counted: bool = True):
        super().__init__()
        self.counted = counted

    def expand(self, units):
        return (
            units
            | "Scan" >> beam.ParDo(_ScanUnit(self.counted))
            | "Validate" >> beam.ParDo(_Validate(self.counted)).with_outputs(REJECTS, main="valid")
        )


class SplitFiles(beam.PTransform):
    """File paths -> (file, row group) units spread over workers."""

    def expand(self, paths):
        return (
            paths
            | "RowGroups" >> beam.FlatMap(lambda p: scan_units(Path(p)))
            | "Spread" >> beam.Reshuffle()
        )


class ReadTrajectories(beam.PTransform):
    """File paths -> valid (uid, record); tagged `rejects` rows for everything invalid."""

    def expand(self, paths):
        return paths | "Split" >> SplitFiles() | "Units" >> ReadUnits()


# -- normalize ------------------------------------------------------------------
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_MICRO = timedelta(microseconds=1)


def micros(value: Any) -> Any:
    """A timestamp as integer microseconds since the epoch (UTC), the Arrow column's unit.

    Beam's fast coder has no datetime encoding and pickles each one; integers travel
    natively, and Arrow reads them back into the same timestamp column.
    """
    if isinstance(value, datetime):
        aware = value if value.tzinfo else value.replace(tzinfo=timezone.utc)
        return (aware - _EPOCH) // _MICRO
    return value


def normalize(record: dict[str, Any]) -> dict[str, Any]:
    """Non-thinking form: reasoning stripped, tool arguments canonical, CRLF in actions
    folded, metadata as map pairs, timestamps as epoch microseconds, secrets redacted
    (schemas/redact.py). Observation text is otherwise never touched."""
    out = dict(record)
    for k in (F.STARTED_AT, F.ENDED_AT):
        out[k] = micros(out.get(k))
    turns = []
    for t in record[F.TURNS]:
        a = dict(t["action"])
        a["text"] = a["text"].replace("\r\n", "\n")
        if a.get("arguments_json"):
            a["arguments_json"] = json.dumps(
                json.loads(a["arguments_json"]), sort_keys=True, ensure_ascii=False
            )
        turns.append(
            {**t, "action": a, "reasoning": None, "started_at": micros(t.get("started_at"))}
        )
    out[F.TURNS] = turns
    meta = record.get(F.METADATA) or {}
    out[F.METADATA] = sorted(meta.items() if isinstance(meta, dict) else (tuple(p) for p in meta))
    return redact_record(out)  # security: current rules, also on raw data recorded before them


class Normalize(beam.PTransform):
    def expand(self, pcoll):
        return pcoll | "StripReasoning" >> beam.MapTuple(lambda uid, r: (uid, normalize(r)))


# -- filters ----------------------------------------------------------------------
class _Filter(beam.DoFn):
    def __init__(self, cfg: FilterConfig, counted: bool = True):
        self.cfg = cfg
        self.counters = _Counters(counted)

    def process(self, item: tuple[str, dict[str, Any]]):
        uid, record = item
        tid = record.get(F.TRAJECTORY_ID)
        out, removed, reason = apply_filters(record, self.cfg)
        for turn, why in removed:
            self.counters.inc(f"turns_removed.{why}")
            yield beam.pvalue.TaggedOutput(
                REJECTS, reject_row(f"{uid}#turn {turn['index']}", "turn_filter", why, tid)
            )
        if out is None:
            self.counters.inc(f"filtered.{reason.split(':')[0]}")
            self.counters.inc("filtered")
            yield beam.pvalue.TaggedOutput(REJECTS, reject_row(uid, "filter", reason, tid))
            return
        out[F.METADATA] = sorted({**dict(out[F.METADATA]), "raw_trajectory_id": tid or ""}.items())
        out[F.TRAJECTORY_ID] = trajectory_id(out)  # content changed: the id follows
        yield uid, out


class ApplyFilters(beam.PTransform):
    """The report's trajectory and turn filters, each switchable and counted."""

    def __init__(self, cfg: FilterConfig, counted: bool = True):
        super().__init__()
        self.cfg = cfg
        self.counted = counted

    def expand(self, pcoll):
        return pcoll | "Filter" >> beam.ParDo(_Filter(self.cfg, self.counted)).with_outputs(
            REJECTS, main="kept"
        )


# -- statistics and mask ------------------------------------------------------------
TEMPLATE_KEYS = "_template_keys"
"""Transient field: each turn's observation template key, computed once per record."""


def with_template_keys(record: dict[str, Any]) -> dict[str, Any]:
    return {
        **record,
        TEMPLATE_KEYS: [S.template_key(t["observation"]["text"]) for t in record[F.TURNS]],
    }


def turn_stats(
    record: dict[str, Any], templates: dict[str, int], total: int, keys: list[str] | None = None
) -> list[dict[str, float]]:
    """Every statistic of every turn, in turn order."""
    cn = S.ConditionalNovelty()
    out = []
    for n, t in enumerate(record[F.TURNS]):
        a, o = t["action"]["text"], t["observation"]["text"]
        ob = o.encode()
        deflated = S.deflated_size(ob) if ob else 0
        key = keys[n] if keys is not None else S.template_key(o)
        rs = S.report_stats(a, o)
        out.append(
            {
                "ol": rs.ol,
                "nov": rs.nov,
                "jac": rs.jac,
                "r": rs.r,
                "byte_entropy": S.byte_entropy(ob),
                "zlib_ratio": S.zlib_ratio(ob, deflated),
                "cond_novelty": cn.observe(a.encode(), ob, deflated),
                "corpus_surprisal": S.surprisal(templates.get(key, 1), total),
            }
        )
    return out


class _Score(beam.DoFn):
    def __init__(self, policy: MaskPolicy, seed: int):
        self.policy = policy
        self.seed = seed
        self.counters = _Counters()

    def process(self, record: dict[str, Any], templates: dict[str, int], total: int):
        record = dict(record)
        keys = record.pop(TEMPLATE_KEYS, None)
        turns = []
        for t, st in zip(record[F.TURNS], turn_stats(record, templates, total, keys), strict=True):
            d = self.policy.decide(st, t["action"]["text"], t["observation"]["text"])
            self.counters.inc(f"category.{d.category}")
            turns.append({**t, "stats": st, "category": d.category, "keep": d.keep, "rule": d.rule})
        out = {**record, F.TURNS: turns}
        yield out
        for t in turns:
            yield beam.pvalue.TaggedOutput("turns", flat_turn(out, t, self.seed))


def flat_turn(record: dict[str, Any], t: dict[str, Any], seed: int) -> dict[str, Any]:
    a, o, st = t["action"], t["observation"], t["stats"]
    return {
        "trajectory_id": record[F.TRAJECTORY_ID],
        "origin_id": (record.get(F.SOURCE) or {}).get("origin_id"),
        "domain": record[F.DOMAIN],
        "turn_index": t["index"],
        "action_kind": a["kind"],
        "tool_name": a.get("name"),
        "action_chars": len(a["text"]),
        "obs_chars": len(o["text"]),
        "is_error": bool(o.get("is_error")) or o.get("exit_code") not in (None, 0),
        "truncated": bool(o.get("truncated")),
        **st,
        "category": t["category"],
        "keep": t["keep"],
        "rule": t["rule"],
        "in_loss": keep_turn(record[F.TRAJECTORY_ID], t["index"], seed, t["keep"]),
    }


class ScoreTurns(beam.PTransform):
    """Per-turn statistics (with corpus-wide template counts) and the mask policy.

    Template counts travel as a side input holding only templates seen at least twice;
    a template absent from it occurred once.
    """

    def __init__(self, policy: MaskPolicy, seed: int = 0, template_keys=None):
        """`template_keys`: the corpus's template keys (one per turn) when they were
        counted upstream; otherwise they are counted from `records` here."""
        super().__init__()
        self.policy = policy
        self.seed = seed
        self.template_keys = template_keys

    def expand(self, records):
        keyed = records | "TemplateKeys" >> beam.Map(with_template_keys)
        keys = self.template_keys
        if keys is None:
            keys = keyed | "Keys" >> beam.FlatMap(lambda r: r[TEMPLATE_KEYS])
        repeated = (
            keys
            | "CountTemplates" >> beam.combiners.Count.PerElement()
            | "Repeated" >> beam.Filter(lambda kv: kv[1] > 1)
        )
        total = keys | "CountTurns" >> beam.combiners.Count.Globally()
        return keyed | "Score" >> beam.ParDo(
            _Score(self.policy, self.seed),
            templates=beam.pvalue.AsDict(repeated),
            total=beam.pvalue.AsSingleton(total),
        ).with_outputs("turns", main="trajectories")
