"""`worldtrace export`: processed trajectories -> token-level loss-masked training shards.

Orchestration only: stream record batches (inputs.py) -> route each record to its part
(train, or a held-out part of `--split`) -> samples (samples.py) -> rows, packed within
a window -> writers (writers.py) -> one manifest per part. Rendering is in render.py and
prompt.py, tokenizer and loss masks in tokens.py.

Determinism: records are read in stored order, every draw (keep, sampled turn, split)
is a hash of (id, seed), shard names are fixed and manifests hold no clock, so the same
processed shards and settings give byte-identical files. The split has its own seed
(`split_seed`), so exports of several mask draws (`seed`) hold out the same clusters.
"""

from __future__ import annotations

import json
import logging
import re
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import asdict, dataclass, fields
from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING, Any

from worldtrace.schemas import fields as F
from worldtrace.schemas.hashing import sha256_file
from worldtrace.schemas.publish import reading, tables_run
from worldtrace.schemas.records import is_synthetic
from worldtrace.schemas.store import row_count
from worldtrace.schemas.tempfiles import DamagedFile, first_line

from .inputs import AWB_WANTED, CLUSTER, check_input, iter_batches, kept_nothing
from .mask import KEEP_MODES, unit_draw
from .prompt import SystemPrompt
from .render import BUILTIN, Template, load_template
from .samples import (
    MAIN_PART,
    NO_TARGET,
    OVERFLOWS,
    PART,
    SAMPLE_MODES,
    SAMPLE_TURNS,
    SYNTHETIC_KEY,
    TRUNCATED,
    Packer,
    Sample,
    SampleBuilder,
    SampleConfig,
    domain_totals,
)
from .tokens import EOD_TOKENS, eod_id, load_tokenizer, tokenizer_info
from .writers import (
    FORMATS,
    LABEL_SHIFT,
    MANIFEST,
    AgentWorldBenchLines,
    OutputRefused,
    agentworldbench_lines,
    check_output,
    output_lock,
    row_writer,
    shard_entries,
    staged,
    write_manifest,
)

if TYPE_CHECKING:
    from .selection import Selection

__all__ = ["FORMATS", "TOKEN_FORMATS", "TOKEN_SETTINGS", "ExportConfig", "export", "parse_split"]

log = logging.getLogger(__name__)

SPLIT_BY = "dedup.cluster_id"
TOKEN_FORMATS = tuple(f for f in FORMATS if f != "agentworldbench")
"""The formats that tokenize: parquet and megatron."""
TOKEN_SETTINGS = ("tokenizer", *(f.name for f in fields(SampleConfig) if f.name != "seed"))
"""Settings only TOKEN_FORMATS read. AgentWorldBench writes text, one line per target turn
of the keep_mode=turn draw, so of the sample settings it reads only `seed` (a new sample
setting is refused with it until it reads one)."""
MAX_SEQ_LEN = 2**31 - 2
"""The longest packed row: `num_tokens` and Parquet's list offsets are int32, and a
Megatron document is the row and its end-of-document token."""
EVAL_PART = "test"
"""AgentWorldBench files of an export without `split` are eval sets: `<domain>_test.jsonl`."""
SYNTHETIC_COUNTS = ("synthetic_trajectories", "synthetic_samples")
SIMULATED_COUNT = "simulated_trajectories"
"""Manifest count of the trajectories collected from the Android device simulator."""
"""Manifest counts of what came from generated records (samples: AgentWorldBench lines)."""


def is_simulated(rec: Mapping[str, Any]) -> bool:
    """Whether a record was collected from the bundled Android device simulator (its model,
    `F.SIMULATOR_MODEL`, in `environment.config`): the pipeline's test data, not a real
    device's answers."""
    config = (rec.get(F.ENVIRONMENT) or {}).get("config")
    if not isinstance(config, str) or F.SIMULATOR_MODEL not in config:
        return False
    try:
        return json.loads(config).get("model") == F.SIMULATOR_MODEL
    except (ValueError, AttributeError):
        return False


