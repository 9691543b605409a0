"""Found (a user's import session, 2026-12-05): re-importing an unchanged file with another
`--max-observation-chars` said "changed since it was imported" and stored every record a
second time (the cut copy beside the whole one: every turn trained on twice); and
`worldtrace import` refused worldtrace's own records (`unrecognized`), which `validate`
passes and `stats` tells the user to import."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
from worldtrace.collectors.importers import FORMATS, ImportConfig, import_paths
from worldtrace.collectors.synthetic import SyntheticConfig, generate
from worldtrace.schemas import read_records
from worldtrace.schemas.store import shard_files, write_jsonl

from .test_import_robustness import chat
from .test_import_workers import SWE_AGENT

DOCS = Path(__file__).resolve().parents[2] / "docs" / "importers.md"
LONG = "line of output " * 10  # 150 characters: cut by a cap of 50


def wt(env, *args):
    return subprocess.run(["worldtrace", *map(str, args)], capture_output=True, text=True, env=env)


def stored(env):
    return list(read_records(f"{env['WORLDTRACE_STORE']}/raw/import"))


def options(t):
    """The import options a record was imported with, those that are not the defaults."""
    return json.loads(t.metadata.get("import_options", "{}"))


def chats(path, n=5, changed=None):
    lines = [chat(f"c{i}", f"{i} {LONG}" if i != changed else f"{i} changed {LONG}") for i in range(n)]  # fmt: skip
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return path


# -- a re-import with other options ---------------------------------------------------


def test_a_reimport_with_another_cap_is_refused_naming_the_option_not_stored_twice(
    tmp_path, wt_env
):
    f = chats(tmp_path / "chats.jsonl")
    r = wt(wt_env, "import", "--max-observation-chars", "50", f)
    assert r.returncode == 0 and "truncated_observation" in r.stdout, r.stderr
    first = stored(wt_env)
    assert len(first) == 5 and all(t.turns[0].observation.truncated for t in first)
    assert [options(t) for t in first] == [{"max_observation_chars": 50}] * 5  # provenance
    r = wt(wt_env, "import", f)  # the same file, the default cap
    assert r.returncode == 1, r.stdout + r.stderr  # nothing imported: refused
    assert "record_changed" not in r.stdout + r.stderr and "imported" not in r.stdout
    [line] = [x for x in r.stderr.splitlines() if "options_differ" in x]
    shard = shard_files(Path(wt_env["WORLDTRACE_STORE"]) / "raw" / "import")[0].name
    assert line == (
        f"{f}: options_differ: 5 records not imported again: the store holds them as imported "
        "from this file with --max-observation-chars 50 (this import: 1048576); the file did "
        "not change, only the options, and a second copy would train on each twice. To store "
        "them with this import's options instead, move the shard(s) holding them out of "
        f"{wt_env['WORLDTRACE_STORE']}/raw/import ({shard}) and import their files again, or "
        "import into a new store"
    )
    assert re.search(r"error\s+│ options_differ\s+│\s+5", r.stdout), r.stdout
    assert sorted(t.trajectory_id for t in stored(wt_env)) == sorted(
        t.trajectory_id for t in first
    )  # nothing stored twice
    r = wt(wt_env, "import", "--max-observation-chars", "0", "--strict", f)  # no cap: named so
    assert r.returncode == 1 and "--max-observation-chars 50 (this import: 0 (no cap))" in r.stderr
    r = wt(wt_env, "import", "--max-observation-chars", "50", f)  # the same options: present
    assert r.returncode == 0 and "already present" in r.stdout and "options_differ" not in r.stderr
    # a line that did change is new, as before, whatever the options; the others refused
    chats(f, changed=2)
    r = wt(wt_env, "import", f)
    assert r.returncode == 0, r.stderr
    assert "line 3: record_changed: changed since it was imported" in r.stderr
    assert "4 records not imported again" in r.stderr
    assert len(stored(wt_env)) == 6
    assert [options(t) for t in stored(wt_env) if t.source.origin_index == 2] in (
        [{"max_observation_chars": 50}, {}], [{}, {"max_observation_chars": 50}]
    )  # the defaults: no key  # fmt: skip


def test_a_longer_cap_that_cuts_nothing_more_finds_the_records_present(tmp_path, wt_env):
    """Only what the options change is refused: a record no cap cuts is the same record."""
    f = tmp_path / "chats.jsonl"
    f.write_text(json.dumps(chat("short", "ok")) + "\n" + json.dumps(chat("long", LONG)) + "\n")
    assert wt(wt_env, "import", "--max-observation-chars", "50", f).returncode == 0
    r = wt(wt_env, "import", "--max-observation-chars", "100", f)
    assert "already present" in r.stdout and "1 record not imported again" in r.stderr
    assert "--max-observation-chars 50 (this import: 100)" in r.stderr
    assert len(stored(wt_env)) == 2


def test_a_reimport_with_another_domain_says_so_and_keeps_the_stored_one(tmp_path, wt_env):
    """The domain is not part of the id: such a record was `already present` in silence,
    its domain not the one asked for."""
    f = chats(tmp_path / "chats.jsonl", n=2)
    assert wt(wt_env, "import", f).returncode == 0
    assert {t.domain for t in stored(wt_env)} == {"mcp"}  # inferred from the tool names
    r = wt(wt_env, "import", "--domain", "terminal", f)
    assert r.returncode == 1, r.stdout + r.stderr
    assert (
        f"{f}: options_differ: 2 records not imported again: the store holds them as "
        "imported from this file with --domain unset, inferred as mcp (this import: terminal);"
    ) in r.stderr
    assert {t.domain for t in stored(wt_env)} == {"mcp"} and len(stored(wt_env)) == 2
    r = wt(wt_env, "import", "--domain", "mcp", f)  # what it is already: present
    assert r.returncode == 0 and "already present" in r.stdout and "options_differ" not in r.stderr


@pytest.mark.parametrize("workers", [1, 2])
def test_files_read_whole_are_read_again_with_the_earlier_options(tmp_path, workers):
    """A SWE-agent run (a file read whole, `convert_file`), in worker processes or not."""
    d = tmp_path / "runs"
    d.mkdir()
    for i in range(3):
        t = json.loads(json.dumps(SWE_AGENT))
        t["trajectory"][1]["observation"] = f"{i} {LONG}"
        (d / f"run{i}.traj").write_text(json.dumps(t))
    out = tmp_path / "out"
    r = import_paths([d], out, ImportConfig(max_observation_chars=50, workers=workers))
    assert dict(r.imported) == {"swe-agent": 3}
    r = import_paths([d], out, ImportConfig(workers=workers))
    assert (dict(r.imported), dict(r.errors)) == ({}, {"options_differ": 3})
    assert [p.path for p in r.problems] == [str(d / f"run{i}.traj") for i in range(3)]
    assert len(list(read_records(out))) == 3


# -- worldtrace's own records ---------------------------------------------------------


def records(path, n=3):
    return write_jsonl(path, generate(SyntheticConfig(n=n, seed=1)))


def test_worldtrace_records_import_as_shards_kept_as_given(tmp_path, wt_env):
    f = records(tmp_path / "recs.jsonl")
    given = [json.loads(line) for line in f.read_text().splitlines()]
    r = wt(wt_env, "validate", f)
    assert r.returncode == 0 and "0 problem(s)" in r.stderr, r.stdout
    r = wt(wt_env, "import", f)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "unrecognized" not in r.stdout + r.stderr
    assert re.search(r"imported\s+│ worldtrace\s+│\s+3", r.stdout), r.stdout
    got = {t.trajectory_id: t for t in stored(wt_env)}
    assert sorted(got) == sorted(g["trajectory_id"] for g in given)  # the ids as given
    for k, g in enumerate(given):
        t = got[g["trajectory_id"]]
        assert (t.source.kind, t.source.name, t.source.episode_id) == (
            g["source"]["kind"], g["source"]["name"], g["source"]["episode_id"],
        )  # fmt: skip
        assert (t.source.origin_path, t.source.origin_index) == (str(f.resolve()), k)
        assert t.domain == g["domain"] and len(t.turns) == len(g["turns"])
    r = wt(wt_env, "import", f)
    assert r.returncode == 0 and re.search(r"already present\s+│ worldtrace\s+│\s+3", r.stdout)
    assert len(stored(wt_env)) == 3
    # a list of them in a .json file, with records imported before: their place is kept
    again = tmp_path / "again.json"
    again.write_text(json.dumps([json.loads(t.to_json()) for t in stored(wt_env)]))
    r = import_paths([again], tmp_path / "out", ImportConfig(workers=1))
    assert dict(r.imported) == {"worldtrace": 3}
    moved = list(read_records(tmp_path / "out"))
    assert {t.source.origin_path for t in moved} == {str(again.resolve())}
    assert {json.loads(t.metadata["earlier_origin"])["origin_path"] for t in moved} == {
        str(f.resolve())
    }


def test_a_record_validate_refuses_is_refused_in_its_words(tmp_path):
    f = records(tmp_path / "recs.jsonl", n=2)
    lines = f.read_text().splitlines()
    bad = json.loads(lines[0])
    bad["trajectory_id"] = "0" * 32
    row = {"schema_version": "worldtrace.training/1", "input_ids": [1, 2]}
    f.write_text("\n".join([json.dumps(bad), lines[1], json.dumps(row)]) + "\n")
    r = import_paths([f], tmp_path / "out", ImportConfig(workers=1))
    assert (dict(r.imported), dict(r.errors)) == ({"worldtrace": 1}, {"invalid": 1, "unrecognized": 1})  # fmt: skip
    assert [str(p) for p in r.problems if p.fatal] == [
        f"{f}:line 1: invalid: trajectory_id: does not match the content hash "
        f"({json.loads(lines[0])['trajectory_id']})",
        f'{f}:line 3: unrecognized: schema_version "worldtrace.training/1" is not a '
        "trajectory record's (worldtrace.trajectory/1)",
    ]


def test_worldtrace_records_under_the_stores_raw_are_not_imported_twice(tmp_path, wt_env):
    """`process` reads raw/*.jsonl as it is: imported too, each record would be processed
    twice. One line says so, and how to have shards made."""
    raw = Path(wt_env["WORLDTRACE_STORE"]) / "raw"
    raw.mkdir()
    f = records(raw / "recs.jsonl")
    r = wt(wt_env, "import", f)
    assert r.returncode == 1, r.stdout + r.stderr
    assert (
        f"{f}: read_by_process: 3 worldtrace records not imported: the file is under the "
        "store's raw/, and `worldtrace process` reads the records there as they are "
        "(imported too, each would be processed twice); to make shards of it, move it out "
        "of raw/ and import it from there"
    ) in r.stderr.splitlines()
    assert not shard_files(raw / "import")
    outside = tmp_path / "recs.jsonl"
    f.rename(outside)
    (raw / "linked.jsonl").symlink_to(outside)  # process reads it through the link
    r = wt(wt_env, "import", outside)
    assert r.returncode == 1 and f"{outside}: read_by_process: 3 worldtrace records" in r.stderr
    (raw / "linked.jsonl").unlink()
    assert wt(wt_env, "import", outside).returncode == 0 and len(stored(wt_env)) == 3


def test_the_docs_list_every_format():
    synopsis = DOCS.read_text().split("\n", 3)[2]
    assert synopsis.startswith("`worldtrace import [--format auto|")
    listed = synopsis.split("[--format ", 1)[1].split("]", 1)[0].split("|")
    assert sorted(listed) == sorted(["auto", *FORMATS]) and "worldtrace" in listed
