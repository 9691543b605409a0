"""Export: `worldtrace export` against tokenizers.encode_batch alone."""

from __future__ import annotations

import time

from .common import Context, Row, fmt, measure, peak_mb


def export(work: str) -> dict:
    from worldtrace.pipelines.export import ExportConfig
    from worldtrace.pipelines.export import export as run_export

    from worldtrace.paths import default_tokenizer

    start = time.perf_counter()
    m = run_export(
        ExportConfig(
            input=f"{work}/processed/trajectories",
            output=f"{work}/export",
            tokenizer=str(default_tokenizer()),
        )
    )
    return {
        "seconds": time.perf_counter() - start,
        "tokens": m["counts"]["tokens"],
        "peak_mb": peak_mb(),
    }


def encode_floor(work: str) -> dict:
    from tokenizers import Tokenizer
    from worldtrace.pipelines.render import CHATML, system_text
    from worldtrace.schemas import read_table

    from worldtrace.paths import default_tokenizer

    rows = read_table(f"{work}/processed/trajectories").sort_by("trajectory_id").to_pylist()
    texts = [CHATML.render(system_text(r["system"]), r["turns"]).text for r in rows]
    tok = Tokenizer.from_file(str(default_tokenizer()))
    start = time.perf_counter()
    n = 0
    for i in range(0, len(texts), 256):
        n += sum(len(e.ids) for e in tok.encode_batch(texts[i : i + 256], add_special_tokens=False))
    return {"seconds": time.perf_counter() - start, "tokens": n}


TASKS = {"export": export, "encode-floor": encode_floor}


def run(ctx: Context) -> list[Row]:
    work = str(ctx.work)
    work = ctx.shared.get("processed", work)
    ex = measure("bench_export", "export", work)
    enc = measure("bench_export", "encode-floor", work)
    return [("export: tokens/s vs tokenizers.encode_batch alone", f"{fmt(ex['tokens'] / ex['seconds'])} tok/s", f"{fmt(enc['tokens'] / enc['seconds'])} tok/s",
             f"{enc['seconds'] / ex['seconds']:.3f}", f"{ex['tokens']:,} tokens; ours renders, masks, writes Parquet + manifest")]  # fmt: skip
