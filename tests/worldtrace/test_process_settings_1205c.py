"""Found (hunt 1205c, docs as the contract: "`--set` checks every setting's type and range
before a run"):

- `process --set seed=99999999999999999999999` ran (the manifest's seed 1e23, the turns
  table's `in_loss` drawn with it), and every plain `export` then failed: export takes
  seeds of 64 bits only;
- `--set policy_settings.short_chars=10.5` ran with 10 (`int(10.5)`), and 0.9 with 0,
  which turned the short-answer branch of the action rule off in silence; the manifest
  recorded both values.

Real parts: the `worldtrace` CLI on a store of imported OpenAI chat logs."""

from __future__ import annotations

import json

import pytest
from worldtrace.schemas import Store

from .test_query import run_cli
from .test_report_hunt_1204d import chats


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Store:
    tmp = tmp_path_factory.mktemp("settings")
    s = Store.at(tmp / "store")
    assert run_cli(s, "import", "--create", str(chats(tmp / "a.jsonl", 0, 4))).exit_code == 0
    return s


@pytest.mark.parametrize(
    ("setting", "said"),
    [
        ("seed=99999999999999999999999", "seed=99999999999999999999999: expected an integer of 64 bits"),
        (f"seed={-(2**63) - 1}", f"seed={-(2**63) - 1}: expected an integer of 64 bits"),
        ("policy_settings.short_chars=10.5", "policy_settings.short_chars=10.5: expected a whole number"),
        ("policy_settings.short_chars=0.9", "policy_settings.short_chars=0.9: expected a whole number"),
    ],
)  # fmt: skip
def test_a_setting_out_of_type_or_range_is_refused_before_the_run(store, setting, said):
    manifest = store.processed / "manifest.json"
    before = manifest.read_bytes() if manifest.exists() else None
    r = run_cli(store, "process", "--rebuild", "--set", setting)
    assert r.exit_code == 2, r.output
    assert f"Error: Invalid value for --set: {said}" in " ".join(r.output.split())
    assert (manifest.read_bytes() if manifest.exists() else None) == before  # nothing ran


def test_the_edges_still_run_and_are_recorded_as_given(store):
    r = run_cli(
        store, "process", "--rebuild", "--set", f"seed={2**63 - 1}",
        "--set", "policy_settings.short_chars=12.0",
    )  # fmt: skip
    assert r.exit_code == 0, r.output
    m = json.loads((store.processed / "manifest.json").read_text())
    assert m["config"]["seed"] == 2**63 - 1
    assert m["policy"]["thresholds"]["short_chars"] == 12
    r = run_cli(store, "export", "-o", str(store.root.parent / "exp"))
    assert r.exit_code == 0, r.output  # the processing seed is one export takes
