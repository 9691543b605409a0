"""Bad input never stops good data: deep nesting, NaN, empty files, huge observations,
and a disk that fills up during the import."""

from __future__ import annotations

import json
import random
import resource
import signal
import subprocess
import sys

from worldtrace.collectors.importers import ImportConfig, import_paths
from worldtrace.schemas import read_records


def chat(rid, observation="ok"):
    return {
        "id": rid,
        "messages": [
            {"role": "user", "content": "go"},
            {"role": "assistant", "tool_calls": [{"id": "a", "function": {"name": "f", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "a", "content": observation},
        ],
    }  # fmt: skip


DEEP = 100_000


def test_deep_nan_and_empty_inputs_are_located_and_the_rest_imported(tmp_path):
    d = tmp_path / "in"
    d.mkdir()
    nan_line = json.dumps(chat("nan")).replace('"ok"', "NaN")
    deep_line = '{"id": "deep", "messages": ' + "[" * DEEP + "]" * DEEP + "}"
    (d / "a.jsonl").write_text(
        "\n".join([json.dumps(chat("good-1")), deep_line, nan_line, json.dumps(chat("good-2"))])
        + "\n"
    )
    (d / "b.json").write_text("[" * DEEP + "]" * DEEP)
    (d / "c.json").write_text('{"messages": [\n  {"role": "user", "content": -Infinity}\n]}')
    (d / "d.json").write_text("")
    (d / "e.jsonl").write_text("\n  \n")
    (d / "f.json").write_text(json.dumps(chat("good-3")))
    r = import_paths([d], tmp_path / "out")
    assert r.files == 6
    assert r.imported["openai"] == 3
    assert {t.source.origin_id for t in read_records(tmp_path / "out")} == {
        "good-1",
        "good-2",
        "good-3",
    }
    where = {(p.path.rsplit("/", 1)[1], p.where, p.kind) for p in r.problems}
    assert where == {
        ("a.jsonl", "line 2", "invalid_json"),
        ("a.jsonl", "line 3", "invalid_json"),
        ("b.json", "line 1", "invalid_json"),
        ("c.json", "line 2", "invalid_json"),
        ("d.json", "line 1", "empty_file"),
        ("e.jsonl", "line 1", "empty_file"),
    }
    msgs = {(p.path.rsplit("/", 1)[1], p.where): p.message for p in r.problems}
    assert f"nested {DEEP + 1} levels deep" in msgs["a.jsonl", "line 2"]
    assert "NaN is not valid JSON" in msgs["a.jsonl", "line 3"]
    assert "-Infinity is not valid JSON (column 31)" in msgs["c.json", "line 2"]


def test_observation_cap(tmp_path, wt_env):
    f = tmp_path / "big.jsonl"
    f.write_text(json.dumps(chat("big", "x" * 5000)) + "\n" + json.dumps(chat("small")) + "\n")
    r = import_paths([f], tmp_path / "out", ImportConfig(max_observation_chars=1000))
    assert r.warnings["truncated_observation"] == 1 and r.imported["openai"] == 2
    got = {t.source.origin_id: t.turns[0].observation for t in read_records(tmp_path / "out")}
    assert (len(got["big"].text), got["big"].truncated) == (1000, True)
    assert (got["small"].text, got["small"].truncated) == ("ok", False)
    cli = subprocess.run(
        ["worldtrace", "import", "--max-observation-chars", "100", str(f)],
        capture_output=True,
        text=True,
        env=wt_env,
    )
    assert cli.returncode == 0, cli.stderr
    assert "truncated_observation" in cli.stdout
    [t] = [t for t in read_records(wt_env["WORLDTRACE_STORE"]) if t.source.origin_id == "big"]
    assert len(t.turns[0].observation.text) == 100


FILE_LIMIT = 150_000


def _limit_file_size():
    """Writes past FILE_LIMIT bytes fail with EFBIG, as on a full disk."""
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (FILE_LIMIT, resource.RLIM_INFINITY))


def _incompressible(rng, n):
    return "".join(rng.choice("abcdefghijklmnopqrstuvwxyz0123456789") for _ in range(n))


def test_disk_full_one_line_error_no_temp_earlier_shards_kept(tmp_path, wt_env):
    rng = random.Random(0)
    small, big = tmp_path / "small.jsonl", tmp_path / "big.jsonl"
    small.write_text("".join(json.dumps(chat(f"s{i}")) + "\n" for i in range(3)))
    big.write_text(
        "".join(json.dumps(chat(f"b{i}", _incompressible(rng, 40_000))) + "\n" for i in range(8))
    )
    run = dict(capture_output=True, text=True, env=wt_env)
    assert subprocess.run(["worldtrace", "import", str(small)], **run).returncode == 0
    r = subprocess.run(["worldtrace", "import", str(big)], preexec_fn=_limit_file_size, **run)
    dest = f"{wt_env['WORLDTRACE_STORE']}/raw/import"
    assert r.returncode == 1
    [line] = r.stderr.strip().splitlines()
    assert line.startswith(f"error: cannot write shards under {dest}:") and "too large" in line
    files = sorted(p.name for p in (tmp_path / "store" / "raw" / "import").iterdir())
    assert len(files) == 1 and not files[0].startswith(".")
    assert sorted(t.source.origin_id for t in read_records(dest)) == ["s0", "s1", "s2"]


def test_disk_full_mid_run_keeps_the_shards_already_published(tmp_path):
    """Shards roll every 1024 rows here; the disk fills on the third."""
    rng = random.Random(1)
    f = tmp_path / "mixed.jsonl"
    lines = [json.dumps(chat(f"s{i}", f"out {i}")) for i in range(2048)]
    lines += [json.dumps(chat(f"b{i}", _incompressible(rng, 40_000))) for i in range(8)]
    f.write_text("\n".join(lines) + "\n")
    out = tmp_path / "out"
    script = (
        "import sys; from worldtrace.collectors.importers import ImportConfig, ImportWriteError, import_paths\n"
        "try:\n"
        f"    import_paths([{str(f)!r}], {str(out)!r}, ImportConfig(shard_bytes=1))\n"
        "except ImportWriteError as e:\n"
        "    print(len(e.kept)); sys.exit(3)\n"
    )
    r = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        preexec_fn=_limit_file_size,
    )
    assert r.returncode == 3, r.stderr
    assert r.stdout.strip() == "2"
    assert not [p for p in out.iterdir() if p.name.startswith(".")]
    assert sum(1 for _ in read_records(out)) == 2048


def test_validate_goes_on_past_a_file_nested_too_deep(tmp_path, wt_env):
    from worldtrace.collectors.synthetic import SyntheticConfig, generate
    from worldtrace.schemas.store import write_jsonl

    deep = tmp_path / "a-deep.jsonl"
    deep.write_text('{"turns": ' + "[" * DEEP + "]" * DEEP + "}\n")
    good = write_jsonl(tmp_path / "b-good.jsonl", generate(SyntheticConfig(n=3, seed=1)))
    r = subprocess.run(
        ["worldtrace", "validate", str(deep), str(good)], capture_output=True, text=True, env=wt_env
    )
    assert r.returncode == 1
    assert r.stdout.splitlines() == [
        f"{deep}: <json>: nested too deeply to parse; the rest of the file is not checked"
    ]
    assert "3 record(s), 1 problem(s)" in r.stderr
