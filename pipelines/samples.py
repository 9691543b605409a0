"""Samples: processed trajectory records -> tokenized, loss-masked samples, and samples ->
training rows (one per sample, or best-fit packed into rows of a fixed length).

A sample is a whole trajectory or one target turn with its history; a turn with no target
(not in the loss under the keep mode) is no turn sample, and a sample left with no target
token is not written: both are only counted. A trajectory too long is split at turn
boundaries or truncated; a turn sample too long drops its oldest history first, and only
a target turn too long alone is truncated; a system prompt too long to leave room for the
turns loses its demonstrations, then its middle. Every draw is a hash of (trajectory,
turn, seed), so the same records and settings give the same samples.

Records stream through in batches, rendered and tokenized a slice of at most `JOB_CHARS`
characters at a time: slice k+1 on a helper thread (`encode_batch` releases the GIL and
runs on all cores) while slice k is masked on the calling thread. Under a length limit a
text's encoding holds its first `max_len + 1` tokens and its count; turn samples are put
together from their turns encoded once (`_History`) where the template and tokenizer
allow. Packing is best fit within a window of samples, so memory holds one window, not
the corpus.
"""

from __future__ import annotations

import bisect
import itertools
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from worldtrace.schemas import fields as F
from worldtrace.schemas.threads import DaemonPool

from .mask import keep_turn, unit_draw
from .prompt import SystemPrompt, trimmed
from .render import Rendered, Span, Template
from .tokens import Encoded, Encoder, MaskConfig, loss_targets

SAMPLE_MODES = ("trajectory", "turn")
SAMPLE_TURNS = ("all", "one")
OVERFLOWS = ("split", "truncate")
PART = "_part"
"""Key of the output part (train, test...) a record goes to; absent = the only part."""
MAIN_PART = "train"
SYNTHETIC_KEY = "_synthetic"
"""Key of whether a record is generated (export's `is_synthetic`), set as it is routed."""


@dataclass
class SampleConfig(MaskConfig):
    """How records become samples (and which of their tokens are targets)."""

    template: str = "chatml"
    """chatml, plain, a Jinja file rendering `messages` (a model's chat template), or a
    tokenizer_config.json holding one (its bos/eos tokens given to it as transformers does)."""
    template_eot: str = ""
    """For a Jinja template: the end-of-turn text after an assistant message."""
    sample_mode: str = "trajectory"
    """trajectory: one sample per trajectory; turn: one sample per target turn with its history."""
    sample_turns: str = "all"
    """With sample_mode=turn: all target turns, or one random target turn per trajectory (seeded)."""
    max_len: int = 0
    """Longest sample in tokens (0 = no limit; defaults to seq_len when packing)."""
    overflow: str = "split"
    """Over max_len: split at turn boundaries, or truncate."""
    seq_len: int = 0
    """Pack samples into rows of exactly this many tokens (best fit); 0 = no packing."""
    pack_window: int = 4096
    """Packing buffer: best fit within each window of this many samples (bounds memory)."""


@dataclass
class Sample:
    sample_id: str
    trajectory_id: str
    domain: str
    part: str
    input_ids: np.ndarray = field(repr=False)
    loss_mask: np.ndarray = field(repr=False)
    num_loss_tokens: int = 0

    def row(self) -> dict[str, Any]:
        """The unpacked training row (writers.TRAIN_SCHEMA)."""
        return {
            "sample_id": self.sample_id,
            "trajectory_id": self.trajectory_id,
            "domain": self.domain,
            "input_ids": self.input_ids,
            "loss_mask": self.loss_mask,
            "num_tokens": len(self.input_ids),
            "num_loss_tokens": self.num_loss_tokens,
        }


def _category_counts() -> dict[str, int]:
    return {"obs_tokens": 0, "loss_tokens": 0, "eot_tokens": 0, "turns": 0, "turns_in_loss": 0}


def _domain_counts() -> dict[str, int]:
    return {"samples": 0, "tokens": 0, "loss_tokens": 0}


TRUNCATED = ("samples", "turns", "tokens")
"""What `counts.truncated` counts: samples cut at the length limit, turns whose text lost
tokens, and the tokens cut."""


