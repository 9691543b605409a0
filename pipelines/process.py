"""`worldtrace process`: raw shards -> processed shards, as one Beam pipeline.

Incremental by default: only raw files not processed before are read; their records are
deduplicated against everything processed earlier (the segments and cluster state under
`processed/_index/`) and the corpus template counts are updated, so the tables equal a
full rebuild on the same data (`ProcessConfig.rebuild`). Output goes to a hidden run
directory and is published table by table only after the pipeline succeeded, so
readers never see a half-written run.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shlex
import shutil
import socket
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import apache_beam as beam
import pyarrow as pa
import pyarrow.compute as pc
from apache_beam.metrics.metric import MetricsFilter
from apache_beam.options.pipeline_options import DirectOptions, PipelineOptions, StandardOptions
from worldtrace.schemas import fields as F
from worldtrace.schemas.config import SettingError, as_overrides, check, max_workers, to_dict
from worldtrace.schemas.hashing import recorded_key, sha256_file, stat_key
from worldtrace.schemas.publish import (
    TABLES_RUN,
    StoreBusy,
    busy_said,
    finish_stopped,
    pending,
    run_manifest,
    tables_run,
)
from worldtrace.schemas.publish import publish as journalled_publish
from worldtrace.schemas.store import (
    broken_link,
    input_files,
    read_parquet,
    rebased,
    shard_files,
    sweep_leftovers,
    temp_name,
    try_lock,
    write_bytes_atomic,
    write_table_atomic,
)
from worldtrace.schemas.tempfiles import (
    REBUILD_HINT,
    DamagedFile,
    first_line,
    index_read,
)

from . import recorded as R
from . import segments as G
from . import transforms as T
from .dedup import NS, PARTITIONS, DedupConfig, DedupDecisions, content_column
from .filters import FilterConfig
from .mask import DEFAULT_POLICY, POLICIES, get_policy
from .runner import (
    LANES_FLAG,
    LOCAL_RUNNERS,
    EmbeddedJobRunner,
    LaneOptions,
    LocalRunner,
    can_fork,
    embedded,
)
from .state import NO_REWRITE, EarlierRecords, ProbeIndex, RecordState, complete_state
from .units import name_root, plan_run
from .watch import Progress, RunWatch

MANIFEST = F.PROCESS_MANIFEST
TABLES = ("trajectories", "turns", "clusters", "rejects")


@dataclass
class ProcessConfig:
    """One processing run."""

    inputs: list[str] = field(default_factory=list)
    """Files or directories of raw shards (Parquet) and trajectory JSONL."""
    output: str = ""
    """The store's processed/ directory."""
    filters: FilterConfig = field(default_factory=FilterConfig)
    dedup: DedupConfig = field(default_factory=DedupConfig)
    policy: str = DEFAULT_POLICY
    """Mask policy name (agentworld-v1, agentworld-v1+info)."""
    policy_settings: dict[str, Any] = field(default_factory=dict)
    """Threshold / keep overrides for the policy, e.g. echo_ol: 0.8, keep.echo: 0."""
    seed: int = 0
    """Seed of the per-turn keep draw shown in the turns table (`in_loss`)."""
    rebuild: bool = False
    """Reprocess every input from scratch instead of only the raw files not seen before
    (needed after changing filters, dedup, policy or seed: earlier output used the old ones)."""
    runner: str = "DirectRunner"
    """Beam runner: DirectRunner, PortableRunner, FlinkRunner, SparkRunner, DataflowRunner
    (see infra/runners.md for the flags each needs)."""
    workers: int = 0
    """DirectRunner worker processes; 1 = in-process; 0 = auto: one per `bytes_per_worker`
    of new input, at most one per core, in-process below two workers' worth; at most 4
    per core (`config.WORKERS_PER_CORE`)."""
    bytes_per_worker: int = 0
    """New input a worker process must have to pay back its start-up; 0 = the measured
    default (`FORKED_BYTES_PER_WORKER` when the workers fork from the run's process, the
    CLI's case; `SPAWNED_BYTES_PER_WORKER` when they start as new interpreters)."""
    beam_args: list[str] = field(default_factory=list)
    """Further Beam pipeline options, passed through."""

    def __post_init__(self) -> None:
        most = max_workers()
        check(self, "workers", 0 <= self.workers <= most, f"0 (auto) to {most} (4 per core)")
        if not self.dedup.num_perm <= MAX_NUM_PERM:  # the dedup settings' own checks ran
            why = f"expected at most {MAX_NUM_PERM} (an estimate within ~3%)"
            raise SettingError("dedup.num_perm", self.dedup.num_perm, why)
        check(self, "bytes_per_worker", self.bytes_per_worker >= 0, "0 (the default) or more")
        check(self, "policy", self.policy in POLICIES, "one of " + ", ".join(POLICIES))
        # the turns table's draw and every export's default: export takes 64 bits only
        check(self, "seed", -(2**63) <= self.seed < 2**63, "an integer of 64 bits")
        # a threshold the policy does not take fails here, naming it, not in a worker: one
        # setting at a time, so the error names the one given (`policy_settings.echo_ol`)
        for key, value in self.policy_settings.items():
            try:
                get_policy(self.policy, **{key: value})
            except (KeyError, TypeError, ValueError) as exc:
                problem = str(exc).removeprefix(f"{key}={value}: ")  # the key is said once
                raise SettingError(f"policy_settings.{key}", value, problem) from exc
        try:  # together (each one alone passed)
            get_policy(self.policy, **self.policy_settings)
        except (KeyError, TypeError, ValueError) as exc:
            raise SettingError("policy_settings", self.policy_settings, str(exc)) from exc


