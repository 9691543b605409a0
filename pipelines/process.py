"""`worldtrace process`: raw shards -> processed shards, as one Beam pipeline.

Output goes to a hidden run directory and is published table by table only after the
pipeline succeeded, so readers never see a half-written run.
"""

from __future__ import annotations

import json
import os
import shutil
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import apache_beam as beam
import pyarrow as pa
from apache_beam.io.parquetio import WriteToParquetBatched
from apache_beam.metrics.metric import MetricsFilter
from apache_beam.options.pipeline_options import PipelineOptions
from worldtrace.schemas import TRAJECTORY_SCHEMA
from worldtrace.schemas import fields as F
from worldtrace.schemas.config import to_dict
from worldtrace.schemas.store import input_files, sweep_leftovers, temp_name, write_bytes_atomic
from worldtrace.schemas.tables import CLUSTERS_SCHEMA, REJECTS_SCHEMA, TURNS_SCHEMA

from .dedup import ApplyDedup, DedupConfig, DedupDecisions
from .filters import FilterConfig
from .mask import DEFAULT_POLICY, get_policy
from .transforms import (
    REJECTS,
    TEMPLATE_KEYS,
    ApplyFilters,
    Normalize,
    ReadUnits,
    ScoreTurns,
    SplitFiles,
    with_template_keys,
)

MANIFEST = "manifest.json"
TABLE_SCHEMAS = {
    "trajectories": TRAJECTORY_SCHEMA,
    "turns": TURNS_SCHEMA,
    "clusters": CLUSTERS_SCHEMA,
    "rejects": REJECTS_SCHEMA,
}


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
    runner: str = "DirectRunner"
    """Beam runner (DirectRunner, PortableRunner, FlinkRunner, SparkRunner, DataflowRunner)."""
    workers: int = 0
    """DirectRunner worker processes; 1 = in-process; 0 = auto: in-process under
    `parallel_bytes` of input (worker start-up costs more than it saves), else one per core."""
    parallel_bytes: int = 32 << 20
    beam_args: list[str] = field(default_factory=list)
    """Further Beam pipeline options, passed through."""


class WaitFor(beam.PTransform):
    """Pass elements through only after `others` are complete.

    A side input gates the stage, so the runner schedules it (and everything fused after
    it) once the side inputs it needs exist, instead of buffering its input meanwhile.
    """

    def __init__(self, *others):
        super().__init__()
        self.others = others

    def expand(self, pcoll):
        done = (
            [o | f"Count{i}" >> beam.combiners.Count.Globally() for i, o in enumerate(self.others)]
            | "Done" >> beam.Flatten()
            | "AllDone" >> beam.combiners.Count.Globally()
        )
        return pcoll | "Gate" >> beam.Map(lambda x, _: x, beam.pvalue.AsSingleton(done))


class _KeysOfKept(beam.DoFn):
    """Template keys of the trajectories dedup keeps (the corpus surprisal counts)."""

    def process(self, item, decisions):
        uid, keys = item
        if decisions.get(uid, (None, True, None))[1]:
            yield from keys


class ProcessTrajectories(beam.PTransform):
    """File paths -> {trajectories, turns, clusters, rejects} PCollections."""

    def __init__(self, cfg: ProcessConfig):
        super().__init__()
        self.cfg = cfg

    def expand(self, paths):
        cfg = self.cfg
        units = paths | "Split" >> SplitFiles()
        # Pass 1 decides and keeps only small things: rejects, the dedup map, template keys.
        read = units | "Read" >> ReadUnits()
        filtered = read.valid | "Normalize" >> Normalize() | "Filters" >> ApplyFilters(cfg.filters)
        decisions = filtered.kept | "DedupDecisions" >> DedupDecisions(cfg.dedup)
        keys = (
            filtered.kept
            | "TemplateKeysByUid"
            >> beam.MapTuple(lambda uid, r: (uid, with_template_keys(r)[TEMPLATE_KEYS]))
            | "KeysOfKept" >> beam.ParDo(_KeysOfKept(), decisions=beam.pvalue.AsDict(decisions))
        )
        # Pass 2 re-reads the records once pass 1 is done and streams them through dedup,
        # statistics and mask to the writers: no stage holds the corpus, memory stays flat.
        again = (
            units | "AfterPass1" >> WaitFor(decisions, keys) | "Reread" >> ReadUnits(counted=False)
        )
        refiltered = (
            again.valid
            | "Normalize again" >> Normalize()
            | "Filters again" >> ApplyFilters(cfg.filters, counted=False)
        )
        deduped = refiltered.kept | "ApplyDedup" >> ApplyDedup(decisions)
        policy = get_policy(cfg.policy, **cfg.policy_settings)
        scored = deduped.kept | "Stats+Mask" >> ScoreTurns(policy, cfg.seed, template_keys=keys)
        rejects = (read[REJECTS], filtered[REJECTS]) | "AllRejects" >> beam.Flatten()
        return {
            "trajectories": scored.trajectories,
            "turns": scored.turns,
            "clusters": deduped.clusters,
            "rejects": rejects,
        }