NO_TARGET = ("turns", "samples")
"""What `counts.turns_without_target` counts: `turns` left out of the export for want of a
target (turn mode: a turn that made no turn sample, because the keep mode leaves it out of
the loss or its sample had no target token left; trajectory mode: every turn of a
trajectory sample or split part that had no target token), and `samples`, the samples
built but not written because none of their tokens is a target (a turn sample whose
target lost every token; a trajectory or part with no target)."""


def truncation_totals(by_domain: dict[str, dict[str, int]]) -> dict[str, Any]:
    """`counts.truncated`: the totals, and by domain."""
    return domain_totals(by_domain, TRUNCATED)


def domain_totals(by_domain: dict[str, dict[str, int]], keys: tuple[str, ...]) -> dict[str, Any]:
    """Per-domain counts of `keys` -> their totals, and by domain (sorted)."""
    return {
        **{k: sum(v[k] for v in by_domain.values()) for k in keys},
        "by_domain": dict(sorted(by_domain.items())),
    }


def has_target(tid: str, turn: dict[str, Any], cfg: MaskConfig) -> bool:
    """Whether the keep mode can make a turn's observation a target: in `turn` mode the
    keep draw (as `loss_mask` and AgentWorldBench's target turns make it), in `token` and
    `prefix` mode a keep above 0. A turn passing this may still get no target token (an
    empty observation, a token draw that keeps none, truncation)."""
    keep = turn.get("keep")
    keep = 1.0 if keep is None else keep
    if cfg.keep_mode == "turn":
        return keep_turn(tid, turn["index"], cfg.seed, keep)
    return keep > 0.0


@dataclass
class SampleStats:
    """The manifest's counts of what was built."""

    samples: int = 0
    tokens: int = 0
    loss_tokens: int = 0
    system_trimmed: int = 0
    """Trajectories whose system prompt was shortened to leave room for turns, each once
    however many of its samples (turn samples, parts) were trimmed."""
    by_domain: dict[str, dict[str, int]] = field(
        default_factory=lambda: defaultdict(_domain_counts)
    )
    by_category: dict[str, dict[str, int]] = field(
        default_factory=lambda: defaultdict(_category_counts)
    )
    """Per turn category: observation tokens, those that are targets, end-of-turn targets,
    turns, turns with a target."""
    truncated: dict[str, dict[str, int]] = field(
        default_factory=lambda: defaultdict(lambda: dict.fromkeys(TRUNCATED, 0))
    )
    """Per domain: what cutting samples at the length limit lost (a `--seq-len` that drops
    most of a domain's tokens is said, not silent)."""
    without_target: dict[str, dict[str, int]] = field(
        default_factory=lambda: defaultdict(lambda: dict.fromkeys(NO_TARGET, 0))
    )
    """Per domain: turns and samples left out because they have no target (NO_TARGET)."""
    first_id: int | None = None
    """The token id the first sample with tokens starts with (`doc_start_id`)."""
    starts_differ: bool = False
    """Whether a later sample starts with another id than `first_id`."""

    def add(
        self, domain: str, tokens: int = 0, loss_tokens: int = 0, first_id: int | None = None
    ) -> None:
        """One sample (or one record, for formats without tokens); `first_id`: the
        sample's first token id, one int compared a sample (`doc_start_id`)."""
        if first_id is not None:
            if self.first_id is None:
                self.first_id = first_id
            elif first_id != self.first_id:
                self.starts_differ = True
        self.samples += 1
        self.tokens += tokens
        self.loss_tokens += loss_tokens
        d = self.by_domain[domain]
        d["samples"] += 1
        d["tokens"] += tokens
        d["loss_tokens"] += loss_tokens

    def add_turns(
        self,
        turns,
        ranges: list[tuple[int, int, int]],
        mask: np.ndarray,
        eots: dict[int, tuple[int, int]] | None = None,
    ) -> None:
        """Per category: a turn's observation tokens and those of them that are targets
        (`loss_tokens`: their ratio is the keep ratio), its end-of-turn targets (`eots`:
        `eot_tokens`, so the categories add up to the sample's loss tokens) and whether
        it has any target (a kept empty observation is in the loss by its end-of-turn)."""
        if not ranges:
            return
        eots = eots or {}
        csum = np.concatenate(([0], np.cumsum(mask, dtype=np.int64)))
        bounds = np.array([(lo, hi) for _, lo, hi in ranges])
        ends = np.array([eots.get(turn, (hi, hi)) for turn, _, hi in ranges])
        kepts = (csum[bounds[:, 1]] - csum[bounds[:, 0]]).tolist()
        eot_kepts = (csum[ends[:, 1]] - csum[ends[:, 0]]).tolist()
        for (turn, lo, hi), kept, eot in zip(ranges, kepts, eot_kepts, strict=True):
            c = self.by_category[turns[turn].get("category") or "unscored"]
            c["obs_tokens"] += hi - lo
            c["loss_tokens"] += kept
            c["eot_tokens"] += eot
            c["turns"] += 1
            c["turns_in_loss"] += kept + eot > 0

    @property
    def doc_start_id(self) -> int | None:
        """The manifest's `sampling.doc_start_id`: the token id every sample starts with
        when they all start with the same one (chatml: `<|im_start|>`), else None.
        `--verify` checks the token at every document start against it: a packed row's
        `doc_boundaries` moved off its samples' starts (rehashed) verified before."""
        return None if self.starts_differ else self.first_id

    def as_dict(self) -> dict[str, Any]:
        domains = {*self.by_domain, *self.truncated, *self.without_target}  # every one read
        return {
            "samples": self.samples,
            "tokens": self.tokens,
            "loss_tokens": self.loss_tokens,
            "system_trimmed": self.system_trimmed,
            "by_domain": dict(sorted(self.by_domain.items())),
            "by_category": dict(sorted(self.by_category.items())),
            "truncated": truncation_totals({d: dict(self.truncated[d]) for d in domains}),
            "turns_without_target": domain_totals(
                {d: dict(self.without_target[d]) for d in domains}, NO_TARGET
            ),
        }


