"""SWE defects found in a hunt (12-05, f): an edit's diff passed the output cap unflagged;
a ranged read saw only the file's first `output_cap` bytes; the initial state split file
names at blanks (and took git's quoted ones) and counted only the 200 it listed; a
read-only root could not take the repository's copy; a timeout note added a blank line;
a command that ended just past the cap lost its exit code to the cut. Real containers."""

from __future__ import annotations

import json
import subprocess

import pytest
from worldtrace.collectors.actions import tool
from worldtrace.sandboxes.base import TaskSpec
from worldtrace.sandboxes.conditions import parse_conditions
from worldtrace.sandboxes.docker import DockerConfig
from worldtrace.sandboxes.swe import SWEConfig, SWESandbox, timed_out_note, unified_diff

from .test_swe_exec_failures import CAP, swe  # noqa: F401  (the fixture)

pytestmark = pytest.mark.docker

LINES = 100_000
"""`seq 100000`: 588,895 bytes, nine times the fixture's cap."""


def test_an_edit_diff_over_the_cap_is_cut_and_flagged(swe):  # noqa: F811
    """Found: a 100,000-line file rewritten as one line answered a 2 MB diff under a
    20,000-byte cap, `truncated` false."""
    swe.step(tool("bash", command=f"seq {LINES} > gen.py"))
    o = swe.step(tool("edit", path="gen.py", content="x = 1\n"))
    whole = unified_diff("".join(f"{i}\n" for i in range(1, LINES + 1)), "x = 1\n", "gen.py")
    assert o.truncated and not o.is_error
    assert len(o.text.encode()) == CAP and whole.startswith(o.text)
    assert swe.step(tool("bash", command="cat gen.py")).text == "x = 1\n"  # edited all the same
    o = swe.step(tool("edit", path="gen.py", old="x = 1", new="x = 2"))  # a small diff: whole
    assert not o.truncated and o.text.endswith("-x = 1\n+x = 2\n")


def test_a_ranged_read_reads_its_lines_wherever_they_lie(swe):  # noqa: F811
    """Found: on a file over the cap, lines 99999-100000 answered '' flagged `truncated`,
    and lines 1-3 were right but flagged `truncated` too."""
    swe.step(tool("bash", command=f"seq {LINES} > gen.py"))
    o = swe.step(tool("read", path="gen.py", start=99_999, end=100_000))
    assert (o.text, o.truncated, o.is_error) == (" 99999\t99999\n100000\t100000", False, False)
    o = swe.step(tool("read", path="gen.py", start=99_999))  # to the end
    assert (o.text, o.truncated) == (" 99999\t99999\n100000\t100000", False)
    o = swe.step(tool("read", path="gen.py", start=1, end=3))
    assert (o.text, o.truncated) == ("     1\t1\n     2\t2\n     3\t3", False)
    o = swe.step(tool("read", path="gen.py", start=LINES + 1))
    assert (
        o.is_error
        and o.text == f"error: start {LINES + 1} is past the last line of gen.py (100000)"
    )
    o = swe.step(tool("read", path="gen.py", start=50_000))  # lines over the cap: cut there
    assert o.truncated and len(o.text.encode()) <= CAP and o.text.startswith(" 50000\t50000\n")
    o = swe.step(tool("read", path="gen.py"))
    assert o.truncated and o.text.startswith("     1\t1\n")
    swe.step(tool("bash", command="printf 'a\\nb' > nonl.txt"))  # a last line without \n
    o = swe.step(tool("read", path="nonl.txt", start=3))
    assert o.text == "error: start 3 is past the last line of nonl.txt (2)"
    assert swe.step(tool("read", path="nonl.txt", start=2)).text == "     2\tb"