@dataclass
class ExportConfig(SampleConfig):
    """One export: where from and to, the format, and (inherited) the sample and mask settings."""

    input: str = ""
    """Processed trajectories directory (store processed/trajectories)."""
    output: str = ""
    """Export directory: new, empty or an earlier export, replaced as a whole when the export succeeds."""
    tokenizer: str = ""
    """Path of a Hugging Face tokenizer.json."""
    format: str = "parquet"
    """parquet, megatron or agentworldbench (JSONL eval sets: no tokenizer, template, mask or length settings)."""
    split: str | None = None
    """Hold out whole dedup clusters, e.g. test=0.02 (or test=0.02,valid=0.01; from Python also a mapping): each part goes to OUTPUT/<part>/ with its own manifest, the rest to OUTPUT/train/. Parts draw in the order given: a part added after the others leaves them as they were."""
    split_seed: int = 0
    """Seed of the split's draw (which dedup clusters are held out); the mask seed does not move it, so exports of several mask draws hold out the same clusters."""
    where: str | None = None
    """Only the trajectories for which this DuckDB condition on the `trajectories` view's columns holds, e.g. "domain = 'terminal'" or "outcome.status = 'success'" (`worldtrace query --views` lists the columns)."""
    simulation_instructions: str | None = None
    """YAML/JSON file mapping domain -> simulation instruction, or a directory of <domain>.md files; replaces worldtrace's own text for those domains."""
    shard_rows: int = 4096
    """Not read: Parquet shards are cut at 256 MiB (kept because manifests record it)."""

    def check(self) -> None:
        """Raise ValueError naming the first setting outside its choices or range, or the
        token settings changed for a format that does not read them."""
        for name, allowed in (
            ("format", FORMATS),
            ("keep_mode", KEEP_MODES),
            ("sample_mode", SAMPLE_MODES),
            ("sample_turns", SAMPLE_TURNS),
            ("overflow", OVERFLOWS),
        ):
            value = getattr(self, name)
            if value not in allowed:
                raise ValueError(f"{name} must be one of {', '.join(allowed)}, got {value!r}")
        self._check_format_reads()
        for name, least, meaning in (
            ("max_len", 0, "0 (no limit) or a number of tokens"),
            ("seq_len", 0, "0 (no packing) or a number of tokens"),
            ("pack_window", 1, "a number of samples, at least 1"),
        ):
            value = getattr(self, name)
            if value < least:
                raise ValueError(f"{name} must be {meaning}, got {value!r}")
        if self.seq_len > MAX_SEQ_LEN:  # pyarrow said `Negative offsets in list array`, at the end
            raise ValueError(
                f"seq_len {self.seq_len} is more tokens than a row holds: at most {MAX_SEQ_LEN} "
                "(a packed row's token count is an int32, and a Megatron document is one "
                "token longer)"
            )
        for name in ("seed", "split_seed"):  # the store's `exports` view reads them as int64
            if not -(2**63) <= (value := getattr(self, name)) < 2**63:
                raise ValueError(
                    f"{name} {value} is not an integer of 64 bits ({-(2**63)} to {2**63 - 1})"
                )
        if self.seq_len and self.max_len > self.seq_len:
            raise ValueError(f"max_len {self.max_len} exceeds seq_len {self.seq_len}")
        if self.sample_turns != SAMPLE_TURNS[0] and self.sample_mode != "turn":
            raise ValueError(  # it would be dropped: a trajectory sample holds every turn
                f"sample_turns {self.sample_turns} needs sample_mode turn, got {self.sample_mode}"
            )
        self._check_needs()
        parse_split(self.split)

    def unread(self) -> dict[str, str]:
        """Settings nothing reads, the others being as they are -> what would read them:
        without packing no window is used, without a length limit nothing overflows, a
        built-in template has its own end-of-turn text."""
        needs = (
            ("pack_window", "seq_len (packing)", self.seq_len),
            ("overflow", "max_len or seq_len (a length limit)", self.max_len or self.seq_len),
            ("template_eot", "a Jinja template file", self.template not in BUILTIN),
        )
        return {name: what for name, what, met in needs if not met}

    def _check_needs(self) -> None:
        """Refuse a setting changed where nothing reads it (`unread`): it would be recorded
        in the manifest as if it had acted. The CLI also refuses one typed at its default."""
        default = ExportConfig()
        for name, needs in self.unread().items():
            if (value := getattr(self, name)) != getattr(default, name):
                raise ValueError(f"{name} {value!r} needs {needs}; without it nothing reads it")

    def _check_format_reads(self) -> None:
        """Refuse a token setting changed for a format that does not read it: it would be
        recorded in the manifest without having changed anything. `tokenizer` is let
        through (a path callers pass to every format); the CLI also refuses a token option
        given at its default, which a dataclass cannot tell from one left alone."""
        if self.format in TOKEN_FORMATS:
            return
        unread = ExportConfig()
        changed = [
            n for n in TOKEN_SETTINGS if n != "tokenizer" and getattr(self, n) != getattr(unread, n)
        ]
        if changed:
            raise ValueError(unread_by_format(changed, self.format))


