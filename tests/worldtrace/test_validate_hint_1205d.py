"""`validate` on a Claude Code, Codex CLI or Gemini CLI session (1205d): each event was
checked as a worldtrace record, 198 lines of schema problems for one Claude Code
session, where an OpenAI JSONL line or a whole foreign JSON document is one line naming
the `import` that reads it. Run as a user runs it: the installed `worldtrace` on real
files."""

from __future__ import annotations

import json

from worldtrace.collectors.synthetic import SyntheticConfig, generate

from ..collectors.test_import_claude_code import SID
from ..collectors.test_import_claude_code import fix_session as claude_session
from ..collectors.test_import_codex import fix_rollout
from ..collectors.test_import_gemini_cli import fix_session as gemini_session
from ..collectors.test_import_gemini_cli import write_jsonl
from .test_validate_1205 import validate


def hint(path, fmt):
    return (
        f"{path}: a {fmt} session (JSONL, one event a line), not worldtrace records: "
        f"import it with `worldtrace import {path}`"
    )


def test_a_session_file_is_one_line_naming_the_import(tmp_path, wt_env):
    d = tmp_path / "in"
    claude = claude_session().write(d / "claude" / f"{SID}.jsonl")
    codex = fix_rollout().write(d / "codex" / "rollout-2025-10-14T09-00-00-x.jsonl")
    s = gemini_session()
    gemini = write_jsonl(d / "gemini" / "session-2025-10-06T09-00-8c3f0a52.jsonl",
                         [s.metadata(), *s.messages])  # fmt: skip
    [ours] = generate(SyntheticConfig(n=1, seed=3))
    (d / "ours.jsonl").write_text(ours.to_json() + "\n")
    for f, fmt in ((claude, "claude-code"), (codex, "codex"), (gemini, "gemini-cli")):
        r = validate(wt_env, f)
        assert r.stdout.splitlines() == [hint(f, fmt)]
        assert r.stderr.splitlines() == ["1 file(s), 0 record(s), 1 problem(s)"]
        assert r.returncode == 1
    r = validate(wt_env, d)  # a walk: each session one line, our records checked
    assert sorted(r.stdout.splitlines()) == sorted(
        [hint(claude, "claude-code"), hint(codex, "codex"), hint(gemini, "gemini-cli")]
    )
    assert r.stderr.splitlines() == ["4 file(s), 1 record(s), 3 problem(s)"]


def test_our_records_and_record_formats_are_still_checked_per_line(tmp_path, wt_env):
    """Only a session's first lines make it one: records of ours, or an OpenAI line,
    keep their own lines."""
    [ours] = generate(SyntheticConfig(n=1, seed=3))
    bad = {**json.loads(ours.to_json()), "domain": "nowhere"}
    f = tmp_path / "records.jsonl"
    f.write_text(json.dumps(bad) + "\n")
    r = validate(wt_env, f)
    assert r.returncode == 1 and "domain" in r.stdout and "session" not in r.stdout
