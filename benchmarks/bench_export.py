"""Export benchmarks, standalone: `python -m benchmarks.bench_export [--trajectories N]`.

Prints one JSON line per measurement: {"name", "ours", "baseline", "ratio", "unit", "notes"}.

- export throughput: tokens/s of a whole `export()` (read Parquet, render, tokenize, mask,
  write shards and manifest, tokenizer load included) vs `Tokenizer.encode_batch` alone
  on the same rendered texts, in batches of 256 as export encodes; best of 3 runs each,
  interleaved so that load from other processes hits both alike; ratio = ours / baseline.
  Also against `encode_batch_fast` (no offsets), the call export itself tokenizes with.
- tokenizer threads: the same export with tokenizers on one thread (RAYON_NUM_THREADS=1,
  a fresh process each) vs all cores: what the parallel encode buys.
- peak memory: peak RSS of an export process at 1x and at 10x the corpus (the 10x copy
  is the 1x processed shards written ten times with new trajectory ids), for a plain and
  a packed (--seq-len) export; ratio = 10x / 1x (1.0 = flat).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

N_DEFAULT = 12000
"""Trajectories of the throughput corpus (about 9M tokens: the tokenizer load amortises)."""
N_MEMORY = 2000
"""Trajectories of the 1x memory corpus (10x = ten copies)."""
SEQ_LEN = 4096


def emit(name: str, ours: float, baseline: float, ratio: float, unit: str, notes: str) -> None:
    print(
        json.dumps(
            {
                "name": name,
                "ours": round(ours, 3),
                "baseline": round(baseline, 3),
                "ratio": round(ratio, 3),
                "unit": unit,
                "notes": notes,
            }
        ),
        flush=True,
    )


def make_corpus(work: Path, n: int) -> Path:
    """`n` synthetic trajectories through the real processing pipeline; returns processed/trajectories."""
    from worldtrace.collectors.synthetic import SyntheticConfig, generate
    from worldtrace.pipelines.process import ProcessConfig, run
    from worldtrace.schemas import ShardWriter, Store

    store = Store.at(work / "store")
    with ShardWriter(store.raw / "s") as w:
        w.write(generate(SyntheticConfig(n=n, seed=11)))
    run(ProcessConfig(inputs=[str(store.raw)], output=str(store.processed), workers=2))
    return store.table("trajectories")


def replicate(src: Path, dst: Path, times: int) -> Path:
    """`times` copies of the processed shards, each with its own trajectory ids."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq
    from worldtrace.schemas.store import shard_files

    dst.mkdir(parents=True, exist_ok=True)
    for k in range(times):
        for f in shard_files(src):
            t = pq.read_table(f)
            i = t.schema.get_field_index("trajectory_id")
            ids = pc.binary_join_element_wise(t["trajectory_id"], pa.scalar(f"-{k}"), "")
            t = t.set_column(i, t.schema.field(i), ids)
            pq.write_table(
                t, dst / f"copy{k:02d}-{f.name}", compression="zstd", row_group_size=1024
            )
    return dst


def rendered_texts(trajectories: Path) -> list[str]:
    from worldtrace.pipelines.export import ExportConfig
    from worldtrace.pipelines.inputs import iter_batches
    from worldtrace.pipelines.prompt import SystemPrompt
    from worldtrace.pipelines.render import CHATML
    from worldtrace.pipelines.samples import has_target

    prompt, cfg = SystemPrompt(), ExportConfig()
    return [  # export leaves out a sample without a target: so does the baseline
        CHATML.render(prompt.text(r), r["turns"]).text
        for batch in iter_batches(str(trajectories))
        for r in batch
        if any(has_target(r["trajectory_id"], t, cfg) for t in r["turns"])
    ]


def baseline_run(tok, texts: list[str], method: str = "encode_batch") -> tuple[float, int]:
    encode = getattr(tok, method)
    start = time.perf_counter()
    n = 0
    for i in range(0, len(texts), 256):
        n += sum(len(e.ids) for e in encode(texts[i : i + 256], add_special_tokens=False))
    return time.perf_counter() - start, n


def export_run(trajectories: Path, out: Path, **kw) -> tuple[float, int]:
    from worldtrace.pipelines.export import ExportConfig, export
    from worldtrace.pipelines.tokens import default_tokenizer

    start = time.perf_counter()
    m = export(
        ExportConfig(
            input=str(trajectories), output=str(out), tokenizer=str(default_tokenizer()), **kw
        )
    )
    return time.perf_counter() - start, m["counts"]["tokens"]


