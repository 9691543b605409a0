"""Found (export hunt 1204f): `worldtrace explain` drew each turn's keep at seed 0 while
the store was processed with `--set seed=7`: its "in loss" column disagreed with the
`turns` table's `in_loss` (and with what export trains) on the turns kept in part.
Without `--seed` it now takes the processing run's seed; `--seed N` still wins.

Real parts: a store processed by the real pipeline, the real `worldtrace` command."""

from __future__ import annotations

import json

from worldtrace.pipelines.mask import keep_turn

from .test_export_hunt_1204f import PROCESS_SEED, in_loss, partial_turns, seeded, wt  # noqa: F401


def explained(store, tid: str, *args: str) -> dict:
    r = wt("--store", str(store.root), "explain", tid, "--json", *args)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_explain_shows_the_turns_the_turns_table_says_are_in_loss(seeded):  # noqa: F811
    differ = sorted(
        {
            t
            for t, i, k in partial_turns(seeded)
            if keep_turn(t, i, 0, k) != keep_turn(t, i, PROCESS_SEED, k)
        }
    )
    assert differ  # the draw matters for these trajectories
    table = in_loss(seeded)
    for tid in differ[:3]:
        doc = explained(seeded, tid)
        assert doc["seed"] == PROCESS_SEED
        assert {(tid, t["index"]) for t in doc["turns"] if t["in_loss"]} == {
            x for x in table if x[0] == tid
        }
        given = explained(seeded, tid, "--seed", "0")  # a seed given is the seed used
        assert given["seed"] == 0 and [t["in_loss"] for t in given["turns"]] != [
            t["in_loss"] for t in doc["turns"]
        ]
