"""A Codex rollout of which nothing is read is an error, not warnings alone."""

from __future__ import annotations

from click.testing import CliRunner

from worldtrace.cli import cli

from .test_import_codex import Rollout, path_of


def test_a_rollout_whose_lines_are_all_of_unknown_types_is_an_error(tmp_path):
    """Found: a rollout of a later Codex whose items are of a type we do not know (its
    `session_meta`, then `response_item_v2` lines) imported nothing with warnings alone,
    and `import --strict` exited 0. Nothing read is `empty`, an error: exit 1."""
    r = Rollout()
    r.line("response_item_v2", {"type": "message", "role": "user", "content": []})
    r.line("response_item_v2", {"type": "function_call", "name": "shell", "call_id": "c"})
    f = r.write(path_of(tmp_path))
    store = tmp_path / "s"
    for args in (["--strict"], ["--format", "codex"]):
        res = CliRunner().invoke(
            cli, ["--store", str(store), "--create", "import", *args, str(f.parent)], obj={}
        )
        assert res.exit_code == 1, res.output
        assert "empty" in res.output and "no Codex response item in the file" in res.output