MAX_NUM_PERM = 1024
"""`dedup.num_perm` at most: the MinHash estimate's error is ~1/sqrt(num_perm) (3% at
1,024; 9% at the default 128), and each permutation costs every record its hashes and
4 bytes of signature (`--set dedup.num_perm=100000`: > 120 s on 214 records, a 400 KB
signature each)."""


FORKED_BYTES_PER_WORKER = 384 << 10
"""A forked worker (`runner.can_fork`) costs milliseconds to start. Measured on 2 cores
(docs/pipeline.md#runners): 2 workers are 1.2x faster than in-process at 0.9 MB of raw
shards (two 1,024-row units) and 1.27x at 2.2 MB; a single unit (0.44 MB) cannot be
shared."""
SPAWNED_BYTES_PER_WORKER = 2 << 20
"""A worker started as a new interpreter spends ~1 s of CPU importing Beam and
worldtrace; measured on 2 cores, 2 such workers break even with in-process at 2.3 MB
and are 1.35x faster at 4.5 MB, 1.47x at 9 MB."""
SETTINGS = ("filters", "dedup", "policy", "policy_settings", "seed")
"""The settings earlier output depends on: an incremental run refuses to mix them."""
LAYOUT = 10
"""Layout of processed/ (manifest `layout`): 2 = corpus-count columns joined at read time
(earlier output stored them final and cannot be extended incrementally); 3 = the
cluster state holds each member's `started_at` (the representative rank reads it); 4 =
a turn with an injected fault is decided `injected` (earlier output kept it in the loss
by its statistics, and an incremental run would mix the two); 5 = a typed line's turn
is decided on the answer after its echo (`mask.echo_end`); 6 = the representative's ties
are broken by arrival (`units.arrival_key`: an `arrival` column in segments, probe files
and members instead of `origin`), files in the store are named from its root in uids,
`rejects.source_path` and `clusters.source`, and a turn the collector cut (truncated,
timed out, interrupted) is decided `injected` (`mask.collector_cut`); 7 =
`cond_novelty`'s size given the history is its blocks' bits rounded up, as its size
alone (it read a byte low), singletons are named by their content key and a turn
carries its cluster (`tables.TURN_CLUSTER`: copies kept with dedup off); 8 = the size
alone (`cond_novelty`'s denominator, `zlib_ratio`'s numerator) is framed as in the
history, after a one-byte block (`stats.FRAME`: alone, a self-repetitive observation
came out a byte larger, and scored below 1); 9 = the statistics, words, shingles and
templates read NFC text and exact dedup groups by the content key in NFC (a segment
column, `units.CONTENT`: the same text in NFD was kept twice, decided otherwise), a
verbatim repeat of the context is `cond_novelty` 0 beyond deflate's window
(`stats.verbatim_repeats`), and an empty observation is boilerplate (`mask.NO_OUTPUT`:
it was `transform`, keep 0.5); 10 = a typed line's echo is found whatever its line ends
(`mask.echo_end`: a screen of `\r\n` lines was decided whole), and a GUI page is a
CAPTCHA wall only when it asks for one (`pages.CAPTCHA_RE`: imported pages that mention
reCAPTCHA were dropped), and the LSH shape is weighed for verified candidates
(`minhash.FN_WEIGHT`: 14 x 9 bands at 0.8, not 9 x 13; earlier band keys do not meet)."""


@dataclass
class Previous:
    """What earlier runs left under processed/_index (empty on a first run or rebuild)."""

    index: Path | None = None
    stems: list[str] = field(default_factory=list)
    seen: pa.Table | None = None
    probed: set[str] = field(default_factory=set)
    """Segments the probe files cover (`segments.PROBE`)."""
    moved: bool = False
    """The store moved (or was copied) since the last run, or files were only touched
    (their content hash the one recorded): `seen` holds its files at their new paths and
    stat (`stat_key`), and the shards file is rewritten so even if this run reads
    nothing."""
    read_before: int = 0
    """Records every earlier run read (the last manifest's `accounting.in`)."""
    tables_run: str | None = None
    """The run that published the tables processed/ holds (`publish.tables_run`)."""


def moved_paths(seen: pa.Table, was: str, output: Path) -> tuple[pa.Table, bool]:
    """`seen` with the paths of files inside the store that processed into `was` (the
    last run's output) moved to where that store is now (`output`'s). The index keeps
    absolute paths: after `cp -a` or `mv` every raw shard looked new and was counted and
    deduplicated against itself (in 14, duplicates 8 for 7 records)."""
    if not was:
        return seen, False
    old_root, new_root = Path(was).parent, output.resolve().parent
    if old_root == new_root:
        return seen, False
    paths = seen.column("path").to_pylist()
    moved = [rebased(f, old_root, new_root) for f in paths]
    if moved == paths:
        return seen, False
    return seen.set_column(seen.schema.get_field_index("path"), "path", pa.array(moved)), True


def gone_inputs(prev: Previous) -> list[str]:
    """Files processed before that are gone: their records stay in the processed data
    (an incremental run only adds) until `process --rebuild`; said, not silent."""
    if prev.seen is None:
        return []
    return sorted(f for f in set(prev.seen.column("path").to_pylist()) if not os.path.exists(f))