def test_the_initial_state_lists_names_as_they_are_and_counts_them_all(docker_engine, tmp_path):
    """Found: `my file.txt` was listed as `file.txt` and `my`, `日本.txt` as git quotes it
    (`"\\346\\227\\245..."`); 302 files without git were said to be 200."""
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "my file.txt").write_text("a\n")
    (repo / "日本.txt").write_text("b\n")
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    subprocess.run(["git", "-C", str(repo), "add", "."], check=True)
    s = SWESandbox(SWEConfig(docker=DockerConfig(step_timeout=10), repo=str(repo)))
    try:
        o = s.reset(TaskSpec("git"))
        assert o.text == "Repository at /repo (2 files):\nmy file.txt\n日本.txt", o.text
        assert s.describe()["initial_state"] == o.text
        made = "rm -rf .git && for i in $(seq 300); do : > f$i.py; done"  # find's listing now
        o = s.reset(TaskSpec("many", setup=[made]))
        head, *names = o.text.split("\n")
        assert head == "Repository at /repo (302 files, first 200 shown):", head
        assert names == sorted(f"f{i}.py" for i in range(1, 301))[:200]
    finally:
        s.close()


def test_a_read_only_root_keeps_the_repository_writable(docker_engine, repo):
    """Found: `docker: {read_only: true}` failed every attempt (`mkdir: cannot create
    directory '/repo': Read-only file system`), each retried. The repository's path gets a
    tmpfs as the workdir does; a read_only condition that binds the repository still
    starts (one mount per path)."""
    s = SWESandbox(SWEConfig(docker=DockerConfig(read_only=True, step_timeout=10), repo=str(repo)))
    try:
        s.reset(TaskSpec("ro"))
        o = s.step(tool("edit", path="pkg/calc.py", old="a - b", new="a + b"))
        assert not o.is_error and "+    return a + b" in o.text
        o = s.step(tool("bash", command="cat pkg/calc.py; touch /etc/x"))
        assert o.text.startswith("def add(a, b):\n    return a + b\n"), o.text
        assert "Read-only file system" in o.text and o.exit_code == 1
        s.reset(TaskSpec("bound"), conditions=parse_conditions(["read_only"]).sample(0))
        o = s.step(tool("edit", path="pkg/calc.py", old="a - b", new="a + b"))
        assert o.text == "error: cannot write pkg/calc.py: Read-only file system", o.text
    finally:
        s.close()
    assert (repo / "pkg" / "calc.py").read_text() == "def add(a, b):\n    return a - b\n"


def test_a_timeout_note_adds_no_blank_line(docker_engine, repo):
    """Found: `echo begin; sleep 20` was recorded `begin\\n\\n[timed out after 8s]`, and no
    output `\\n[timed out after 3s]`: a blank line the command never printed."""
    s = SWESandbox(SWEConfig(docker=DockerConfig(step_timeout=0.5), repo=str(repo)))
    s.reset(TaskSpec("t"))
    try:
        for command, text in (
            ("echo begin; sleep 20", "begin\n[timed out after 0.5s]"),
            ("printf begin; sleep 20", "begin\n[timed out after 0.5s]"),
            ("sleep 20", "[timed out after 0.5s]"),
        ):
            o = s.step(tool("bash", command=command))
            assert (o.text, o.exit_code) == (text, 137), o.text
            assert json.loads(o.state_json)["timed_out"]
    finally:
        s.close()
    assert timed_out_note("error: cannot read f", 2) == "error: cannot read f\n[timed out after 2s]"


def test_a_command_that_ended_just_past_the_cap_keeps_its_exit_code(swe):  # noqa: F811
    """Docs said a command past the cap gets exit code none; one that had ended came back
    3, None or 126 by a race (the stream closed under the engine makes it kill the exec
    and record 126). One that ended keeps its code; one still running is killed: None."""
    just_past = f"head -c {CAP + 4000} /dev/zero | tr '\\0' x; exit 3"
    for _ in range(5):
        o = swe.step(tool("bash", command=just_past))
        assert (o.exit_code, o.truncated, o.is_error, len(o.text)) == (3, True, True, CAP)
    o = swe.step(tool("bash", command=f"head -c {CAP * 3} /dev/zero; exit 3"))
    assert o.truncated and o.exit_code in (3, None)  # ended, or killed: never the engine's
    o = swe.step(tool("bash", command="yes; exit 3"))
    assert (o.exit_code, o.truncated, o.is_error) == (None, True, False)
    o = swe.step(tool("bash", command="pgrep -x yes || echo none"))
    assert o.text == "none\n"
