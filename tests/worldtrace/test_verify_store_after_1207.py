"""Found (a CLI hunt, 12-07): `export --verify DIR --store S` was refused, `--verify
checks an export and takes no other option; given: --store` (and `given: --create`),
though `--store` and `--create` are taken before the command or after it on every
command (docs/cli.md). The global options are no option beside `--verify`."""

from __future__ import annotations

from click.testing import CliRunner
from worldtrace.schemas import Store

from worldtrace.cli import cli

from .test_query import run_cli
from .test_report_hunt_1204d import chats


def test_verify_takes_the_store_after_the_command(tmp_path):
    store = Store.at(tmp_path / "store")
    assert run_cli(store, "import", "--create", str(chats(tmp_path / "a.jsonl", 0, 3))).exit_code == 0  # fmt: skip
    assert run_cli(store, "process").exit_code == 0
    out = tmp_path / "awb"
    r = run_cli(store, "export", "--format", "agentworldbench", "-o", str(out))
    assert r.exit_code == 0, r.output
    for extra in (["--store", str(store.root)], ["--create"]):
        r = CliRunner().invoke(cli, ["export", "--verify", str(out), *extra],
                               env={"WORLDTRACE_STORE": str(store.root)})  # fmt: skip
        assert r.exit_code == 0, r.output
        assert "verified" in r.output
    r = CliRunner().invoke(cli, ["export", "--verify", str(out), "--json"])
    assert r.exit_code == 2 and "given: --json" in r.output  # a command's own option still is