def unread_by_format(names: Iterable[str], fmt: str, format_name: str = "format") -> str:
    """One line: these settings (field names, or options as typed) do nothing in `fmt`."""
    names = list(names)
    verb = "applies" if len(names) == 1 else "apply"
    return (
        f"{', '.join(names)} {verb} only to {format_name} {' and '.join(TOKEN_FORMATS)}, "
        f"not {fmt} (text eval sets, no tokens)"
    )


def parse_split(spec: str | Mapping[str, Any] | None) -> dict[str, float]:
    """`"test=0.02,valid=0.01"` or a mapping -> {part: fraction}, in the order given: the
    order the parts take their ranges of the draw in (`split_ranges`). Names are words
    other than `train`, none two equal but for case (`Test/` and `test/` are one
    directory on a case-insensitive file system: macOS's, Windows')."""
    if not spec:
        return {}
    if isinstance(spec, str):
        items: dict[str, Any] = {}
        for item in spec.split(","):
            name, sep, frac = item.partition("=")
            if not sep:
                raise ValueError(f"split: {item!r} is not PART=FRACTION (e.g. test=0.02)")
            if name.strip() in items:
                raise ValueError(f"split: part {name.strip()!r} is given twice in {spec!r}")
            items[name.strip()] = frac.strip()
    else:
        items = dict(spec)
    out: dict[str, float] = {}
    folded: dict[str, str] = {}
    for name, frac in items.items():
        if not re.fullmatch(r"[A-Za-z0-9_-]+", str(name)) or name.lower() == MAIN_PART:
            raise ValueError(f"split: part name {name!r} must be a word other than {MAIN_PART!r}")
        if (other := folded.setdefault(name.lower(), name)) != name:
            raise ValueError(
                f"split: parts {other!r} and {name!r} differ only in case: on a "
                "case-insensitive file system (macOS, Windows) they are one directory; "
                "name them apart"
            )
        try:
            out[name] = float(frac)
        except (TypeError, ValueError):
            raise ValueError(f"split.{name}: {frac!r} is not a number") from None
        if not 0 < out[name] < 1:
            raise ValueError(f"split.{name}: {frac} is not a fraction in (0, 1)")
    total = sum(map(_exact, out.values()), Fraction(0))
    if total >= 1 or float(total) >= 1:  # in floats 0.3 + 0.6 + 0.1 < 1
        raise ValueError(f"split: the fractions sum to {float(total)}, leaving no train part")
    return out


def _exact(frac: float) -> Fraction:
    """A fraction as it reads (the shortest decimal that is this float: `0.1`), not the
    binary value it stands for, so sums are what the user adds up (0.1 + 0.2 = 0.3)."""
    return Fraction(repr(float(frac)))


def split_ranges(fractions: dict[str, float]) -> dict[str, list[float]]:
    """Each held-out part's range [from, to) of the split draw: one after another from 0,
    in the order the parts were given, so a part's range depends only on the parts
    before it (adding one after, or changing it, moves none before; a single part is
    [0, fraction), the draw of every version). Until 2026-12-06 the order was the names'
    (`dev=0.05,test=0.1` moved test's range and 139 of its 304 trajectories came from the
    train of `test=0.1`). The ends are the fractions' exact decimal sums, each rounded
    once, so they read as typed (`test=0.1,valid=0.2`: valid [0.1, 0.3]; float sums gave
    0.30000000000000004) and a part's end is the next one's start, the same float: every
    draw is in one part."""
    out, acc = {}, Fraction(0)
    for name, frac in fractions.items():
        low = float(acc)
        acc += _exact(frac)
        out[name] = [low, float(acc)]
    return out


