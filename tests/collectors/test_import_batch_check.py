"""Import checks a task's records by batch (`importers.checked`): Arrow conversion and
`validate.suspects`, the walk only on the rows flagged. What it decides must be what
the walk on every record decides, and each stored row must be its own record's."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from worldtrace.collectors import importers
from worldtrace.collectors.importers import Converted, ImportConfig, checked, import_paths
from worldtrace.schemas.store import shard_files
from worldtrace.schemas.validate import validate_dict


def chat(i: int) -> dict:
    call = {"id": f"c{i}", "type": "function", "function": {"name": "ls", "arguments": "{}"}}
    return {
        "id": f"conv-{i}",
        "messages": [
            {"role": "user", "content": f"list the files, please ({i})"},
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": f"c{i}", "content": f"file-{i}.txt"},
        ],
    }


def converted(tmp_path: Path, n: int) -> list:
    """The items of `n` chat records as a worker converts them, before the batch check
    (`convert_lines` is both)."""
    f = tmp_path / "chats.jsonl"
    f.write_text("".join(json.dumps(chat(i)) + "\n" for i in range(n)))
    lines = [(k + 1, line) for k, line in enumerate(f.read_text().splitlines())]
    cfg = ImportConfig()
    items = [x for k, line in lines for x in importers._line_items(f, "chats", cfg, k, line)]
    return importers._converted(f, str(f), cfg, items, {})


def test_batch_check_decides_as_the_walk_and_keeps_rows_in_place(tmp_path):
    items = converted(tmp_path, 6)
    rows = {i: it[3].row for i, it in enumerate(items) if isinstance(it[3], Converted)}
    assert len(rows) == 6
    [a, b, c] = sorted(rows)[1:4]
    rows[a]["turns"][0]["index"] = 5  # a rule (position): Arrow stores it, the screen flags it
    rows[b]["source"]["kind"] = "dreamed"  # a rule (enum)
    rows[c]["redactions"] = 10**30  # no int64 holds it: Arrow refuses the whole batch
    expected = {
        i: "; ".join(
            f"{p.field}: {p.message}"
            for p in validate_dict(r, items[i][3].loc, check_id=False, texts=False)
        )
        for i, r in rows.items()
    }
    assert [bool(v) for v in expected.values()] == [False, True, True, True, False, False]
    part = checked(items)
    got = {i: part.items[i][3] for i in rows}
    assert {i: c.invalid for i, c in got.items()} == expected
    assert all(c.row is None for c in got.values())
    kept = [i for i in rows if not expected[i]]
    assert [got[i].at for i in kept] == [0, 1, 2] and part.size == 3
    assert [got[i].at for i in rows if expected[i]] == [-1, -1, -1]
    # each row of the batch is its own record's
    assert part.rows.column("trajectory_id").to_pylist() == [got[i].tid for i in kept]


def test_a_rule_broken_in_one_row_refuses_that_row_alone(tmp_path):
    items = converted(tmp_path, 4)
    at = [i for i, it in enumerate(items) if isinstance(it[3], Converted)]
    items[at[2]][3].row["turns"][0]["index"] = 3
    part = checked(items)
    assert [part.items[i][3].invalid for i in at] == [
        "",
        "",
        "turns[0].index: turn indexes must be 0..n-1 in order: found 3 at position 0",
        "",
    ]
    assert part.rows.column("trajectory_id").to_pylist() == [
        part.items[i][3].tid for i in (at[0], at[1], at[3])
    ]


def test_import_stores_each_record_once_with_its_own_content(tmp_path):
    """End to end over worker processes: every record's row holds that record (the batch
    rows are taken by position across tasks), and a re-import stores nothing."""
    f = tmp_path / "chats.jsonl"
    f.write_text("".join(json.dumps(chat(i)) + "\n" for i in range(300)))
    out = tmp_path / "raw"
    rep = import_paths([f], out, ImportConfig(workers=2))
    assert sum(rep.imported.values()) == 300 and not rep.errors
    t = pa.concat_tables(pq.read_table(p, columns=["source", "turns"]) for p in shard_files(out))
    for src, turns in zip(t.column("source").to_pylist(), t.column("turns").to_pylist(), strict=True):  # fmt: skip
        i = int(src["origin_id"].removeprefix("conv-"))
        assert src["origin_index"] == i
        assert turns[0]["observation"]["text"] == f"file-{i}.txt"
    again = import_paths([f], out, ImportConfig(workers=2))
    assert sum(again.present.values()) == 300 and not again.imported