def load_previous(output: Path, cfg: ProcessConfig) -> Previous:
    index = output / G.INDEX
    manifest = output / MANIFEST
    if cfg.rebuild or not (index / G.SHARDS_FILE).exists() or not manifest.exists():
        return Previous()
    last = run_manifest(manifest)
    if last.get("layout") != LAYOUT:
        raise ValueError(
            f"{output} was processed by an older version (layout {last.get('layout', 1)}, "
            f"now {LAYOUT}): run `worldtrace process --rebuild`"
        )
    before, read_before = last["config"], last["accounting"]["in"]  # `publish.run_manifest`
    now = to_dict(cfg)
    changed = [k for k in SETTINGS if before.get(k) != now.get(k)]
    if _same_policy(before, now):  # `keep.echo=0.05` given is the default, not a change
        changed = [k for k in changed if k not in ("policy", "policy_settings")]
    if changed:
        defaults = to_dict(ProcessConfig())
        last_run = as_overrides(
            {k: before[k] for k in SETTINGS if k in before}, {k: defaults[k] for k in SETTINGS}
        )
        repeat = "".join(f" --set {shlex.quote(o)}" for o in last_run)
        raise ValueError(
            f"settings changed since the last run ({', '.join(changed)}): earlier output used "
            f"the last run's; repeat them to add new data (`worldtrace process{repeat}`), or "
            "add --rebuild to reprocess everything with the new ones"
        )
    stems = sorted(p.stem for p in (index / G.SEGMENTS).glob("*.parquet"))
    seen = read_shards(index / G.SHARDS_FILE)
    seen, moved = moved_paths(seen, before.get("output"), output)
    G.check_index(index, stems)  # before the pipeline starts: one line naming the file
    return Previous(index, stems, seen, G.probed_stems(index), moved, read_before, tables_run(last))


def read_shards(path: Path) -> pa.Table:
    """`_index/shards.parquet` as `segments.SHARDS_SCHEMA`: an index from before hashes
    were kept has null ones, one from before arrivals were kept its files' mtimes for them (the
    best it knows: right unless a file was touched after it was processed), one from
    before ctimes and inodes were kept null ones (each file hashed once, `new_files`).
    One that does not read is `DamagedFile`: without it no file is known to be
    processed."""
    with index_read(path):
        seen = read_parquet(path)
    if "sha256" not in seen.schema.names:
        seen = seen.append_column("sha256", pa.nulls(seen.num_rows, pa.string()))
    if "arrival_ns" not in seen.schema.names:
        seen = seen.append_column("arrival_ns", seen["mtime_ns"])
    for name in ("ctime_ns", "ino"):
        if name not in seen.schema.names:
            seen = seen.append_column(
                name, pa.nulls(seen.num_rows, G.SHARDS_SCHEMA.field(name).type)
            )
    return seen.select(G.SHARDS_SCHEMA.names).cast(G.SHARDS_SCHEMA)


def _same_policy(before: dict[str, Any], now: dict[str, Any]) -> bool:
    """Whether two runs' policy and settings make the same policy (a default value
    given, or the same values written another way)."""
    try:
        return get_policy(
            before.get("policy", DEFAULT_POLICY), **before.get("policy_settings") or {}
        ) == (get_policy(now.get("policy", DEFAULT_POLICY), **now.get("policy_settings") or {}))
    except ValueError:  # an earlier run's settings this version refuses: not the same
        return False


def new_files(files: list[str], prev: Previous, output: Path) -> dict[str, os.stat_result]:
    """Raw files not processed before, with their stat (taken once: their mtime is their
    records' arrival, `units.arrival_key`); a processed file that changed is an error,
    one that is damaged (`recorded`: it no longer reads) an error naming what of the
    processed data (under `output`) comes only from it. A processed file whose size,
    mtime, ctime and inode are the ones recorded is not read (`stat_key`); one where any
    moved is hashed: written in place with its size and mtime kept (`sed`, then
    `touch -r`), its ctime gives it away; copied (`cp -r`, `cp -a`), touched or checked
    out, it is the same file when its content hash is the one recorded, and its new
    stat goes into `prev.seen` (its arrival stays), so it is hashed once."""
    if prev.seen is None:
        return {f: os.stat(f) for f in files}
    rows = prev.seen.to_pylist()
    seen = {r["path"]: r for r in rows}
    out, changed = {}, []
    for f in files:
        st = os.stat(f)
        r = seen.get(f)
        if r is None:
            out[f] = st
        elif recorded_key(r) != stat_key(st):
            if r["size"] != st.st_size or r["sha256"] != sha256_file(f):
                changed.append(f)
                continue
            r["mtime_ns"], r["ctime_ns"], r["ino"] = st.st_mtime_ns, st.st_ctime_ns, st.st_ino
            prev.moved = True
    if changed:
        now = refuse_damaged(output, changed, {f: seen[f]["size"] for f in changed})
        more = f" (and {len(changed) - 1} more)" if changed[1:] else ""
        lost = R.only_from(output, [], now)
        raise ValueError(
            f"{changed[0]}{more}: changed since it was processed; run `worldtrace process "
            f"--rebuild` to process it as it is now ({R.no_longer_held(lost, len(changed))})"
        )
    if prev.moved:
        prev.seen = pa.Table.from_pylist(rows, schema=G.SHARDS_SCHEMA)
    return out


def refuse_damaged(
    output: Path, changed: list[str], sizes: dict[str, int]
) -> dict[str, dict[str, str]]:
    """Stop the run when a raw file processed before is damaged (`recorded.damage`: it no
    longer reads, or it is a JSONL file cut short at a line's end): the processed data
    may hold the last copy of its records, which a rebuild would drop and an incremental
    run cannot keep apart. ValueError naming the files, why, how many processed
    trajectories come only from them, and the ways on. `changed`: the recorded files
    whose size or hash moved (only they are read here), `sizes` their recorded sizes.
    Returns what each holds now (`recorded.held`), for what a rebuild drops of them."""
    damaged, now = [], {}
    for f in changed:
        why = R.read_problem(f)
        if why is None:
            now[f] = R.held(f)
            why = R.lost_records(f, sizes.get(f), output, now[f])
        if why:
            damaged.append((f, why))
    if damaged:
        lost = R.only_from(output, [f for f, _ in damaged])
        raise ValueError(R.damaged_message(damaged, lost))
    return now