def part_at(u: float, ranges: dict[str, list[float]]) -> str:
    """The part whose range [from, to) holds the draw `u`; train when none does."""
    for name, (low, high) in ranges.items():
        if low <= u < high:
            return name
    return MAIN_PART


def part_of(cluster: str, ranges: dict[str, list[float]], seed: int) -> str:
    """The part a dedup cluster goes to: the one whose range (`split_ranges`) holds a
    hash draw of (cluster id, split seed), so every member of a cluster lands on the same
    side, whatever the mask seed."""
    return part_at(unit_draw(cluster, "split", seed), ranges)


class PartSink:
    """One output part: samples -> rows (packed within a window when seq_len is set) -> writer."""

    def __init__(
        self,
        cfg: ExportConfig,
        directory: Path,
        part: str,
        packer: Packer | None,
        eod: int | None = None,
    ):
        directory.mkdir(parents=True, exist_ok=True)
        self.directory, self.packer = directory, packer
        self.writer = row_writer(cfg.format, directory, bool(cfg.seq_len), part, eod)

    def add(self, sample: Sample) -> None:
        if self.packer is None:
            self.writer.add(sample.row())
            return
        for row in self.packer.add(sample):
            self.writer.add(row)

    def close(self) -> int:
        if self.packer is not None:
            for row in self.packer.flush():
                self.writer.add(row)
        return self.writer.close()


def export(
    cfg: ExportConfig,
    batch: int = 256,
    progress: Callable[[int, int], None] | None = None,
    *,
    run_seed: bool = False,
    total: Callable[[int], None] | None = None,
) -> dict[str, Any]:
    """Write the export into `cfg.output` (replacing what was there) and return its
    manifest (for a split export, the top manifest naming each part's). `progress` is
    called with (trajectories read, trajectories read) after each batch, and `total`
    first with the number of trajectories of the input (a progress bar's total).
    `run_seed`: draw at the processing run's seed (its manifest's `config.seed`, else
    `cfg.seed`), as the CLI does without `--seed`.

    processed/'s lock is taken first and held to the end, and the run's seed and policy
    are read under it: the export is wholly of one run, and a `process` run writing
    refuses it at once. (Earlier versions read them before the lock, then loaded the
    template and tokenizer: a run publishing meanwhile gave the new run's rows under the
    old run's seed and policy, a third of the masks off the `turns` table's `in_loss`.)"""
    cfg.check()
    _check_apart(check_output(cfg.output), cfg)  # refused before anything is read or written
    # one export to a directory at a time; one run's tables: a `process` run may not swap
    # them while they are read
    with output_lock(cfg.output), reading(Path(cfg.input).parent):
        policy, run_id = _run_settings(cfg, run_seed)  # said before any work is done
        if total is not None:
            total(row_count(cfg.input))
        return _export(cfg, batch, progress, policy, run_id)


def _run_settings(cfg: ExportConfig, run_seed: bool) -> tuple[dict | None, str | None]:
    """The processing run's mask policy and id, its seed put in `cfg` when `run_seed`: its
    manifest read once, under the lock (`export`), so all three are of the tables read."""
    run = processing_run(cfg.input) or {}
    seed = (run.get("config") or {}).get("seed")
    if run_seed and seed is not None and seed != cfg.seed:
        cfg.seed = seed
        try:
            cfg.check()
        except ValueError as exc:  # a processing seed past 64 bits
            raise ValueError(
                f"the processing run's seed: {exc}: pass --seed N, or process again with "
                "`worldtrace process --rebuild --set seed=N`"
            ) from None
    return run.get("policy"), tables_run(run)