JOB_CHARS = 1 << 22
"""Rendered characters encoded in one helper-thread job (`SampleBuilder.samples`): a batch
of big records, or the long prefixes of a trajectory's turn samples, is encoded and held a
slice at a time."""


@dataclass
class _Job:
    """One piece of a record to encode: a trajectory (or turn sample, `targets` set) as
    rendered, or (`history`) the turns of a record's turn samples rendered one by one."""

    rec: dict[str, Any]
    system: str
    suffix: str = ""
    turns: list[dict] = field(default_factory=list)
    rendered: Rendered | None = None
    targets: set[int] | None = None
    history: _History | None = None

    @property
    def texts(self) -> list[str]:
        return self.history.texts if self.history else [self.rendered.text]

    def marks(self) -> list[list[int] | None]:
        """Per text, the characters where its turns start (none asked of a history's)."""
        if self.history:
            return [None] * len(self.history.texts)
        return [[sp.turn_start for sp in self.rendered.spans]]


class _History:
    """A record's turn samples from its turns rendered and encoded once each.

    A built-in template renders turns[s:k+1] after the system prompt as the system
    header followed by each turn's own rendering, and every turn starts at a `tokens.CUT`
    (the template's end of message is a newline, its next message starts with a printable
    ASCII character): with a `cuttable` tokenizer a sample's tokens are its header's and
    its turns' tokens, one after another. So every turn is rendered and encoded once
    (with a length limit: its first `max_len + 1` tokens held, and its count), each turn
    sample's length is a sum, and only the turns a sample keeps are put together:
    linear in the trajectory where encoding every prefix was quadratic (a 6,000-turn
    trajectory took over five minutes and gigabytes)."""

    def __init__(self, template: Template, system: str, turns: list[dict], ks: list[int]):
        self.template, self.system, self.turns, self.ks = template, system, turns, ks
        pieces = [template.render("", [t]).text for t in turns[: max(ks) + 1]]
        self.texts = [template.render(system, []).text, *pieces]
        self.lens = np.array([0, *itertools.accumulate(map(len, pieces))], dtype=np.int64)
        """Character offset of each turn in the turns' text (after the header)."""
        self.heads: dict[str, tuple[int, Encoded]] = {}
        """Per system prompt: its header's characters and encoding."""

    def take(self, encs: list[Encoded]) -> None:
        """The encodings of `texts` (which are let go)."""
        head, *pieces = encs
        self.heads[self.system] = (len(self.texts[0]), head)
        self.texts = []
        self.counts = np.array([0, *itertools.accumulate(len(e) for e in pieces)], dtype=np.int64)
        """Tokens before each turn (prefix sums of the turns' counts)."""
        held = [len(e.ids) for e in pieces]
        self.held = np.array([0, *itertools.accumulate(held)], dtype=np.int64)
        self.partial = np.flatnonzero([not e.whole for e in pieces])
        """The turns of which only the first tokens are held (longer than the limit)."""
        self.ids = np.concatenate([e.ids for e in pieces]).astype(np.int32, copy=False)
        self.offsets = np.concatenate(
            [e.offsets.reshape(-1, 2) + at for e, at in zip(pieces, self.lens[:-1], strict=True)]
        ).astype(np.int64, copy=False)

    def count(self, system: str, start: int, k: int) -> int:
        """Tokens of turns[start:k+1] rendered after `system` (its header encoded)."""
        return len(self.heads[system][1]) + int(self.counts[k + 1] - self.counts[start])

    def latest(self, system: str, k: int, limit: int) -> int:
        """The earliest start in 1..k whose sample fits `limit` (the most history), else k:
        `_latest_history`'s choice, from the counts (a sample's count falls as its start
        moves on, so the first start that fits is the one it settles on)."""
        need = self.counts[k + 1] + len(self.heads[system][1]) - limit  # counts[start] >= need
        start = int(np.searchsorted(self.counts, need, "left"))
        return min(max(start, 1), k) if k else 0

    def joined(self, system: str, start: int, k: int) -> tuple[Rendered, Encoded]:
        """turns[start:k+1] rendered after `system` and their encoding, put together from
        the header's and the turns' (whole when all of them are; else the tokens held up
        to the first turn not held whole: at least `max_len + 1`)."""
        rendered = self.template.render(system, self.turns[start : k + 1])
        width, head = self.heads[system]
        if len(rendered.text) != width + self.lens[k + 1] - self.lens[start]:
            raise AssertionError(f"{self.template.name}: a sample is not its header and turns")
        ids, offsets = [head.ids], [head.offsets.reshape(-1, 2)]
        total = len(head) + int(self.counts[k + 1] - self.counts[start])
        if head.whole:
            at = int(self.partial.searchsorted(start))  # the first turn not held whole
            stop = min(int(self.partial[at]) + 1, k + 1) if at < len(self.partial) else k + 1
            lo, hi = int(self.held[start]), int(self.held[stop])
            ids.append(self.ids[lo:hi])
            offsets.append(self.offsets[lo:hi] + (width - int(self.lens[start])))
        enc = Encoded(
            np.concatenate(ids).astype(np.int32, copy=False),
            np.concatenate(offsets).astype(np.int64, copy=False),
            total,
        )
        return rendered, enc