def changed_inputs(
    output: Path, seen: pa.Table | None, files: list[str], now: dict[str, dict[str, str]]
) -> dict[str, Any]:
    """What a rebuild drops of the raw files it reads again whose content changed since
    they were processed (`now`: what each holds now, `recorded.held`), named from the
    store's root: the processed trajectories that came only from records they no longer
    hold (or from those and the files it does not read, `dropped_inputs`, which counts
    the rest), counted before the publish replaces the tables; None when unknown. A
    rebuild of a rewritten file dropped the records it no longer held in silence."""
    if not now:
        return {"count": 0, "first": [], "trajectories": 0}
    left = _not_read(seen, files)
    both, alone = R.only_from(output, left, now), R.only_from(output, left)
    root = name_root(output)
    return {
        "count": len(now),
        "first": [R.in_store(f, root) for f in sorted(now)[:REJECTS_SHOWN]],
        "trajectories": None if both is None or alone is None else both - alone,
    }


def _not_read(seen: pa.Table | None, files: list[str]) -> list[str]:
    """The raw files processed before (`seen`) that a run does not read."""
    return [] if seen is None else sorted(set(seen.column("path").to_pylist()) - set(files))


def dropped_inputs(output: Path, seen: pa.Table | None, files: list[str]) -> dict[str, Any]:
    """What a rebuild drops: the raw files processed before (`seen`, the index) that it
    does not read (gone, moved out, or not among its inputs), named from the store's
    root, and how many processed trajectories came only from them (`recorded.only_from`:
    counted before the publish replaces the tables; None when unknown)."""
    if seen is None:
        return {"count": 0, "first": [], "trajectories": 0}
    left = _not_read(seen, files)
    root = name_root(output)
    return {
        "count": len(left),
        "first": [R.in_store(f, root) for f in left[:REJECTS_SHOWN]],
        "trajectories": R.only_from(output, left) if left else 0,
    }


Hashed = dict[str, tuple[tuple[int, int, int, int], str]]
"""path -> (`stat_key`, sha256) of files hashed before a run (`recorded_arrivals`)."""


def recorded_index(output: Path) -> pa.Table | None:
    """The index of the raw files processed (`_index/shards.parquet`), at the store's
    place now; None when there is none or it does not read (an index a rebuild is to
    replace)."""
    index, manifest = output / G.INDEX / G.SHARDS_FILE, output / MANIFEST
    if not index.exists():
        return None
    try:  # where the store was when it was recorded: it may have moved since
        was = json.loads(manifest.read_text()).get("config", {}).get("output")
    except (OSError, ValueError, AttributeError):
        was = None
    try:
        return moved_paths(read_shards(index), was, output)[0]
    except (OSError, ValueError, KeyError):
        return None


def recorded_arrivals(
    seen: pa.Table | None, todo: dict[str, os.stat_result]
) -> tuple[dict, Hashed, list[str]]:
    """A rebuild's files as they arrive: each at its mtime, but one the index (`seen`,
    `recorded_index`) recorded with the content it has now (the same sha256) at its
    recorded arrival, the time it first came in. A `touch`, a restore from backup or a
    copy without times moves a file's mtime after it was processed: the incremental runs
    kept the first time, and a rebuild that took the new one broke the representative's
    ties otherwise (another record of a cluster kept). Returns (path -> arrival in ns,
    the hashes taken, which `merge_state` records instead of hashing the files again: a
    rebuild hashed each one there before, so it hashes no more than it did; the recorded
    files whose size or content moved, which `refuse_damaged` looks at)."""
    arrivals = {f: st.st_mtime_ns for f, st in todo.items()}
    if not todo or seen is None:
        return arrivals, {}, []
    recorded = {r["path"]: r for r in seen.to_pylist() if r["path"] in todo}
    hashed: Hashed = {}
    changed = []
    for f, r in recorded.items():
        st = todo[f]
        if st.st_size != r["size"]:
            changed.append(f)  # new data, arriving now (or a file cut short)
            continue
        if not r["sha256"]:  # an index from before hashes were kept
            if st.st_mtime_ns != r["mtime_ns"]:
                changed.append(f)
            continue
        hashed[f] = (stat_key(st), sha256_file(f))
        if hashed[f][1] == r["sha256"]:
            arrivals[f] = r["arrival_ns"]
        else:
            changed.append(f)
    return arrivals, hashed, changed