def _export(
    cfg: ExportConfig, batch: int, progress, policy: dict | None, run_id: str | None = None
) -> dict[str, Any]:
    """`export` under processed/'s lock."""
    fractions = parse_split(cfg.split)
    selection = None
    if cfg.where is not None:  # refused before the tokenizer loads (~1 s) or a row is read
        from .selection import Selection

        selection = Selection(cfg.where, Path(cfg.input))
        selection.check(check_input(cfg.input)[0])
    prompt = SystemPrompt.from_file(cfg.simulation_instructions)
    template = load_template(cfg.template, cfg.template_eot)
    awb = cfg.format == "agentworldbench"
    tok = None if awb else load_tokenizer(cfg.tokenizer)
    eod = None if awb else eod_id(tok)
    if eod is None and (needs := _needs_eod(cfg)):
        raise ValueError(
            f"{cfg.tokenizer}: no end-of-document token ({', '.join(EOD_TOKENS)}); {needs}"
        )
    if tok is not None and (as_text := markers_as_text(template, tok)):
        log.warning(_markers_warning(cfg, template, as_text))
    builder = SampleBuilder(cfg, template, tok, prompt)
    check_input(cfg.input)
    names = [MAIN_PART, *fractions]
    trajectories: Counter[str] = Counter()
    synthetic: Counter[str] = Counter()  # generated trajectories, per part
    simulated: Counter[str] = Counter()  # the device simulator's, per part
    with staged(cfg.output) as staging:
        dirs = {n: staging / n if fractions else staging for n in names}
        records = _routed(
            iter_batches(cfg.input, batch, selection, AWB_WANTED if awb else ()),
            fractions,
            cfg.split_seed,
            trajectories,
            progress,
            selection,
            synthetic,
            simulated,
        )
        if awb:
            n_rows = _write_awb(records, dirs, fractions, prompt, builder, cfg.seed)
        else:
            n_rows = _write_rows(cfg, records, dirs, builder, eod)
        _check_targets(cfg, builder, trajectories, selection)  # before the output is replaced
        manifests = {}
        for n in names:
            m = _manifest(cfg, builder, prompt, tok, trajectories[n], n_rows[n], n, policy)
            m[PROCESSING_RUN] = run_id
            m["counts"].update(
                zip(SYNTHETIC_COUNTS, (synthetic[n], builder.synthetic[n]), strict=True)
            )
            m["counts"][SIMULATED_COUNT] = simulated[n]
            if selection is not None:
                m["where"] = _where_info(selection)
            if fractions:
                m["split"] = _split_info(fractions, cfg.split_seed, n)
            m["shards"] = shard_entries(dirs[n])
            write_manifest(dirs[n], m)
            manifests[n] = m
        if not fractions:
            return manifests[MAIN_PART]
        top = _top_manifest(cfg, fractions, manifests, dirs)
        top[PROCESSING_RUN] = run_id
        if selection is not None:
            top["where"] = _where_info(selection)
        write_manifest(staging, top)
    return top


def markers_as_text(template: Template, tok) -> dict[str, int]:
    """The markers of a built-in template (`Template.markers`: chatml's `<|im_start|>`,
    `<|im_end|>`) that are no added token of `tok`, each with the number of tokens it is
    written as. Such a marker is plain text, tokenized as the same text in an observation
    is: the model cannot tell the template's turn boundary from content that writes one,
    and the end-of-turn it learns to predict is several tokens, none of them a stop token."""
    added = {t.content for t in tok.get_added_tokens_decoder().values()}
    return {
        m: len(tok.encode(m, add_special_tokens=False).ids)
        for m in template.markers
        if m not in added
    }


def _markers_warning(cfg: ExportConfig, template: Template, as_text: dict[str, int]) -> str:
    said = ", ".join(f"{m} ({n} token{'s' if n != 1 else ''})" for m, n in as_text.items())
    return (
        f"{cfg.tokenizer}: the {template.name} template's {said} "
        f"{'is no token' if len(as_text) == 1 else 'are no tokens'} of this tokenizer: each "
        "is written as plain text, as an observation holding that text is, so a turn's "
        "boundary cannot be told from content and its end-of-turn is no single token; "
        "export with this tokenizer's own chat markers (--template FILE.j2 "
        "--template-eot TEXT) or --template plain"
    )


