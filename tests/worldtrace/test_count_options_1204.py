"""Counts a user gives on the command line are checked where click reads them.

Found (docs review, 2026-12-04): `demo --episodes 0` ran, printed a config error from
inside the run and then `no Parquet or JSONL input`, exit 1 (`--episodes -1` with
`--sections docker` exited 0); `redact --check --show -1` and `import --show -1`
printed wrong counts (`... 1 more` of nothing). Each is a usage error now (exit 2,
naming the option), before any work."""

from __future__ import annotations

import pytest
from worldtrace.schemas import Store

from .test_query import run_cli


@pytest.mark.parametrize(
    ("args", "option"),
    [
        (["demo", "--sections", "mcp", "--episodes", "0"], "--episodes"),
        (["demo", "--sections", "docker", "--episodes", "-1"], "--episodes"),
        (["redact", "--check", "--show", "-1"], "--show"),
        (["import", "--show", "-1", "{tmp}/none.jsonl"], "--show"),
    ],
)
def test_a_count_out_of_range_is_a_usage_error_before_any_work(tmp_path, args, option):
    store = Store.at(tmp_path / "store")
    store.root.mkdir()
    (tmp_path / "none.jsonl").write_text("")
    r = run_cli(store, *(a.format(tmp=tmp_path) for a in args))
    assert r.exit_code == 2, r.output
    assert f"Invalid value for '{option}'" in r.output
    assert not (store.root / "raw").exists() and not (tmp_path / "worldtrace-demo").exists()


def test_import_lists_errors_before_warnings(tmp_path):
    """Found (fault review): with the default `--show 20`, 291 `repeated_call_id`
    warnings hid 4 of 5 errors (records not imported) behind `... 276 more`."""
    import json

    def calls(i: int, name: str) -> dict:
        fn = {"name": name, "arguments": "{}"}
        return {"role": "assistant", "content": None, "tool_calls": [{"id": f"{name}{i}", "type": "function", "function": fn}]}  # fmt: skip

    lines = [
        json.dumps(
            {
                "messages": [
                    {"role": "user", "content": f"task {i}"},
                    calls(i, "ls"),
                    {"role": "tool", "tool_call_id": f"ls{i}", "content": "a b"},
                    calls(i, "cat"),  # no result: a warning, the record imported
                ]
            }
        )
        for i in range(5)
    ]
    (tmp_path / "w.jsonl").write_text("\n".join([*lines, "{not json"]) + "\n")
    store = Store.at(tmp_path / "store")
    store.root.mkdir()
    r = run_cli(store, "import", "--show", "2", str(tmp_path / "w.jsonl"))
    listed = r.stderr.splitlines()
    assert listed[0].startswith(f"{tmp_path / 'w.jsonl'}:line 6: invalid_json: "), listed
    assert ":line 1: unpaired_call:" in listed[1]
    assert listed[2] == "... 4 more"
