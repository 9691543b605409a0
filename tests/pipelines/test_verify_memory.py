"""`export --verify` of a large Parquet export holds one batch of rows, not the export."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from worldtrace.pipelines.writers import ROW_GROUP_ROWS, shard_entries, write_manifest

TOKENS = 4096
"""Tokens a row: a long sample, as a trajectory of a real corpus is (19k on average)."""

PEAK = (
    "import json, sys; from pathlib import Path; from worldtrace.pipelines.writers import verify;"
    "p = verify(sys.argv[1]); s = Path('/proc/self/status').read_text().splitlines();"
    "print(json.dumps([p, [int(x.split()[1]) for x in s if x.startswith('VmHWM')][0]]))"
)
"""Verify in a fresh process; print its problems and its peak RSS (kB)."""


def export_of(directory, rows: int):
    """A Parquet export of `rows` rows of `TOKENS` tokens (a quarter of them targets) in
    row groups of `ROW_GROUP_ROWS`, with a manifest whose counts are the files'."""
    directory.mkdir()
    ids = np.arange(TOKENS, dtype=np.int32)
    mask = (ids % 4 == 0).astype(np.uint8)
    offsets = np.arange(rows + 1, dtype=np.int32) * TOKENS
    table = pa.table(
        {
            "domain": pa.array(["terminal"] * rows),
            "input_ids": pa.ListArray.from_arrays(offsets, np.tile(ids, rows)),
            "loss_mask": pa.ListArray.from_arrays(offsets, np.tile(mask, rows)),
            "num_tokens": pa.array([TOKENS] * rows, pa.int32()),
            "num_loss_tokens": pa.array([int(mask.sum())] * rows, pa.int32()),
        }
    )
    pq.write_table(table, directory / "train-00000.parquet", row_group_size=ROW_GROUP_ROWS)
    loss = rows * int(mask.sum())
    counts = {"rows": rows, "samples": rows, "tokens": rows * TOKENS, "loss_tokens": loss}
    domain = {"samples": rows, "tokens": rows * TOKENS, "loss_tokens": loss}
    manifest = {"format": "parquet", "part": "train", "sampling": {}, "tokenizer": {}}
    manifest |= {"counts": {**counts, "by_domain": {"terminal": domain}}}
    write_manifest(directory, {**manifest, "shards": shard_entries(directory)})
    return directory


def peak_kb(directory) -> int:
    r = subprocess.run(
        [sys.executable, "-c", PEAK, str(directory)], capture_output=True, text=True, check=True
    )
    problems, peak = json.loads(r.stdout.strip().splitlines()[-1])
    assert problems == []
    return peak


def test_verify_memory_stays_flat_when_the_export_grows_16x(tmp_path):
    """Found: `verify` read every shard of a Parquet export into one table, and its
    recount took pyarrow's default batch of 65,536 rows: a whole export of long samples
    in memory (an export of 20,000 rows, 15M tokens: 890 MB against 250 MB for a tenth)."""
    small = peak_kb(export_of(tmp_path / "small", ROW_GROUP_ROWS))
    large = export_of(tmp_path / "large", 16 * ROW_GROUP_ROWS)  # 16.8M tokens, ~84 MB
    grown = (peak_kb(large) - small) / 1024
    assert grown < 96, f"peak RSS grew {grown:.0f} MB for 16x the rows"