def _needs_eod(cfg: ExportConfig) -> str:
    """Why this export needs an end-of-document token ("" when it does not): padding
    with any other id (earlier versions took id 0) would pad with a token the manifest
    does not name, so a trainer could not tell padding from text."""
    if cfg.format == "megatron":
        return "a Megatron export ends every document with one"
    if cfg.seq_len:
        return "packing (--seq-len) pads rows with it: export unpacked, or use a tokenizer with one"
    return ""


def _check_apart(out: Path, cfg: ExportConfig) -> None:
    """Refuse an output that is, holds or lies inside the input: replacing it would
    remove the data being read."""
    inp = Path(cfg.input).resolve()
    if out == inp or out in inp.parents or inp in out.parents:
        how = "is inside" if inp in out.parents else "holds"
        raise OutputRefused(
            f"will not write the export to {cfg.output}: it {how} the input {cfg.input}"
        )


def _check_targets(
    cfg: ExportConfig,
    builder: SampleBuilder,
    read: Counter[str],
    selection: Selection | None = None,
) -> None:
    """Refuse an export with no target token: training on it computes cross-entropy over
    nothing (nan). Samples without a target are left out, so no sample means no target."""
    stats = builder.stats.values()
    if any(s.samples for s in stats):
        return
    if not sum(read.values()):
        if selection is not None and selection.left_out:
            raise ValueError(
                f"no trajectory to export: --where left out all {selection.left_out} "
                f"trajectories under {cfg.input} ({selection.where}); nothing written"
            )
        said = kept_nothing(cfg.input)
        raise ValueError(said or f"no trajectory to export: the shards under {cfg.input} hold none")
    turns = sum(n["turns"] for s in stats for n in s.without_target.values())
    samples = sum(n["samples"] for s in stats for n in s.without_target.values())
    limit = builder.max_len
    why = (
        f" (at most {limit} tokens a sample: is --max-len/--seq-len too short to leave room"
        " for an observation after the system prompt?)"
        if limit
        else ""
    )
    raise ValueError(
        f"no target token in the export: none of the {sum(read.values())} trajectories gave a "
        f"sample with a target ({samples} sample(s) and {turns} turn(s) had none){why}; "
        "nothing written"
    )


def _routed(
    batches: Iterable[list[dict[str, Any]]],
    fractions: dict[str, float],
    seed: int,
    counts: Counter[str],
    progress: Callable[[int, int], None] | None = None,
    selection: Selection | None = None,
    synthetic: Counter[str] | None = None,
    simulated: Counter[str] | None = None,
) -> Iterator[list[dict[str, Any]]]:
    """Batches with each record's part set (whole dedup clusters per part), counted, and
    whether it is generated (`SYNTHETIC_KEY`, counted in `synthetic`), those from the
    device simulator counted in `simulated`; `progress` counts
    the records `selection` left out as read."""
    read, ranges = 0, split_ranges(fractions)
    for records in batches:
        for r in records:
            r[PART] = part_of(r[CLUSTER], ranges, seed) if fractions else MAIN_PART
            counts[r[PART]] += 1
            r[SYNTHETIC_KEY] = is_synthetic(r)
            if r[SYNTHETIC_KEY] and synthetic is not None:
                synthetic[r[PART]] += 1
            if simulated is not None and is_simulated(r):
                simulated[r[PART]] += 1
        yield records
        read += len(records)
        if progress is not None:
            seen = read + (selection.left_out if selection is not None else 0)
            progress(seen, seen)


def _where_info(selection: Selection) -> dict[str, Any]:
    """The condition and how many trajectories of the input it left out (the whole
    export's: in a split export every part's manifest says the same)."""
    return {"condition": selection.where, "left_out": selection.left_out}


def _write_rows(cfg, records, dirs: dict[str, Path], builder, eod: int | None) -> dict[str, int]:
    """Samples -> each part's rows (packed within a window when seq_len is set, padded
    with `eod`); `eod` also ends every Megatron document."""
    megatron_eod = eod if cfg.format == "megatron" else None
    sinks = {
        n: PartSink(
            cfg,
            d,
            n,
            Packer(cfg.seq_len, eod, cfg.pack_window) if cfg.seq_len else None,
            megatron_eod,
        )
        for n, d in dirs.items()
    }
    for sample in builder.samples(records):
        sinks[sample.part].add(sample)
    return {n: s.close() for n, s in sinks.items()}


