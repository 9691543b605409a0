"""Samples: processed trajectory records -> tokenized, loss-masked samples, and samples ->
training rows (one per sample, or best-fit packed into rows of a fixed length).

A sample is a whole trajectory or one target turn with its history. One that is too long
is split at turn boundaries or truncated; a system prompt too long to leave room for the
turns loses its demonstrations, then its tail. Every draw is a hash of (trajectory, turn,
seed), so the same records and settings give the same samples.
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from worldtrace.schemas import fields as F

from .mask import unit_draw
from .render import Rendered, Template, system_text
from .tokens import MaskConfig, encode, loss_mask

SAMPLE_MODES = ("trajectory", "turn")
SAMPLE_TURNS = ("all", "one")
OVERFLOWS = ("split", "truncate")
TRIM_MARK = "\n[system prompt truncated]"


@dataclass
class SampleConfig(MaskConfig):
    """How records become samples (and which of their tokens are targets)."""

    template: str = "chatml"
    """chatml, plain, or a Jinja file rendering `messages`."""
    template_eot: str = ""
    """For a Jinja template: the end-of-turn text after an assistant message."""
    sample_mode: str = "trajectory"
    """trajectory: one sample per trajectory; turn: one sample per target turn with its history."""
    sample_turns: str = "all"
    """With sample_mode=turn: all turns, or one random turn per trajectory (seeded)."""
    max_len: int = 0
    """Longest sample in tokens (0 = no limit; defaults to seq_len when packing)."""
    overflow: str = "split"
    """Over max_len: split at turn boundaries, or truncate."""
    seq_len: int = 0
    """Pack samples into rows of exactly this many tokens (best fit); 0 = no packing."""


@dataclass
class Sample:
    sample_id: str
    trajectory_id: str
    domain: str
    text: str
    input_ids: np.ndarray = field(repr=False)
    loss_mask: np.ndarray = field(repr=False)

    def row(self) -> dict[str, Any]:
        """The unpacked training row (writers.TRAIN_SCHEMA)."""
        return {
            "sample_id": self.sample_id,
            "trajectory_id": self.trajectory_id,
            "domain": self.domain,
            "input_ids": self.input_ids,
            "loss_mask": self.loss_mask,
            "num_tokens": len(self.input_ids),
            "num_loss_tokens": int(self.loss_mask.sum()),
        }


def _category_counts() -> dict[str, int]:
    return {"obs_tokens": 0, "loss_tokens": 0, "turns": 0, "turns_in_loss": 0}


def _domain_counts() -> dict[str, int]:
    return {"samples": 0, "tokens": 0, "loss_tokens": 0}


@dataclass
class SampleStats:
    """The manifest's counts of what was built."""

    samples: int = 0
    tokens: int = 0
    loss_tokens: int = 0
    system_trimmed: int = 0
    """Samples whose system prompt was shortened to leave room for turns."""
    by_domain: dict[str, dict[str, int]] = field(
        default_factory=lambda: defaultdict(_domain_counts)
    )
    by_category: dict[str, dict[str, int]] = field(
        default_factory=lambda: defaultdict(_category_counts)
    )
    """Per turn category: observation tokens, loss tokens, turns, turns with a target."""

    def add(self, domain: str, tokens: int = 0, loss_tokens: int = 0) -> None:
        """One sample (or one record, for formats without tokens)."""
        self.samples += 1
        self.tokens += tokens
        self.loss_tokens += loss_tokens
        d = self.by_domain[domain]
        d["samples"] += 1
        d["tokens"] += tokens
        d["loss_tokens"] += loss_tokens

    def add_turns(self, turns, ranges: list[tuple[int, int, int]], mask: np.ndarray) -> None:
        for turn, lo, hi in ranges:
            c = self.by_category[turns[turn].get("category") or "unscored"]
            c["obs_tokens"] += hi - lo
            kept = int(mask[lo:hi].sum())
            c["loss_tokens"] += kept
            c["turns"] += 1
            c["turns_in_loss"] += kept > 0

    def as_dict(self) -> dict[str, Any]:
        return {
            "samples": self.samples,
            "tokens": self.tokens,
            "loss_tokens": self.loss_tokens,
            "system_trimmed": self.system_trimmed,
            "by_domain": dict(sorted(self.by_domain.items())),
            "by_category": dict(sorted(self.by_category.items())),
        }