def child(args: list[str], env: dict[str, str] | None = None) -> dict:
    """Run `--child ...` in a fresh process; its last stdout line is a JSON dict."""
    r = subprocess.run(
        [sys.executable, "-m", "benchmarks.bench_export", "--child", *args],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        check=True,
    )
    return json.loads(r.stdout.strip().splitlines()[-1])


def run_child(trajectories: str, out: str, seq_len: int) -> None:
    """One export in this process: seconds, tokens, and this process's peak RSS (MB)."""
    seconds, tokens = export_run(Path(trajectories), Path(out), seq_len=seq_len)
    print(json.dumps({"seconds": seconds, "tokens": tokens, "peak_mb": peak_mb()}))


def peak_mb() -> float:
    """This process's peak RSS since it started (VmHWM). Not ru_maxrss: Linux carries
    that over exec from the parent that forked us, so a child would report the
    benchmark's own peak."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmHWM in /proc/self/status")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trajectories", type=int, default=N_DEFAULT)
    ap.add_argument("--memory-trajectories", type=int, default=N_MEMORY)
    ap.add_argument("--work", default="", help="work directory (default: a temporary one)")
    ap.add_argument(
        "--child", nargs=3, metavar=("TRAJECTORIES", "OUT", "SEQ_LEN"), help=argparse.SUPPRESS
    )
    args = ap.parse_args(argv)
    if args.child:
        run_child(args.child[0], args.child[1], int(args.child[2]))
        return
    with tempfile.TemporaryDirectory(dir=args.work or None) as tmp:
        work = Path(tmp)
        one = make_corpus(work / "tp", args.trajectories)
        throughput(one, work)
        threads(one, work)
        memory(make_corpus(work / "mem", args.memory_trajectories), work)


def throughput(one: Path, work: Path) -> None:
    from worldtrace.pipelines.tokens import default_tokenizer, load_tokenizer

    texts = rendered_texts(one)
    tok = load_tokenizer(str(default_tokenizer()))
    ours, base, fast = [], [], []
    for k in range(3):
        base.append(baseline_run(tok, texts))
        ours.append(export_run(one, work / f"tp{k}"))
        fast.append(baseline_run(tok, texts, "encode_batch_fast"))
    (b_s, b_n), (o_s, o_n), (f_s, _) = min(base), min(ours), min(fast)
    if b_n != o_n:
        raise AssertionError(
            f"export wrote {o_n} tokens, encode_batch made {b_n} of the same texts"
        )
    chars = sum(map(len, texts))
    what = (
        f"{o_n:,} tokens, {chars / 1e6:.1f} M chars, {os.cpu_count()} cores; ours reads Parquet, "
        "renders, masks, writes shards + manifest and loads the tokenizer; best of 3 each, interleaved"
    )
    emit(
        "tokens/s vs tokenizers.encode_batch alone",
        o_n / o_s,
        b_n / b_s,
        b_s / o_s,
        "tokens/s",
        what,
    )
    emit(
        "tokens/s vs tokenizers.encode_batch_fast alone (no offsets)",
        o_n / o_s,
        b_n / f_s,
        f_s / o_s,
        "tokens/s",
        "the stricter floor: export itself tokenizes with encode_batch_fast and computes offsets",
    )


def threads(one: Path, work: Path) -> None:
    alone = [
        child([str(one), str(work / f"t1-{k}"), "0"], {"RAYON_NUM_THREADS": "1"}) for k in range(2)
    ]
    every = [child([str(one), str(work / f"tn-{k}"), "0"]) for k in range(2)]
    a = min(r["seconds"] for r in alone)
    e = min(r["seconds"] for r in every)
    n = every[0]["tokens"]
    emit(
        "tokenizers on all cores vs one thread",
        n / e,
        n / a,
        a / e,
        "tokens/s",
        f"RAYON_NUM_THREADS=1 vs unset, fresh process each, best of 2; {os.cpu_count()} cores",
    )


def memory(one: Path, work: Path) -> None:
    ten = replicate(one, work / "ten", 10)
    for seq_len, label in ((0, "plain"), (SEQ_LEN, f"packed --seq-len {SEQ_LEN}")):
        r1 = child([str(one), str(work / f"m1-{seq_len}"), str(seq_len)])
        r10 = child([str(ten), str(work / f"m10-{seq_len}"), str(seq_len)])
        emit(
            f"peak RSS at 10x vs 1x corpus ({label})",
            r10["peak_mb"],
            r1["peak_mb"],
            r10["peak_mb"] / r1["peak_mb"],
            "MB",
            f"{r1['tokens']:,} vs {r10['tokens']:,} tokens; 1.0 = flat; fresh process each",
        )


if __name__ == "__main__":
    main()
