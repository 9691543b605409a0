"""Datatrove's four MinHash stages on a JSONL corpus (run inside the bench venv).

usage: python datatrove_minhash.py INPUT_DIR WORK_DIR TASKS
Prints JSON: {"seconds": ..., "removed": ...}.
"""

import json
import re
import sys
import time

from datatrove.executor import LocalPipelineExecutor
from datatrove.pipeline.dedup.minhash import (
    MinhashConfig,
    MinhashDedupBuckets,
    MinhashDedupCluster,
    MinhashDedupFilter,
    MinhashDedupSignature,
)
from datatrove.pipeline.readers import JsonlReader
from datatrove.pipeline.writers import JsonlWriter
from datatrove.utils.word_tokenizers import WordTokenizer


class RegexWords(WordTokenizer):
    """`\\w+` runs, as worldtrace shingles a text with a word (datatrove's default would
    load spaCy); the bench corpus has no wordless text, which worldtrace shingles by its
    non-space runs (`words.dedup_tokens`)."""

    def word_tokenize(self, text: str) -> list[str]:
        return re.findall(r"\w+", text)

    def sent_tokenize(self, text: str) -> list[str]:
        return [text]

    def span_tokenize(self, text: str) -> list[tuple[int, int]]:
        return [(0, len(text))]


def main() -> None:
    src, work, tasks = sys.argv[1], sys.argv[2], int(sys.argv[3])
    # 14 bands x 9 rows of 5-gram shingles: the same LSH shape as worldtrace's default
    # (`minhash.lsh_params(0.8, 128)`; 9 x 13 before 2026-12-07)
    cfg = MinhashConfig(n_grams=5, num_buckets=14, hashes_per_bucket=9)
    kw = {"tasks": tasks, "workers": tasks, "logging_dir": f"{work}/logs", "skip_completed": False}
    start = time.perf_counter()
    s1 = LocalPipelineExecutor(
        [
            JsonlReader(src),
            MinhashDedupSignature(f"{work}/sigs", config=cfg, language=RegexWords()),
        ],
        **kw,
    )
    s2 = LocalPipelineExecutor(
        [MinhashDedupBuckets(f"{work}/sigs", f"{work}/buckets", config=cfg)],
        **{**kw, "tasks": cfg.num_buckets, "logging_dir": f"{work}/logs2"},
        depends=s1,
    )
    s3 = LocalPipelineExecutor(
        [MinhashDedupCluster(f"{work}/buckets", f"{work}/remove", config=cfg)],
        **{**kw, "tasks": 1, "workers": 1, "logging_dir": f"{work}/logs3"},
        depends=s2,
    )
    s4 = LocalPipelineExecutor(
        [JsonlReader(src), MinhashDedupFilter(f"{work}/remove"), JsonlWriter(f"{work}/out")],
        **{**kw, "logging_dir": f"{work}/logs4"},
        depends=s3,
    )
    s4.run()
    seconds = time.perf_counter() - start
    print(json.dumps({"seconds": seconds}))


if __name__ == "__main__":
    main()