def _write_awb(records, dirs, fractions, prompt, builder, seed) -> dict[str, int]:
    writers = {n: AgentWorldBenchLines(d, n if fractions else EVAL_PART) for n, d in dirs.items()}
    for batch in records:
        for rec in batch:
            system = prompt.text(rec)
            stats = builder.stats[rec[PART]]
            lines = 0
            for line in agentworldbench_lines(rec, system, seed, bool(rec.get(SYNTHETIC_KEY))):
                writers[rec[PART]].add(rec[F.DOMAIN], line)
                stats.add(rec[F.DOMAIN])
                lines += 1
            # one line per target turn, as turn samples: the others are counted, not written
            stats.without_target[rec[F.DOMAIN]]["turns"] += len(rec[F.TURNS]) - lines
            if rec.get(SYNTHETIC_KEY):
                builder.synthetic[rec[PART]] += lines
    return {n: w.close() for n, w in writers.items()}


def _split_info(fractions: dict[str, float], seed: int, part: str | None = None) -> dict:
    """The split: fractions, its seed (`split_seed`, not the mask seed), what is held out
    whole, and each part's range of the draw (`ranges`: the manifest's keys are sorted,
    so the order the parts were given is said by their ranges)."""
    info = {"fractions": fractions, "seed": seed, "by": SPLIT_BY, "ranges": split_ranges(fractions)}
    return {**info, "part": part} if part else info


def _manifest(cfg, builder, prompt, tok, n_in: int, n_rows: int, part: str, policy=None) -> dict:
    """Everything needed to reproduce and check one part, except its shard list. A text
    format's has no template nor sampling: it used none (the `exports` view showed the
    default chatml for AgentWorldBench files)."""
    tokens = cfg.format in TOKEN_FORMATS
    return {
        "schema_version": F.TRAINING_SCHEMA_VERSION,
        "format": cfg.format,
        "part": part,
        "tokenizer": tokenizer_info(cfg.tokenizer, tok) if tok else None,
        "template": {
            "name": builder.template.name,
            "sha256": builder.template.sha256,
            "eot": builder.template.eot,
            "eot_target": cfg.eot_target,
        }
        if tokens
        else None,
        "simulation_instructions": prompt.describe(cfg.simulation_instructions),
        "mask_policy": policy,
        "keep_mode": cfg.keep_mode,
        "seed": cfg.seed,
        "sampling": None
        if not tokens
        else {
            "mode": cfg.sample_mode,
            "turns": cfg.sample_turns,
            "max_len": builder.max_len,
            "overflow": cfg.overflow,
            "seq_len": cfg.seq_len,
            "pack_window": cfg.pack_window,
            # the id every sample starts with (null when they differ): `--verify` checks
            # every document start of the rows against it
            "doc_start_id": builder.stats[part].doc_start_id,
        },
        "label_shift": LABEL_SHIFT,
        "only_observation_tokens_are_targets": True,
        "counts": {
            "trajectories": n_in,
            "rows": n_rows,
            **builder.stats[part].as_dict(),
            # Megatron: one end-of-document token after every row, not in `tokens`
            **({"eod_tokens": n_rows} if cfg.format == "megatron" else {}),
        },
        "config": {
            k: v for k, v in asdict(cfg).items() if k not in ("input", "output", "tokenizer")
        },
    }


def _top_manifest(cfg, fractions, manifests: dict[str, dict], dirs: dict[str, Path]) -> dict:
    """The split export's own manifest: the split and each part's manifest (path, sha256)."""
    keys = (
        "trajectories",
        "samples",
        "rows",
        "tokens",
        "loss_tokens",
        *SYNTHETIC_COUNTS,
        SIMULATED_COUNT,
    )
    first = next(iter(manifests.values()))
    # what every part shares, said at the top too (the `exports` view reads the top)
    shared = ("tokenizer", "template", "keep_mode", "seed", "simulation_instructions", "config")
    return {
        "schema_version": F.TRAINING_SCHEMA_VERSION,
        "format": cfg.format,
        **{k: first[k] for k in shared if k in first},
        "split": _split_info(fractions, cfg.split_seed),
        "parts": {
            n: {
                "path": n,
                "manifest_sha256": sha256_file(str(dirs[n] / MANIFEST)),
                "counts": {k: m["counts"][k] for k in keys},
            }
            for n, m in manifests.items()
        },
        "counts": {
            **{k: sum(m["counts"][k] for m in manifests.values()) for k in keys},
            "system_trimmed": sum(m["counts"].get("system_trimmed", 0) for m in manifests.values()),
            # every other count of the parts, added up (they were left out until 2026-12-06)
            **{
                k: _added([m["counts"][k] for m in manifests.values()])
                for k in ("eod_tokens", "by_domain", "by_category")
                if all(k in m["counts"] for m in manifests.values())
            },
            **{
                name: domain_totals(_summed_by_domain(manifests, name, counted), counted)
                for name, counted in (("truncated", TRUNCATED), ("turns_without_target", NO_TARGET))
            },
        },
    }