class ProcessTrajectories(beam.PTransform):
    """The new files' units (`units.Unit`, as `units.plan_run` plans them) -> segments,
    rejects and final table files under `out`.

    Pass 1 (per unit) writes each unit's scored segment and emits one Sig batch;
    dedup decides on those (with the earlier runs' matches and cluster state); pass 2
    finalises the new segments and rewrites the earlier ones whose records' decisions
    changed. Template counts only update `_index/templates.parquet`: the views join them
    in at read time.
    """

    def __init__(
        self,
        cfg: ProcessConfig,
        out: str,
        prev: Previous,
        spread: bool = True,
        partitions: int = PARTITIONS,
    ):
        super().__init__()
        self.cfg, self.out, self.prev, self.spread = cfg, out, prev, spread
        self.partitions = partitions

    def expand(self, units):
        cfg, out, prev = self.cfg, self.out, self.prev
        policy = get_policy(cfg.policy, **cfg.policy_settings)
        index = str(prev.index) if prev.index else None
        # spread over the workers in the order `units.deal` chose
        spread = units | "Spread" >> beam.Reshuffle() if self.spread else units
        p1 = spread | "Pass1" >> beam.ParDo(pass1(cfg, out)).with_outputs(
            "stems", "probe", main="sigs"
        )
        p1.probe | "ProbeIndex" >> beam.ParDo(ProbeIndex(out))
        sigs, touched = p1.sigs, None
        if prev.index is not None:  # earlier records that meet the new ones
            earlier = EarlierRecords(prev.index, prev.stems, self.spread, prev.probed)
            old = p1.sigs | "Earlier" >> earlier
            sigs = (p1.sigs, old["sigs"]) | "AllSigs" >> beam.Flatten()
            touched = old["touched"]
        indexes = [f"{out}/{G.INDEX}", *([index] if index else [])]
        segments = [f"{i}/{G.SEGMENTS}" for i in indexes]
        source = G.ProbeSigs(indexes, segments, content_column(cfg.dedup.exact))
        dedup = sigs | "Dedup" >> DedupDecisions(
            cfg.dedup, source, self.partitions, earlier=prev.index is not None
        )
        decisions = beam.pvalue.AsDict(dedup["decisions"])
        rewrite = dedup["records"] | "State" >> RecordState(out, decisions, prev.index, touched)
        side = {
            "decisions": decisions,
            "stems": beam.pvalue.AsSingleton(rewrite, default_value=NO_REWRITE),
        }
        finalize = [T._Finalize(out, index, policy, cfg.seed, old=o) for o in (False, True)]
        p1.stems | "FinalizeNew" >> beam.ParDo(finalize[0], **side)
        if prev.stems:
            stems = beam.Create(prev.stems, reshuffle=self.spread)
            earlier = units.pipeline | "EarlierSegments" >> stems
            earlier | "RewriteEarlier" >> beam.ParDo(finalize[1], **side)
        return beam.pvalue.PDone(units.pipeline)


def pass1(cfg: ProcessConfig, out: str) -> T._Pass1:
    """Pass 1's DoFn for a run writing to `out`."""
    policy = get_policy(cfg.policy, **cfg.policy_settings)
    return T._Pass1(out, cfg.filters, cfg.dedup, policy, name_root(cfg.output))


def make_runner(
    cfg: ProcessConfig, options: PipelineOptions
) -> LocalRunner | EmbeddedJobRunner | None:
    """The runner `process` makes itself: the local one (`runner.LocalRunner`), or the
    portable one with an embedded job service (`runner.EmbeddedJobRunner`: a worker
    that dies or never connects fails the run in one line, and a stopped run ends its
    workers before its run directory goes); None: Beam makes the one named."""
    if cfg.runner in LOCAL_RUNNERS:
        return LocalRunner(options)
    return EmbeddedJobRunner() if embedded(options) else None


def finished(result) -> None:
    """Wait for the run; when the wait ends otherwise (a failure, Ctrl-C, SIGTERM), the
    job is cancelled: the embedded job service's ends its workers and waits for them
    (`EmbeddedJobRunner`), another runner's job service is asked to (Flink, Spark,
    Dataflow), so no stage of the run goes on after the command."""
    try:
        result.wait_until_finish()
    except BaseException:
        with suppress(Exception):  # the local runner's result has nothing to cancel
            result.cancel()
        raise


@contextmanager
def pipeline(
    runner: LocalRunner | EmbeddedJobRunner | None, options: PipelineOptions
) -> Iterator[beam.Pipeline]:
    """A Beam pipeline without its temporary directory. Beam makes one in /tmp for every
    pipeline (for cross-language transforms' files: none here) and removes it only in
    `run`: a run stopped or failed before it (Ctrl-C while the pipeline is built) left
    one behind each time, and so did one killed while it ran (`kill -9`, the
    out-of-memory killer). Removed at once, none is left however the run ends."""
    if isinstance(runner, EmbeddedJobRunner):
        runner = runner.beam
    p = beam.Pipeline(runner=runner, options=options)
    shutil.rmtree(p.local_tempdir, ignore_errors=True)
    yield p


