"""Found (hunt 1205c): a `--config` file silently beat what was typed: `process --rebuild
--config a.yaml --policy agentworld-v1` with `policy: agentworld-v1+info` in the file
masked the store with the file's policy (and so the export), and `rebuild: false` in a
file undid a typed `--rebuild`, whose refusal then said "add --rebuild". What is typed
wins now (docs/pipeline.md); `--set`, typed too, comes last.

Real parts: the `worldtrace` CLI on a store of imported OpenAI chat logs."""

from __future__ import annotations

import json

from worldtrace.schemas import Store

from .test_query import run_cli
from .test_report_hunt_1204d import chats


def policy_of(store: Store) -> str:
    return json.loads((store.processed / "manifest.json").read_text())["policy"]["name"]


def test_typed_options_win_over_the_config_file(tmp_path):
    store = Store.at(tmp_path / "store")
    assert (
        run_cli(store, "import", "--create", str(chats(tmp_path / "a.jsonl", 0, 4))).exit_code == 0
    )
    info = tmp_path / "info.yaml"
    info.write_text("policy: agentworld-v1+info\n")
    r = run_cli(store, "process", "--config", str(info), "--policy", "agentworld-v1")
    assert r.exit_code == 0, r.output
    assert policy_of(store) == "agentworld-v1"  # before: agentworld-v1+info
    r = run_cli(store, "process", "--rebuild", "--config", str(info))  # the file alone
    assert r.exit_code == 0, r.output
    assert policy_of(store) == "agentworld-v1+info"
    no = tmp_path / "no.yaml"
    no.write_text("rebuild: false\npolicy: agentworld-v1\n")
    r = run_cli(store, "process", "--rebuild", "--config", str(no))
    assert r.exit_code == 0, r.output  # before: "settings changed ... add --rebuild"
    assert policy_of(store) == "agentworld-v1"
    r = run_cli(
        store, "process", "--rebuild", "--config", str(info), "--policy", "agentworld-v1",
        "--set", "policy=agentworld-v1+info",
    )  # fmt: skip
    assert r.exit_code == 0, r.output
    assert policy_of(store) == "agentworld-v1+info"  # --set, typed last, wins