def _added(values: list[Any]) -> Any:
    """Counts added up: numbers, and mappings of them key by key (`by_domain`)."""
    if all(isinstance(v, dict) for v in values):
        keys = dict.fromkeys(k for v in values for k in v)
        return {k: _added([v[k] for v in values if k in v]) for k in keys}
    return sum(values)


def _summed_by_domain(
    manifests: dict[str, dict], name: str, keys: tuple[str, ...]
) -> dict[str, dict[str, int]]:
    """The parts' `counts.<name>.by_domain`, added up."""
    out: dict[str, dict[str, int]] = {}
    for m in manifests.values():
        for d, v in m["counts"][name]["by_domain"].items():
            acc = out.setdefault(d, dict.fromkeys(keys, 0))
            for k in keys:
                acc[k] += v[k]
    return dict(sorted(out.items()))


PROCESS_FIX = "`worldtrace process --rebuild` writes it again"
PROCESSING_RUN = "processing_run"
"""The manifest field naming the `worldtrace process` run whose tables an export read
(`publish.tables_run`; null for an input without a run manifest): the `exports` view tells an export
made before the processed data was replaced by a later run (`current_run` false)."""


def processing_run(input_dir: str) -> dict[str, Any] | None:
    """The manifest of the `worldtrace process` run whose output `input_dir` is (the
    `manifest.json` beside it), None when there is none. Export records its mask `policy`
    and the CLI takes its `config.seed` as the default `--seed`, so one that does not read,
    is not a JSON object, or holds either of them in another shape is `DamagedFile`
    naming the file and the field, before anything is read or written (earlier versions
    read it after the whole export: a traceback for a JSON list, a JSON error naming no
    file for a cut one, and a policy of another shape recorded as it was)."""
    path = Path(input_dir).parent / F.PROCESS_MANIFEST
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:  # a directory, unreadable, not UTF-8
        raise DamagedFile(
            path, f"the processing run's manifest does not read ({first_line(exc)})", PROCESS_FIX
        ) from None
    try:
        m = json.loads(text)
    except ValueError as exc:
        raise DamagedFile(
            path, f"the processing run's manifest is not JSON ({exc})", PROCESS_FIX
        ) from None
    if not isinstance(m, dict):
        raise DamagedFile(
            path,
            f"the processing run's manifest is a JSON {type(m).__name__}, not an object",
            PROCESS_FIX,
        )
    config = m.get("config")
    seed = config.get("seed") if isinstance(config, dict) else None
    for field, value, ok in (
        ("policy", m.get("policy"), lambda v: isinstance(v, dict)),
        ("config", config, lambda v: isinstance(v, dict)),
        ("config.seed", seed, lambda v: isinstance(v, int) and not isinstance(v, bool)),
    ):
        if value is not None and not ok(value):
            raise DamagedFile(
                path,
                f"{field} of the processing run's manifest is {json.dumps(value)[:80]}, not "
                + ("an integer" if field == "config.seed" else "an object"),
                PROCESS_FIX,
            )
    return m


def processing_seed(input_dir: str) -> int | None:
    """The seed of the processing run whose output `input_dir` is (`process --set seed=N`):
    the seed of the keep draw the `turns` table shows as `in_loss`; None when unknown."""
    return ((processing_run(input_dir) or {}).get("config") or {}).get("seed")