def auto_workers(input_bytes: int, bytes_per_worker: int, cores: int) -> int:
    """Worker processes for `input_bytes` of new input: 1 (in-process) below two workers'
    worth, else one per `bytes_per_worker`, at most one per core."""
    return max(1, min(cores, input_bytes // max(1, bytes_per_worker)))


def pipeline_options(cfg: ProcessConfig, input_bytes: int = 0) -> PipelineOptions:
    # construction-time type checking re-inspects every step's signature (~0.15 s a run)
    # and finds nothing in a fixed graph the tests run; `--pipeline_type_check` restores it
    check = [] if "--pipeline_type_check" in cfg.beam_args else ["--no_pipeline_type_check"]
    args = [
        f"--runner={cfg.runner}",
        "--default_sdk_harness_log_level=WARNING",
        *check,
        *cfg.beam_args,
    ]
    if cfg.runner in LOCAL_RUNNERS and not any("direct_running_mode" in a for a in args):
        cores = os.cpu_count() or 1
        per_worker = cfg.bytes_per_worker or (
            FORKED_BYTES_PER_WORKER if can_fork() else SPAWNED_BYTES_PER_WORKER
        )
        workers = cfg.workers or auto_workers(input_bytes, per_worker, cores)
        if workers > 1 and can_fork():  # worker lanes (`runner.LaneOptions`)
            args += [f"--{LANES_FLAG}={workers}"]
            workers = 1
        mode = "in_memory" if workers == 1 else "multi_processing"
        args += [f"--direct_running_mode={mode}", f"--direct_num_workers={workers}"]
    return PipelineOptions(args)


def spread(options: PipelineOptions) -> bool:
    """Whether work is worth spreading over workers (a shuffle of its own): not when
    everything runs in this process, where each shuffle is only a further stage."""
    direct = options.view_as(DirectOptions).direct_running_mode
    return options.view_as(StandardOptions).runner not in LOCAL_RUNNERS or direct != "in_memory"


def dedup_partitions(options: PipelineOptions) -> int:
    """Shuffle keys of each dedup step: one per Beam worker process of the local runner
    (1 in-process, worker lanes included: the dedup steps run in the run's process),
    whose runner hands each worker its share of a step's keys; every key
    costs every step its own batches and calls (20k on 2 workers: the steps after pass 1
    ~0.8 s with 16 keys, ~0.72 s with 2). A portable runner's parallelism is not known
    here: `dedup.PARTITIONS`."""
    if options.view_as(StandardOptions).runner in LOCAL_RUNNERS:
        return beam_workers(options)
    return PARTITIONS


def planned_workers(options: PipelineOptions) -> int:
    """Worker processes the run's units are spread over: the local runner's, else (a
    portable runner's pool) one per core here."""
    if options.view_as(StandardOptions).runner in LOCAL_RUNNERS:
        return options.view_as(LaneOptions).worker_lanes or beam_workers(options)
    return os.cpu_count() or 1


def beam_workers(options: PipelineOptions) -> int:
    """The local runner's Beam worker processes (1: the pipeline runs in this process)."""
    direct = options.view_as(DirectOptions)
    return 1 if direct.direct_running_mode == "in_memory" else direct.direct_num_workers


def counters(result) -> dict[str, int]:
    out: dict[str, int] = {}
    for c in result.metrics().query(MetricsFilter())["counters"]:
        if c.key.metric.namespace == NS:
            out[c.key.metric.name] = out.get(c.key.metric.name, 0) + (
                c.committed or c.attempted or 0
            )
    return dict(sorted(out.items()))


def _link_tree(src: Path, dst: Path) -> None:
    """Hard links of every visible file of `src` into `dst` (existing names in dst win)."""
    dst.mkdir(parents=True, exist_ok=True)
    if src.exists():
        for f in src.iterdir():
            if f.is_file() and not f.name.startswith(".") and not (dst / f.name).exists():
                os.link(f, dst / f.name)


def merge_state(
    run_dir: Path,
    prev: Previous,
    arrivals: dict[str, int],
    run_id: str,
    hashed: Hashed | None = None,
) -> None:
    """Complete the run's _index: earlier segments and probe files (merged when many),
    updated template counts, seen shards (the files read, `arrivals`: each with the
    arrival pass 1 gave its records; a hash in `hashed` is taken again only when the
    file's stat moved since, `stat_key`)."""
    index = run_dir / G.INDEX
    for part in (G.SEGMENTS, G.PROBE):
        _link_tree(prev.index / part if prev.index else Path("/nonexistent"), index / part)
    G.compact_probe(index, prev.index)
    complete_state(run_dir, prev.index)
    before = None
    if prev.index and (prev.index / G.TEMPLATES_FILE).exists():
        with G.index_read(prev.index / G.TEMPLATES_FILE):
            before = read_parquet(prev.index / G.TEMPLATES_FILE)
    counts = G.merged_counts(before, read_parquet(index / G.DELTA_FILE))
    write_table_atomic(index / G.TEMPLATES_FILE, counts)
    (index / G.DELTA_FILE).unlink()
    rows = []
    for f, arrival in arrivals.items():
        st = os.stat(f)
        key, sha = (hashed or {}).get(f, (None, None))
        if key != stat_key(st):
            sha = sha256_file(f)
        rows.append(
            {"path": f, "size": st.st_size, "mtime_ns": st.st_mtime_ns, "run_id": run_id,
             "sha256": sha, "arrival_ns": arrival, "ctime_ns": st.st_ctime_ns,
             "ino": st.st_ino}
        )  # fmt: skip
    seen = pa.Table.from_pylist(rows, schema=G.SHARDS_SCHEMA)
    if prev.seen is not None:
        seen = pa.concat_tables([prev.seen.cast(G.SHARDS_SCHEMA), seen])
    write_table_atomic(index / G.SHARDS_FILE, seen)


def complete_tables(run_dir: Path, output: Path, incremental: bool) -> None:
    """Make the run's table directories whole before they are published: an incremental
    run's gain hard links to the earlier files it did not rewrite, so each swap is one
    rename (`schemas.publish`: journalled, so a run stopped between two swaps is
    finished by the next command, not left with a table missing or tables of two runs)."""
    for name in TABLES:
        (run_dir / name).mkdir(parents=True, exist_ok=True)
        if incremental:
            _link_tree(output / name, run_dir / name)


def _tally(table: Path, column: str, shown: Path | None = None) -> Counter:
    """How often each value of `column` occurs in a processed table (one columnar read).
    A file that does not read is `DamagedFile`, named as it is in `shown` (the store's
    table a run directory's file is a link of)."""
    files = [str(f) for f in shard_files(table)]
    if not files:
        return Counter()
    try:
        counts = pc.value_counts(read_parquet(files, columns=[column])[column])
    except (OSError, pa.ArrowException) as exc:
        for f in files:  # which one: named, with the way to make it again
            try:
                read_parquet(f, columns=[column])
            except (OSError, pa.ArrowException) as one:
                where = (shown or table) / Path(f).name
                why = first_line(one).replace(f, str(where))  # never the run directory's name
                raise DamagedFile(where, f"unreadable Parquet ({why})", REBUILD_HINT) from exc
        raise
    values, n = counts.field("values").to_pylist(), counts.field("counts").to_pylist()
    return Counter(dict(zip(values, n, strict=True)))


def unreadable_tables(output: Path) -> list[tuple[Path, str]]:
    """The processed table files whose footer does not read (cut short, empty, not
    Parquet): a run that reads nothing new would otherwise say all is well over them."""
    from worldtrace.schemas.views import shard_problem

    return [
        (f, why) for name in TABLES for f in shard_files(output / name) if (why := shard_problem(f))
    ]


REJECTS_SHOWN = 5
"""Rejects of a run named in its manifest (and printed); the rest are in the table."""


def run_rejects(run_dir: Path, limit: int = REJECTS_SHOWN) -> list[dict[str, Any]]:
    """The first `limit` rejects this run wrote (whole files first: a file that is not a
    trajectory shard is one row however many rows it has; then the first row of each
    file and reason before the rest: the rows of a row group that did not read are a
    reject each, with one reason, and would hide the problems after them), so the user
    sees why without querying the table."""
    files = sorted(str(f) for f in (run_dir / "rejects").glob("*.parquet"))
    if not files:
        return []
    rows = read_parquet(files, columns=["source_path", "record", "stage", "reason"])
    # a file in the store is named from its root, as stored (`units.in_store`), and so
    # printed (docs/pipeline.md); one outside it by its absolute path
    out = sorted(rows.to_pylist(), key=_in_file_order)
    seen: set[tuple[str, str]] = set()
    again = []
    for r in out:
        again.append((r["source_path"], r["reason"]) in seen)
        seen.add((r["source_path"], r["reason"]))
    order = sorted(range(len(out)), key=lambda i: (bool(out[i]["record"]), again[i]))
    return [out[i] for i in order[:limit]]


def _in_file_order(r: dict[str, Any]) -> tuple[str, list[int]]:
    """A reject's file, then its place in it (`row 7`, `line 3`, `row 7#turn 2`): the
    units' tables come in the order of their hashed names."""
    return r["source_path"], [int(n) for n in re.findall(r"\d+", r["record"])]


def accounting(output: Path, shown: Path | None = None) -> dict[str, Any]:
    """in = kept + filtered + duplicates + rejected, over the whole processed corpus
    (`shown`: the processed/ directory a run directory's tables are published to)."""
    shown = shown or output
    stages = _tally(output / "rejects", "stage", shown / "rejects")
    roles = _tally(output / "clusters", "role", shown / "clusters")
    acc = {
        "kept": roles["singleton"] + roles["representative"],
        "filtered": stages["filter"],
        "duplicates": roles["exact"] + roles["near"],
        "rejected": stages["validate"],
    }
    return {"in": sum(acc.values()), **acc, "exact": roles["exact"], "near": roles["near"]}


@contextmanager
def exclusive(output: Path):
    """Hold `processed/.process.lock` for the whole run; a second run fails at once.

    Two runs side by side would each process the same new files from the same earlier
    state and publish over each other, their table swaps interleaving (tables of two
    runs, or a swap failing half way). The lock file names its holder for the message;
    the lock goes with the process (a run that dies holds nothing).
    """
    import contextlib

    from worldtrace.schemas.store import StoreWriteError

    lock = output / F.PROCESS_LOCK
    try:  # a full or read-only disk is named by the file it stopped at, the lock's
        fh = try_lock(lock)
    except OSError as exc:
        raise StoreWriteError(lock, exc) from exc
    if fh is None:
        raise StoreBusy(busy_said(output))
    try:
        try:
            fh.truncate(0)
            since = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
            fh.write(f"pid {os.getpid()} on {socket.gethostname()}, since {since}\n")
            fh.flush()
        except OSError as exc:
            raise StoreWriteError(lock, exc) from exc
        yield
    finally:
        # the run's own error comes first: clearing the name fails again on a full
        # disk (the line still buffered), and closing frees the lock regardless
        with contextlib.suppress(OSError):
            fh.truncate(0)
        with contextlib.suppress(OSError):
            fh.close()


def run(cfg: ProcessConfig, progress: Progress | None = None) -> dict[str, Any]:
    """Run the pipeline; returns the run manifest (also written to processed/manifest.json).

    `progress(done, records)` hears how many units went through pass 1 and pass 2
    (`watch.RunWatch`), while the pipeline runs.
    """
    # canonical paths: the index matches files by path, and the same store named through
    # `..` or a symlink read its shards again as new files
    found = input_files(cfg.inputs)
    if gone := [(f, why) for f in found if (why := broken_link(f))]:
        # nothing of it to read or to record (size, time, content): a reject would be
        # counted again by every run, or never read when its file comes back
        more = f" (and {len(gone) - 1} more)" if gone[1:] else ""
        raise FileNotFoundError(
            f"{gone[0][0]}: {gone[0][1]}{more}; restore the file it points to, or remove "
            "the link, then run again"
        )
    files = [os.path.realpath(p) for p in found]
    if not files:
        kept = ""
        if (Path(cfg.output) / MANIFEST).exists():  # say what stays: a rebuild of nothing
            kept = (  # is more likely a wrong path than a wish to empty the store
                f"; the processed data under {cfg.output} stays as it was (move it away to drop it)"
            )
        raise FileNotFoundError(
            f"no Parquet or JSONL input under {', '.join(map(str, cfg.inputs))}{kept}"
        )
    output = Path(cfg.output)
    output.mkdir(parents=True, exist_ok=True)
    output = output.resolve()
    cfg = dataclasses.replace(cfg, output=str(output))
    with exclusive(output):
        return _run(cfg, files, output, progress)


def _run(cfg: ProcessConfig, files: list[str], output: Path, progress: Progress | None):
    finish_stopped(output)  # a run that died between its table swaps: finish them first
    prev = load_previous(output, cfg)
    read_before = prev.read_before
    stats = new_files(files, prev, output)
    todo = list(stats)
    arrivals, hashed = {f: st.st_mtime_ns for f, st in stats.items()}, {}
    dropped = rewritten = None
    if cfg.rebuild:  # files processed before arrive when they first did
        seen = recorded_index(output)
        arrivals, hashed, changed = recorded_arrivals(seen, stats)
        sizes = {r["path"]: r["size"] for r in seen.to_pylist()} if seen is not None else {}
        now = refuse_damaged(output, changed, sizes)  # their records' last copy may be here
        dropped = dropped_inputs(output, seen, files)
        rewritten = changed_inputs(output, seen, files, now)
    elif prev.index is not None and not todo and (bad := unreadable_tables(output)):
        path, why = bad[0]  # "no new input" would say all is well
        more = f" (and {len(bad) - 1} more file(s) of processed/)" if bad[1:] else ""
        raise DamagedFile(path, f"{why}{more}", REBUILD_HINT)
    run_id = time.strftime("%Y%m%dT%H%M%S") + "-" + uuid.uuid4().hex[:6]
    sweep_leftovers(output)  # runs that died before cleaning up
    run_dir = output / temp_name(".run-", run_id)  # owned: a later sweep spares it while we run
    started = time.time()
    counts: dict[str, int] = {}
    rejected: list[dict[str, Any]] = []
    try:
        if todo or not prev.index:
            size = sum(os.path.getsize(f) for f in todo)
            options = pipeline_options(cfg, size)
            # the local runner starts its worker processes now, warming while the
            # pipeline is built (and stops any it did not use when the run ends)
            runner = make_runner(cfg, options)
            with runner or nullcontext():  # stopped however planning or the run ends
                plan = plan_run(todo, planned_workers(options))
                units = [(*u[:3], arrivals[u[0]]) for u in plan]  # `units.Unit`
                if isinstance(runner, LocalRunner):  # pass 1 starts while the pipeline is built
                    first = pass1(cfg, str(run_dir))
                    runner.submit_ahead([first.work(u) for u in units])
                with pipeline(runner, options) as p:
                    _ = (
                        p
                        | "Units"  # in order, each with its file's arrival
                        >> beam.Create(units, reshuffle=False)
                        | "Process"
                        >> ProcessTrajectories(
                            cfg, str(run_dir), prev, spread(options), dedup_partitions(options)
                        )
                    )
                    root = name_root(cfg.output)
                    watch = RunWatch(run_dir, plan, progress, root) if progress else None
                    with watch or nullcontext():
                        result = p.run()
                        finished(result)
                # the runner's workers exit meanwhile (`LocalRunner.close` waits for them)
                counts = counters(result)
                rejected = run_rejects(run_dir)
                merge_state(run_dir, prev, arrivals, run_id, hashed)
                complete_tables(run_dir, output, incremental=prev.index is not None)
                manifest = _manifest(cfg, prev, files, todo, run_id, started, counts, rejected)
                if dropped is not None:
                    manifest["dropped_inputs"] = dropped
                    manifest["changed_inputs"] = rewritten
                manifest["accounting"] = _balanced(accounting(run_dir, output), read_before, counts)
                write_bytes_atomic(run_dir / MANIFEST, _json(manifest))
                journalled_publish(run_dir, output, (*TABLES, G.INDEX, MANIFEST))
                return manifest
        if prev.moved:  # nothing new to read: moved paths and new times are kept all the same
            write_table_atomic(output / G.INDEX / G.SHARDS_FILE, prev.seen)
    finally:
        if not _publishing(output, run_dir):
            shutil.rmtree(run_dir, ignore_errors=True)
    manifest = _manifest(cfg, prev, files, todo, run_id, started, {}, rejected)
    manifest[TABLES_RUN] = prev.tables_run or run_id  # no table published: the last run's
    manifest["accounting"] = _balanced(accounting(output), read_before, {})
    write_bytes_atomic(output / MANIFEST, _json(manifest))
    return manifest


def _publishing(output: Path, run_dir: Path) -> bool:
    """Whether a publish journal names `run_dir`: a swap failed half way (a rename the
    disk refused) and the journal's roll-forward needs the tables still in it. Removed,
    the next command finished the publish with what was left: this run's first tables
    beside the earlier run's others."""
    try:
        journal = pending(output)
    except OSError:  # a journal that does not read names no run of ours
        return False
    return journal is not None and journal["run"] == run_dir.name


def _json(manifest: dict[str, Any]) -> bytes:
    return json.dumps(manifest, indent=2, default=str).encode()


def _balanced(acc: dict[str, Any], read_before: int, counts: dict[str, int]) -> dict[str, Any]:
    """The corpus accounting, and whether it holds what every run read."""
    return {**acc, "balanced": acc["in"] == read_before + counts.get("read", 0)}


def _manifest(
    cfg: ProcessConfig,
    prev: Previous,
    files: list[str],
    todo: list[str],
    run_id: str,
    started: float,
    counts: dict[str, int],
    rejected: list[dict[str, Any]],
) -> dict[str, Any]:
    """The run manifest but its accounting (counted over the tables it publishes)."""
    gone = gone_inputs(prev)
    counts = {**counts, "read": counts.get("read", 0)}
    return {
        "run_id": run_id,
        TABLES_RUN: run_id,
        "schema_version": F.SCHEMA_VERSION,
        "layout": LAYOUT,
        "inputs": files,
        "new_inputs": todo,
        "incremental": prev.index is not None,
        "seconds": round(time.time() - started, 3),
        "config": to_dict(cfg),
        "policy": get_policy(cfg.policy, **cfg.policy_settings).describe(),
        "dedup_bands_rows": list(cfg.dedup.band_rows()),
        "counters": counts,
        "this_run": {
            "in": counts["read"],
            "filtered": counts.get("filtered", 0),
            "rejected": counts.get("rejected", 0),
        },
        "rejected": rejected,
        "gone_inputs": {"count": len(gone), "first": gone[:REJECTS_SHOWN]},
    }
