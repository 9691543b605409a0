"""A secret cut by the terminal kind's caps (`output_cap` on the screen, `raw_cap` on the
raw stream kept in `state_json`). The screen's cut lies inside its text, before our
`[output truncated]` mark and the prompt, where `Redactor.cut_tail` (a text's very end)
never looks; what is left of a cut value matches no rule. The run of non-blank
characters a cut ends is dropped with it."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest
from worldtrace.collectors.jobs import JobSpec, run_job
from worldtrace.sandboxes.terminal import drop_cut_run

VALUE = "tok-" + "".join(f"{i:03d}q" for i in range(75))  # 304 characters: any cut is inside
MARK = "\n[output truncated]"


@pytest.mark.parametrize(
    ("head", "kept"),
    [
        ("xxx x " + VALUE[:40], "xxx x"),  # the cut value's run goes, and the blank before it
        ("line one\nTOKEN=" + VALUE[:9], "line one"),  # `NAME=value` is one run
        ("ends at a blank ", "ends at a blank"),
        ("y" * 2000, "y" * (2000 - 512)),  # a run longer than the bound: the bound goes
        ("", ""),
    ],
)
def test_the_run_a_cut_ends_is_dropped(head, kept):
    assert drop_cut_run(head) == kept


@pytest.mark.docker
def test_a_value_cut_by_the_terminal_caps_reaches_no_shard(docker_engine, store, monkeypatch):
    """Found (review of 12-04, left then): the SWE kind's cut was mended; the terminal
    kind kept 100+ characters of a handed-over value before its mark, and the raw stream
    cut at `raw_cap` kept its own piece of it."""
    monkeypatch.setenv("MY_API_TOKEN", VALUE)
    flood = "head -c 3900 /dev/zero | tr '\\0' x; echo \" $MY_API_TOKEN\"; echo more\n"
    job = {
        "name": "termcut",
        "sandbox": {
            "kind": "terminal",
            "raw_cap": 4096,
            "docker": {"step_timeout": 20, "output_cap": 4096, "env": ["MY_API_TOKEN"]},
        },
        "retries": 0,
        "tasks": [
            {
                "id": "cut",
                "instruction": "a secret cut by the terminal's caps",
                "actions": [{"keystrokes": flood, "duration": 10}, "echo ok\n"],
            }
        ],
    }
    [t] = run_job(JobSpec.from_dict(job), store.raw).trajectories
    first, second = (turn.observation for turn in t.turns)
    assert first.truncated and MARK in first.text and "\nok\n" in second.text
    before = first.text.rpartition(MARK)[0]
    assert before.endswith("x" * 100), before[-120:]  # the x's are whole, the value gone
    state = json.loads(first.state_json)
    assert state["raw_truncated"] and state["raw"].endswith("x"), state["raw"][-80:]
    rows = [r for f in sorted(store.raw.rglob("*.parquet")) for r in pq.read_table(f).to_pylist()]
    journals = [p.read_text() for p in store.raw.rglob("*.journal.jsonl")]
    text = json.dumps(rows, default=str) + "".join(journals)
    assert rows
    for n in range(6, len(VALUE) + 1):
        assert VALUE[:n] not in text, n