def rows_to_table(rows: list[dict[str, Any]], schema: pa.Schema) -> pa.Table:
    return pa.Table.from_pylist(rows, schema=schema)


class WriteTables(beam.PTransform):
    """Each named PCollection -> zstd Parquet shards under `directory/<name>/`."""

    def __init__(self, directory: str):
        super().__init__()
        self.directory = directory

    def expand(self, tables: dict[str, Any]):
        for name, pcoll in tables.items():
            schema = TABLE_SCHEMAS[name]
            (
                pcoll
                | f"Batch_{name}" >> beam.BatchElements(min_batch_size=64, max_batch_size=1024)
                | f"ToArrow_{name}" >> beam.Map(rows_to_table, schema=schema)
                | f"Write_{name}"
                >> WriteToParquetBatched(
                    os.path.join(self.directory, name, "part"),
                    schema,
                    codec="zstd",
                    file_name_suffix=F.SHARD_SUFFIX,
                )
            )
        return beam.pvalue.PDone(next(iter(tables.values())).pipeline)


def pipeline_options(cfg: ProcessConfig, input_bytes: int = 0) -> PipelineOptions:
    args = [f"--runner={cfg.runner}", "--default_sdk_harness_log_level=WARNING", *cfg.beam_args]
    if cfg.runner in ("DirectRunner", "direct") and not any(
        "direct_running_mode" in a for a in args
    ):
        workers = cfg.workers or (1 if input_bytes < cfg.parallel_bytes else os.cpu_count() or 1)
        mode = "in_memory" if workers == 1 else "multi_processing"
        args += [f"--direct_running_mode={mode}", f"--direct_num_workers={workers}"]
    return PipelineOptions(args)


def counters(result) -> dict[str, int]:
    out: dict[str, int] = {}
    for c in result.metrics().query(MetricsFilter())["counters"]:
        if c.key.metric.namespace == "worldtrace":
            out[c.key.metric.name] = out.get(c.key.metric.name, 0) + (
                c.committed or c.attempted or 0
            )
    return dict(sorted(out.items()))


def publish(run_dir: Path, output: Path) -> None:
    """Swap each table directory into place; the old one is removed after."""
    for name in TABLE_SCHEMAS:
        new, final = run_dir / name, output / name
        old = output / f".old-{name}-{uuid.uuid4().hex[:8]}"
        if final.exists():
            os.replace(final, old)
        os.replace(new, final)
        shutil.rmtree(old, ignore_errors=True)


def run(cfg: ProcessConfig) -> dict[str, Any]:
    """Run the pipeline; returns the run manifest (also written to processed/manifest.json)."""
    files = [str(p) for p in input_files(cfg.inputs)]
    if not files:
        raise FileNotFoundError(
            f"no Parquet or JSONL input under {', '.join(map(str, cfg.inputs))}"
        )
    output = Path(cfg.output)
    output.mkdir(parents=True, exist_ok=True)
    run_id = time.strftime("%Y%m%dT%H%M%S") + "-" + uuid.uuid4().hex[:6]
    sweep_leftovers(output)  # runs that died before cleaning up
    run_dir = output / temp_name(".run-", run_id)  # owned: a later sweep spares it while we run
    started = time.time()
    try:
        size = sum(os.path.getsize(f) for f in files)
        p = beam.Pipeline(options=pipeline_options(cfg, size))
        tables = p | "Inputs" >> beam.Create(files) | "Process" >> ProcessTrajectories(cfg)
        tables | "WriteTables" >> WriteTables(str(run_dir))
        result = p.run()
        result.wait_until_finish()
        counts = counters(result)
        publish(run_dir, output)
    finally:
        shutil.rmtree(run_dir, ignore_errors=True)
    counts.setdefault("read", 0)
    accounted = sum(
        counts.get(k, 0)
        for k in ("rejected", "filtered", "duplicates.exact", "duplicates.near", "dedup.kept")
    )
    manifest = {
        "run_id": run_id,
        "schema_version": F.SCHEMA_VERSION,
        "inputs": files,
        "seconds": round(time.time() - started, 3),
        "config": to_dict(cfg),
        "policy": get_policy(cfg.policy, **cfg.policy_settings).describe(),
        "dedup_bands_rows": list(cfg.dedup.band_rows()),
        "counters": counts,
        "accounting": {
            "in": counts["read"],
            "kept": counts.get("dedup.kept", 0),
            "filtered": counts.get("filtered", 0),
            "duplicates": counts.get("duplicates.exact", 0) + counts.get("duplicates.near", 0),
            "rejected": counts.get("rejected", 0),
            "balanced": accounted == counts["read"],
        },
    }
    write_bytes_atomic(output / MANIFEST, json.dumps(manifest, indent=2, default=str).encode())
    return manifest
