"""`validate` on JSONL of a foreign format (1205, F6): each OpenAI line printed six schema
problems (`id: unknown field`, `messages: unknown field`, ...), where the same record in a
`.json` file is one line naming the `import` that reads it. Run as a user runs it: the
installed `worldtrace` on real files."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from worldtrace.collectors.synthetic import SyntheticConfig, generate

from ..conftest import VENV_BIN

WT = str(VENV_BIN / "worldtrace")
OPENAI = {
    "id": "a",
    "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "ok"}],
}
SHAREGPT = {"conversations": [{"from": "human", "value": "hi"}, {"from": "gpt", "value": "ok"}]}


def validate(env: dict, *paths: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [WT, "validate", *map(str, paths)], capture_output=True, text=True, env=env
    )


def foreign(path: Path, line: int, fmt: str) -> str:
    return (
        f"{path}:line {line}: a record in the {fmt} format, not a worldtrace record: "
        f"import it with `worldtrace import {path}`"
    )


def test_a_jsonl_line_in_a_format_import_reads_is_one_line_naming_the_import(tmp_path, wt_env):
    [ours] = generate(SyntheticConfig(n=1, seed=3))
    f = tmp_path / "f.jsonl"
    f.write_text(f"{json.dumps(OPENAI)}\n{json.dumps(SHAREGPT)}\n{ours.to_json()}\n")
    r = validate(wt_env, f)
    assert r.stdout.splitlines() == [foreign(f, 1, "openai"), foreign(f, 2, "sharegpt")]
    assert r.stderr.splitlines() == ["1 file(s), 1 record(s), 2 problem(s)"]
    assert r.returncode == 1


def test_the_same_record_in_a_json_file_is_still_one_line(tmp_path, wt_env):
    f = tmp_path / "f.json"
    f.write_text(json.dumps(OPENAI))
    r = validate(wt_env, f)
    assert r.stdout.splitlines() == [
        f"{f}: one JSON document in the openai format, not worldtrace records: "
        f"import it with `worldtrace import {f}`"
    ]


def test_a_worldtrace_record_with_a_foreign_key_keeps_its_own_problems(tmp_path, wt_env):
    """A record that says it is ours (its `schema_version`) is checked as ours: a stray
    `messages` key is its problem, not a reason to send it to `import`."""
    [ours] = generate(SyntheticConfig(n=1, seed=3))
    d = json.loads(ours.to_json())
    d["messages"] = OPENAI["messages"]
    f = tmp_path / "f.jsonl"
    f.write_text(json.dumps(d) + "\n")
    r = validate(wt_env, f)
    assert r.stdout.splitlines() == [f"{f}:line 1 ({d['trajectory_id']}): messages: unknown field"]
    assert r.returncode == 1


def test_a_directory_walk_validates_ndjson_as_it_validates_jsonl(tmp_path, wt_env):
    """`validate DIR` (and `process --input DIR`) read `.jsonl` and `.json` files but
    passed over `.ndjson`, which `import` and `process --input FILE` read a record a line:
    a directory of records could look valid with none checked."""
    [ours] = generate(SyntheticConfig(n=1, seed=3))
    bad = {**json.loads(ours.to_json()), "domain": "nowhere"}
    d = tmp_path / "records"
    d.mkdir()
    (d / "a.ndjson").write_text(json.dumps(bad) + "\n")
    r = validate(wt_env, d)
    assert r.stderr.splitlines() == ["1 file(s), 1 record(s), 1 problem(s)"]
    assert r.returncode == 1 and "domain" in r.stdout