class SampleBuilder:
    """Records -> samples under one `SampleConfig`, counting into `stats` (per part), and
    into `synthetic` the samples of generated records (`SYNTHETIC_KEY`), per part."""

    def __init__(
        self,
        cfg: SampleConfig,
        template: Template,
        tok,
        prompt: SystemPrompt,
        job_chars: int = JOB_CHARS,
    ):
        self.cfg = cfg
        self.job_chars = job_chars
        """Rendered characters encoded in one helper-thread job (at least one piece)."""
        self.template = template
        self.tok = tok
        self.encoder = Encoder(tok) if tok is not None else None
        self.prompt = prompt
        self.max_len = cfg.max_len or cfg.seq_len
        self.stats: dict[str, SampleStats] = defaultdict(SampleStats)
        self.synthetic: Counter[str] = Counter()
        self._trimmed: dict[str, Any] | None = None
        """The last record counted in `system_trimmed` (its pieces come one after another)."""
        self._fitted: tuple[dict[str, Any] | None, str] = (None, "")
        """The last record's system prompt fitted to the limit (`_fit_system`)."""
        self._indexed: tuple[dict[str, Any] | None, dict[int, dict[str, Any]]] = (None, {})
        """The last record's turns by index (`_by_index`)."""
        self.by_turn = (
            cfg.sample_mode == "turn"
            and template.source is None
            and self.encoder is not None
            and self.encoder.cuttable
            and template.end.endswith("\n")
            and "!" <= template.starts["user"][:1] <= "~"
        )
        """Whether turn samples are put together from their turns encoded once (`_History`)."""

    def samples(self, batches: Iterable[list[dict[str, Any]]]) -> Iterator[Sample]:
        """Samples of every batch of records, in order. Each batch's pieces are encoded on
        a helper thread, at most `job_chars` rendered characters at a time, while the
        previous ones are masked."""
        with DaemonPool(1, "encode") as pool:  # a stop does not wait for a job (`threads`)
            pending: tuple[list, Future] | None = None
            for jobs in self._job_groups(batches):
                future = pool.submit(self._encode_jobs, jobs)
                if pending:
                    yield from self._finish(*pending)
                pending = (jobs, future)
            if pending:
                yield from self._finish(*pending)

    def _job_groups(self, batches: Iterable[list[dict[str, Any]]]) -> Iterator[list[_Job]]:
        """Each batch's jobs, in groups of at most `job_chars` characters (at least one job)."""
        for records in batches:
            group: list[_Job] = []
            size = 0
            for job in self._jobs(records):
                n = sum(map(len, job.texts))
                if group and size + n > self.job_chars:
                    yield group
                    group, size = [], 0
                group.append(job)
                size += n
            if group:
                yield group

    def _encode_jobs(self, jobs: list[_Job]) -> list[list[Encoded]]:
        texts = [t for j in jobs for t in j.texts]
        marks = [m for j in jobs for m in j.marks()]
        encs = iter(self._encode(texts, marks))
        return [[next(encs) for _ in j.texts] for j in jobs]

    def _encode(self, texts: list[str], marks: list[list[int]] | None = None) -> list[Encoded]:
        """Texts encoded; with a length limit, partially (`Encoder`): the first `max_len +
        1` tokens held (a sample's, and whether it runs over), and the count. `marks`:
        per text, the characters where its turns start (their first tokens are marked)."""
        keep = self.max_len + 1 if self.max_len else None
        return self.encoder(texts, keep, marks if self.max_len else None)

    def _encode_rendered(self, renders: list[Rendered]) -> list[Encoded]:
        return self._encode(
            [r.text for r in renders], [[sp.turn_start for sp in r.spans] for r in renders]
        )

    def _count(self, text: str) -> int:
        """Tokens of `text` (a plain string: encoded as the tokenizer does)."""
        return len(self.encoder([text], 0)[0])

    def _targets(self, rec: dict[str, Any]) -> list[int]:
        """Turn mode: the turns that make a sample. The turns without a target are left out
        (and counted): such a sample would cost the trainer a forward pass and teach
        nothing; `--sample-turns one` draws among the rest."""
        turns = rec[F.TURNS]
        tid = rec[F.TRAJECTORY_ID]
        indexes = [k for k, t in enumerate(turns) if has_target(tid, t, self.cfg)]
        if len(indexes) < len(turns):
            self._no_target(rec, len(turns) - len(indexes))
        if self.cfg.sample_turns == "one" and indexes:
            indexes = [indexes[int(unit_draw(tid, "turn", self.cfg.seed) * len(indexes))]]
        return indexes

    def _no_target(self, rec: dict[str, Any], n: int = 1, samples: int = 0) -> None:
        counts = self.stats[rec.get(PART, MAIN_PART)].without_target[rec[F.DOMAIN]]
        counts["turns"] += n
        counts["samples"] += samples

    def _jobs(self, records: list[dict[str, Any]]) -> Iterator[_Job]:
        """Each record's jobs, rendered one at a time: a trajectory; its turn samples'
        turns (`by_turn`); or each turn sample with its whole history."""
        for rec in records:
            system = self.prompt.text(rec)
            turns = rec[F.TURNS]
            try:
                if self.cfg.sample_mode == "trajectory":
                    yield _Job(rec, system, "", turns, self.template.render(system, turns))
                    continue
                ks = self._targets(rec)
                if not ks:
                    continue
                if self.by_turn:
                    yield _Job(rec, system, history=_History(self.template, system, turns, ks))
                    continue
                for k in ks:
                    rendered = self.template.render(system, turns[: k + 1])
                    yield _Job(rec, system, f":t{k}", turns[: k + 1], rendered, {turns[k]["index"]})
            except ValueError as exc:  # a template or a text it cannot render: say whose
                raise ValueError(f"trajectory {rec[F.TRAJECTORY_ID]}: {exc}") from None

    def _finish(self, jobs: list[_Job], future: Future) -> Iterator[Sample]:
        for job, encs in zip(jobs, future.result(), strict=True):
            if job.history is not None:
                job.history.take(encs)
                for k in job.history.ks:
                    yield from self._fit_turn(job.rec, job.history, k)
                continue
            [enc] = encs
            yield from self._fit(
                job.rec, job.system, job.suffix, job.turns, job.targets, job.rendered, enc
            )

    def _make(
        self,
        rec,
        sid,
        rendered: Rendered,
        enc: Encoded,
        targets,
        cut: dict[str, int] | None = None,
        n_turns: int | None = None,
    ) -> Sample | None:
        """The sample, counted; None (counted in `without_target`) for a sample with no
        target token: a turn sample whose target has no token left, a trajectory or part
        whose turns are all out of the loss (cross-entropy over no target is nan; such a
        sample would only cost the trainer a forward pass). `cut`: what truncation cut,
        counted when it is kept; `n_turns`: the turns of the piece before truncation
        (default: those rendered). `enc` is whole (a sample within the limit)."""
        tid = rec[F.TRAJECTORY_ID]
        turns = self._by_index(rec)
        mask, ranges, eots = loss_targets(enc, rendered, turns, tid, self.cfg, targets)
        part = rec.get(PART, MAIN_PART)
        stats = self.stats[part]
        n_loss = int(np.count_nonzero(mask))
        if not n_loss:
            if targets is not None:  # the target turn
                self._no_target(rec, 1, 1)
            else:  # every turn of the trajectory or part
                self._no_target(rec, len(rendered.spans) if n_turns is None else n_turns, 1)
            return None
        for k, v in (cut or {}).items():
            stats.truncated[rec[F.DOMAIN]][k] += v
        stats.add_turns(turns, ranges, mask, eots)
        stats.add(rec[F.DOMAIN], len(enc), n_loss, int(enc.ids[0]))
        if rec.get(SYNTHETIC_KEY):
            self.synthetic[part] += 1
        return Sample(sid, tid, rec[F.DOMAIN], part, enc.ids, mask, n_loss)

    def _by_index(self, rec: dict[str, Any]) -> dict[int, dict[str, Any]]:
        """A record's turns by index, made once a record (each of its turn samples asks)."""
        if self._indexed[0] is not rec:
            self._indexed = (rec, {t["index"]: t for t in rec[F.TURNS]})
        return self._indexed[1]

    def _fit(self, rec, system, suffix, turns, targets, rendered, enc) -> list[Sample]:
        """The samples of one piece within the length limit (counting a trimmed system
        prompt once a trajectory, when any of its samples is kept). `overflow` applies to
        whole trajectories: a turn sample over the limit drops its oldest history first in
        either mode, since its target is its last turn (truncating it would cut the target
        and keep the history)."""
        tid = rec[F.TRAJECTORY_ID]
        limit = self.max_len
        if not limit or len(enc) <= limit:
            return self._kept(self._make(rec, tid + suffix, rendered, enc, targets))
        if self.cfg.overflow == "truncate" and targets is None:
            return self._kept(self._truncated(rec, tid + suffix, rendered, enc, targets, limit))
        shorter = self._fit_system(rec, system, limit // 2)
        shortened = shorter != system
        out = self._fit_long(rec, shorter, suffix, turns, targets, rendered, enc, shortened)
        self._count_trimmed(rec, shortened, out)
        return out

    def _count_trimmed(self, rec: dict[str, Any], shortened: bool, out: list[Sample]) -> None:
        if shortened and out and rec is not self._trimmed:
            # once a trajectory: `_fit` runs once for each of its turn samples, and the
            # count is said as trajectories (it counted 48 for 40 trajectories)
            self._trimmed = rec
            self.stats[rec.get(PART, MAIN_PART)].system_trimmed += 1

    def _fit_turn(self, rec: dict[str, Any], history: _History, k: int) -> list[Sample]:
        """`_fit` of the turn sample of turn k, from `history`'s counts: the same samples,
        with only the turns kept put together."""
        sid = f"{rec[F.TRAJECTORY_ID]}:t{k}"
        targets = {rec[F.TURNS][k]["index"]}
        limit, system = self.max_len, history.system
        if not limit or history.count(system, 0, k) <= limit:
            return self._kept(self._make(rec, sid, *history.joined(system, 0, k), targets))
        shorter = self._fit_system(rec, system, limit // 2)
        shortened = shorter != system
        if shorter not in history.heads:
            text = self.template.render(shorter, []).text
            history.heads[shorter] = (len(text), self._encode([text])[0])
        if shortened and history.count(shorter, 0, k) <= limit:
            out = self._kept(self._make(rec, sid, *history.joined(shorter, 0, k), targets))
        else:  # drop the oldest history until it fits (`_latest_history`)
            start = history.latest(shorter, k, limit)
            r, e = history.joined(shorter, start, k)
            if len(e) <= limit:
                out = self._kept(self._make(rec, sid, r, e, targets))
            else:  # the target alone is too long: it is truncated (and counted)
                out = self._kept(self._truncated(rec, sid, r, e, targets, limit))
        self._count_trimmed(rec, shortened, out)
        return out

    @staticmethod
    def _kept(*samples: Sample | None) -> list[Sample]:
        return [s for s in samples if s is not None]

    def _fit_long(
        self, rec, system, suffix, turns, targets, rendered, enc, shortened
    ) -> list[Sample]:
        """A piece over the limit: a trajectory with `overflow=split`, or a turn sample
        (`system` already trimmed when `shortened`)."""
        tid = rec[F.TRAJECTORY_ID]
        limit = self.max_len
        if shortened:  # re-render: the long system prompt left no room for turns
            rendered = self.template.render(system, turns)
            [enc] = self._encode_rendered([rendered])
            if len(enc) <= limit:
                return self._kept(self._make(rec, tid + suffix, rendered, enc, targets))
        if targets is not None:  # turn sample: drop the oldest history until it fits
            r, e2 = self._latest_history(system, turns, enc)
            if len(e2) <= limit:
                return self._kept(self._make(rec, tid + suffix, r, e2, targets))
            # the target alone is too long: it is truncated (and counted)
            return self._kept(self._truncated(rec, tid + suffix, r, e2, targets, limit))
        # whole trajectory: split at turn boundaries, each part re-rendered with the system prompt
        bounds = [*enc.marks, len(enc)]
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
        out = []
        for part, (r, e2) in enumerate(zip(texts, self._encode_rendered(texts), strict=True)):
            sid = f"{tid}/p{part}"
            if len(e2) > limit:
                out.append(self._truncated(rec, sid, r, e2, None, limit))
            else:
                out.append(self._make(rec, sid, r, e2, None))
        return self._kept(*out)

    def _latest_history(
        self, system: str, turns: list[dict], enc: Encoded
    ) -> tuple[Rendered, Encoded]:
        """`turns` rendered from the earliest start > 0 that fits the limit (the most
        history); the last turn alone, over the limit, when none does. The start is found
        from the tokens each turn took in `enc` (its `marks`: where each turn starts),
        then checked by encoding (and moved when tokens do not add up across a turn
        boundary), so a long history costs two or three encodings, not one per dropped
        turn."""
        limit = self.max_len
        bounds = [*enc.marks, len(enc)]
        last = len(turns) - 1
        start = next(
            (s for s in range(1, last + 1) if bounds[0] + bounds[-1] - bounds[s] <= limit), last
        )

        def render(start: int) -> tuple[Rendered, Encoded]:
            r = self.template.render(system, turns[start:])
            [e] = self._encode_rendered([r])
            return r, e

        fit = render(start)
        if len(fit[1]) > limit:  # tokens ran over the guess: drop more
            while start < last and len((fit := render(start := start + 1))[1]) > limit:
                pass
            return fit
        while start > 1 and len((more := render(start - 1))[1]) <= limit:  # more fits
            start, fit = start - 1, more
        return fit

    def _fit_system(self, rec: dict[str, Any], system: str, budget: int) -> str:
        """A system prompt within `budget` tokens: demonstrations go first, then its middle
        (the simulation instruction, which says what to predict, stays when it fits).
        Worked out once a record (its turn samples all ask)."""
        if self._fitted[0] is rec:
            return self._fitted[1]
        fitted = self._fitted_system(rec, system, budget)
        self._fitted = (rec, fitted)
        return fitted

    def _fitted_system(self, rec: dict[str, Any], system: str, budget: int) -> str:
        if not system or self._count(system) <= budget:
            return system
        parts = self.prompt.parts(rec, drop=("demonstrations",))
        system = self.prompt.text(rec, drop=("demonstrations",))
        n = self._count(system)
        if n <= budget:
            return system
        return trimmed(parts, len(system) * budget // n)

    def _truncated(self, rec, sid, rendered, enc: Encoded, targets, limit) -> Sample | None:
        """The first `limit` tokens. A turn lost tokens when a token of its observation or
        end-of-turn marker is at `limit` or later: counted by token, since the character
        cut rounds a token that ends inside a character (a three-token emoji) up to the
        whole character. `enc` may be partial: it holds at least `limit + 1` tokens, all
        that is looked at (the count is the whole text's)."""
        cut = enc.chars(limit - 1)[1] if limit else 0
        lost = {
            "samples": 1,
            "turns": sum(
                sp.eot_end > sp.start and enc.overlap_range(sp.start, sp.eot_end)[1] > limit
                for sp in rendered.spans
            ),
            "tokens": len(enc) - min(len(enc), limit),
        }
        spans = tuple(
            Span(
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
        return self._make(rec, sid, r, enc.head(limit), targets, lost, len(rendered.spans))


# -- rows and packing ----------------------------------------------------------------
MIXED = "mixed"
"""A packed row's `domain` when its samples come from more than one domain."""


def _shared(domains: Iterable[str]) -> str:
    """The one domain of a packed row's samples, or `MIXED`: the first sample's would
    make a trainer's per-domain filter take rows of other domains."""
    found = set(domains)
    return found.pop() if len(found) == 1 else MIXED


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


class Packer:
    """Samples -> rows (writers.PACKED_SCHEMA) of exactly `seq_len` tokens, padded with
    `pad_id` (the tokenizer's end-of-document id, which the manifest names; never a
    target); `doc_boundaries` says where each sample starts.

    Best fit decreasing within each window of `window` samples (in arrival order), so
    memory holds one window; a corpus no larger than the window packs exactly as
    whole-corpus best fit would. Rows are numbered across windows.
    """

    def __init__(self, seq_len: int, pad_id: int, window: int):
        if window < 1:
            raise ValueError(f"pack_window must be at least 1, got {window}")
        self.seq_len, self.pad_id, self.window = seq_len, pad_id, window
        self.buffer: list[Sample] = []
        self.rows = 0

    def add(self, sample: Sample) -> Iterator[dict[str, Any]]:
        if len(sample.input_ids) > self.seq_len:
            raise ValueError(
                f"sample {sample.sample_id}: {len(sample.input_ids)} tokens exceed seq_len {self.seq_len}"
            )
        self.buffer.append(sample)
        if len(self.buffer) >= self.window:
            yield from self.flush()

    def flush(self) -> Iterator[dict[str, Any]]:
        samples, self.buffer = self.buffer, []
        lengths = [(len(s.input_ids), s.sample_id) for s in samples]
        for members in best_fit(lengths, self.seq_len):
            members.sort(key=lambda i: samples[i].sample_id)
            yield self._row([samples[i] for i in members])

    def _row(self, members: list[Sample]) -> dict[str, Any]:
        ids = np.full(self.seq_len, self.pad_id, dtype=np.int32)
        mask = np.zeros(self.seq_len, dtype=np.uint8)
        bounds, pos = [], 0
        for s in members:
            n = len(s.input_ids)
            ids[pos : pos + n] = s.input_ids
            mask[pos : pos + n] = s.loss_mask
            bounds.append(pos)
            pos += n
        self.rows += 1
        return {
            "sample_id": f"pack{self.rows - 1:07d}",
            "sample_ids": [s.sample_id for s in members],
            "trajectory_id": members[0].trajectory_id,
            "domain": _shared(s.domain for s in members),
            "input_ids": ids,
            "loss_mask": mask,
            "doc_boundaries": bounds,
            "num_tokens": pos,
            "num_loss_tokens": sum(s.num_loss_tokens for s in members),
        }