class SampleBuilder:
    """Records -> samples under one `SampleConfig`, counting into `stats` as it goes."""

    def __init__(self, cfg: SampleConfig, template: Template, tok):
        self.cfg = cfg
        self.template = template
        self.tok = tok
        self.max_len = cfg.max_len or cfg.seq_len
        self.stats = SampleStats()

    def samples(self, records: list[dict[str, Any]], batch: int = 256) -> Iterator[Sample]:
        """Samples of `records` in order; each batch of records is encoded in one call."""
        for i in range(0, len(records), batch):
            yield from self._batch(records[i : i + batch])

    def _encode(self, texts: list[str]) -> list[tuple[np.ndarray, np.ndarray]]:
        return encode(self.tok, texts)

    def _pieces(self, rec: dict[str, Any]) -> list[tuple[str, list[dict], set[int] | None]]:
        """(sample suffix, turns to render, target turns) before length limits."""
        turns = rec[F.TURNS]
        if self.cfg.sample_mode == "trajectory":
            return [("", turns, None)]
        indexes = range(len(turns))
        if self.cfg.sample_turns == "one" and turns:
            indexes = [int(unit_draw(rec[F.TRAJECTORY_ID], "turn", self.cfg.seed) * len(turns))]
        return [(f":t{k}", turns[: k + 1], {turns[k]["index"]}) for k in indexes]

    def _batch(self, records: list[dict[str, Any]]) -> Iterator[Sample]:
        jobs = []
        for rec in records:
            system = system_text(rec.get(F.SYSTEM))
            for suffix, turns, targets in self._pieces(rec):
                jobs.append(
                    (rec, system, suffix, turns, targets, self.template.render(system, turns))
                )
        encoded = self._encode([j[5].text for j in jobs])
        for (rec, system, suffix, turns, targets, rendered), (ids, offsets) in zip(
            jobs, encoded, strict=True
        ):
            yield from self._fit(rec, system, suffix, turns, targets, rendered, ids, offsets)

    def _make(self, rec, sid, rendered, ids, offsets, targets) -> Sample:
        tid = rec[F.TRAJECTORY_ID]
        turns = {t["index"]: t for t in rec[F.TURNS]}
        mask, ranges = loss_mask(offsets, rendered, turns, tid, self.cfg, targets)
        self.stats.add_turns(turns, ranges, mask)
        self.stats.add(rec[F.DOMAIN], len(ids), int(mask.sum()))
        return Sample(sid, tid, rec[F.DOMAIN], rendered.text, ids, mask)

    def _fit(self, rec, system, suffix, turns, targets, rendered, ids, offsets) -> Iterator[Sample]:
        tid = rec[F.TRAJECTORY_ID]
        limit = self.max_len
        if not limit or len(ids) <= limit:
            yield self._make(rec, tid + suffix, rendered, ids, offsets, targets)
            return
        if self.cfg.overflow == "truncate":
            yield self._truncated(rec, tid + suffix, rendered, ids, offsets, targets, limit)
            return
        shorter = self._fit_system(rec, system, limit // 2)
        if shorter != system:  # re-render: the long system prompt left no room for turns
            system = shorter
            rendered = self.template.render(system, turns)
            [(ids, offsets)] = self._encode([rendered.text])
            if len(ids) <= limit:
                yield self._make(rec, tid + suffix, rendered, ids, offsets, targets)
                return
        if targets is not None:  # turn sample: drop the oldest history until it fits
            for start in range(1, len(turns)):
                r = self.template.render(system, turns[start:])
                [(i2, o2)] = self._encode([r.text])
                if len(i2) <= limit:
                    yield self._make(rec, tid + suffix, r, i2, o2, targets)
                    return
            r = self.template.render(system, turns[-1:])
            [(i2, o2)] = self._encode([r.text])
            yield self._truncated(rec, tid + suffix, r, i2, o2, targets, limit)
            return
        # whole trajectory: split at turn boundaries, each part re-rendered with the system prompt
        starts = offsets[:, 0]
        bounds = [int(np.searchsorted(starts, sp.turn_start, "left")) for sp in rendered.spans] + [
            len(ids)
        ]
        head = bounds[0]
        group, size = [], head
        groups = []
        for n in range(len(turns)):
            cost = bounds[n + 1] - bounds[n]
            if group and size + cost > limit:
                groups.append(group)
                group, size = [], head
            group.append(turns[n])
            size += cost
        if group:
            groups.append(group)
        texts = [self.template.render(system, g) for g in groups]
        for part, (r, (i2, o2)) in enumerate(
            zip(texts, self._encode([r.text for r in texts]), strict=True)
        ):
            sid = f"{tid}/p{part}"
            if len(i2) > limit:
                yield self._truncated(rec, sid, r, i2, o2, None, limit)
            else:
                yield self._make(rec, sid, r, i2, o2, None)

    def _fit_system(self, rec: dict[str, Any], system: str, budget: int) -> str:
        """A system prompt within `budget` tokens: demonstrations go first, then the tail."""
        if not system or len(self._encode([system])[0][0]) <= budget:
            return system
        self.stats.system_trimmed += 1
        system = system_text({**(rec.get(F.SYSTEM) or {}), "demonstrations": None})
        n = len(self._encode([system])[0][0])
        if n <= budget:
            return system
        return system[: max(0, len(system) * budget // n - len(TRIM_MARK))] + TRIM_MARK

    def _truncated(self, rec, sid, rendered, ids, offsets, targets, limit) -> Sample:
        cut = int(offsets[limit - 1, 1]) if limit else 0
        spans = tuple(
            type(sp)(
                sp.turn,
                sp.turn_start,
                sp.start,
                min(sp.end, cut),
                min(sp.eot_start, cut),
                min(sp.eot_end, cut),
            )
            for sp in rendered.spans
            if sp.start < cut
        )
        r = Rendered(rendered.text[:cut], spans)
        return self._make(rec, sid, r, ids[:limit], offsets[:limit], targets)


# -- rows and packing ----------------------------------------------------------------
def rows(samples: list[Sample], seq_len: int, pad_id: int) -> Iterable[dict[str, Any]]:
    """Training rows: packed into rows of `seq_len` tokens when set, else one per sample."""
    return pack(samples, seq_len, pad_id) if seq_len else (s.row() for s in samples)


def best_fit(lengths: list[tuple[int, str]], capacity: int) -> list[list[int]]:
    """Best-fit decreasing: indexes of `lengths` per bin; ties broken by id for determinism."""
    order = sorted(range(len(lengths)), key=lambda i: (-lengths[i][0], lengths[i][1]))
    bins: list[list[int]] = []
    free: list[tuple[int, int]] = []  # sorted (remaining capacity, bin number)
    for i in order:
        n = lengths[i][0]
        j = bisect.bisect_left(free, (n, -1))
        if j < len(free):
            rem, b = free.pop(j)
            bins[b].append(i)
            bisect.insort(free, (rem - n, b))
        else:
            bins.append([i])
            bisect.insort(free, (capacity - n, len(bins) - 1))
    return bins


def pack(samples: list[Sample], seq_len: int, pad_id: int) -> Iterator[dict[str, Any]]:
    """Packed rows (writers.PACKED_SCHEMA) of exactly `seq_len` tokens, padded with
    `pad_id` (never a target); `doc_boundaries` says where each sample starts."""
    for b, members in enumerate(
        best_fit([(len(s.input_ids), s.sample_id) for s in samples], seq_len)
    ):
        members.sort(key=lambda i: samples[i].sample_id)
        ids = np.full(seq_len, pad_id, dtype=np.int32)
        mask = np.zeros(seq_len, dtype=np.uint8)
        bounds, pos = [], 0
        for i in members:
            s = samples[i]
            n = len(s.input_ids)
            ids[pos : pos + n] = s.input_ids
            mask[pos : pos + n] = s.loss_mask
            bounds.append(pos)
            pos += n
        first = samples[members[0]]
        yield {
            "sample_id": f"pack{b:07d}",
            "sample_ids": [samples[i].sample_id for i in members],
            "trajectory_id": first.trajectory_id,
            "domain": first.domain,
            "input_ids": ids,
            "loss_mask": mask,
            "doc_boundaries": bounds,
            "num_tokens": pos,
            "num_loss_tokens": int(mask.sum()),
        }
