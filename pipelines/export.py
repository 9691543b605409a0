"""`worldtrace export`: processed trajectories -> token-level loss-masked training shards.

Orchestration only: read records -> build samples (samples.py) -> write rows (writers.py)
-> manifest. Rendering is in render.py, tokenizer and loss masks in tokens.py.
Trajectories are read sorted by trajectory_id, every draw is a hash of (trajectory,
turn, seed), shard names are fixed and the manifest holds no clock: two runs with the
same inputs and settings write byte-identical files.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from worldtrace.schemas import fields as F
from worldtrace.schemas.store import read_table

from .mask import KEEP_MODES
from .render import load_template
from .samples import OVERFLOWS, SAMPLE_MODES, SAMPLE_TURNS, SampleBuilder, SampleConfig, rows
from .tokens import load_tokenizer, pad_id, tokenizer_info
from .writers import (
    FORMATS,
    LABEL_SHIFT,
    shard_entries,
    staged,
    write_agentworldbench,
    write_manifest,
    write_rows,
)

__all__ = ["ExportConfig", "export"]


@dataclass
class ExportConfig(SampleConfig):
    """One export: where from and to, the format, and (inherited) the sample and mask settings."""

    input: str = ""
    """Processed trajectories directory (store processed/trajectories)."""
    output: str = ""
    """Export directory; replaced as a whole when the export succeeds."""
    tokenizer: str = ""
    """Path of a Hugging Face tokenizer.json."""
    format: str = "parquet"
    """parquet, megatron or agentworldbench (JSONL, no tokenizer needed)."""
    shard_rows: int = 4096
    """Not read: Parquet shards are cut at 256 MiB (kept because manifests record it)."""

    def check(self) -> None:
        """Raise ValueError naming the first setting outside its choices."""
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


def export(cfg: ExportConfig, batch: int = 256) -> dict[str, Any]:
    """Write the export into `cfg.output` (replacing what was there) and return its manifest."""
    cfg.check()
    template = load_template(cfg.template, cfg.template_eot)
    tok = load_tokenizer(cfg.tokenizer) if cfg.format != "agentworldbench" else None
    builder = SampleBuilder(cfg, template, tok)
    records = _sorted_records(cfg.input)
    with staged(Path(cfg.output)) as staging:
        if cfg.format == "agentworldbench":
            n_rows = write_agentworldbench(records, staging, cfg.seed)
            for r in records:
                builder.stats.add(r[F.DOMAIN])
        else:
            samples = list(builder.samples(records, batch))
            out_rows = rows(samples, cfg.seq_len, pad_id(tok))
            n_rows = write_rows(cfg.format, out_rows, staging, packed=bool(cfg.seq_len))
        manifest = _manifest(cfg, builder, tok, len(records), n_rows)
        manifest["shards"] = shard_entries(staging)
        write_manifest(staging, manifest)
    return manifest


def _manifest(cfg: ExportConfig, builder: SampleBuilder, tok, n_in: int, n_rows: int) -> dict:
    """Everything needed to reproduce and check the export, except the shard list."""
    return {
        "schema_version": F.TRAINING_SCHEMA_VERSION,
        "format": cfg.format,
        "tokenizer": tokenizer_info(cfg.tokenizer, tok) if tok else None,
        "template": {
            "name": builder.template.name,
            "sha256": builder.template.sha256,
            "eot": builder.template.eot,
            "eot_target": cfg.eot_target,
        },
        "mask_policy": _policy_from(cfg.input),
        "keep_mode": cfg.keep_mode,
        "seed": cfg.seed,
        "sampling": {
            "mode": cfg.sample_mode,
            "turns": cfg.sample_turns,
            "max_len": builder.max_len,
            "overflow": cfg.overflow,
            "seq_len": cfg.seq_len,
        },
        "label_shift": LABEL_SHIFT,
        "only_observation_tokens_are_targets": True,
        "counts": {"trajectories": n_in, "rows": n_rows, **builder.stats.as_dict()},
        "config": {
            k: v for k, v in asdict(cfg).items() if k not in ("input", "output", "tokenizer")
        },
    }


def _sorted_records(path: str) -> list[dict[str, Any]]:
    table = read_table(path)
    if table.num_rows == 0:
        raise FileNotFoundError(
            f"no processed trajectories under {path} (run `worldtrace process` first)"
        )
    return table.sort_by(F.TRAJECTORY_ID).to_pylist()


def _policy_from(input_dir: str) -> dict[str, Any] | None:
    """The mask policy of the processing run, from its manifest beside the input."""
    m = Path(input_dir).parent / "manifest.json"
    return json.loads(m.read_text()).get("policy") if m.exists() else None
