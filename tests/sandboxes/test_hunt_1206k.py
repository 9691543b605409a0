"""Terminal and SWE defects found in a hunt (12-06k). Real containers.

- A terminal pool probed its OS, tools and shell once, in its first episode's container
  after that episode's set-up: every later episode said the tools that set-up left (curl
  "installed" where another set-up removed it), ran under dash after a set-up removed
  bash, or failed every attempt in the other order.
- A terminal step that only moved the cursor left (C-a, Home, Left, C-b) was observed as
  a row of blanks.
- SWE: a repository owned by a host user, copied in or mounted, was refused by git
  (`detected dubious ownership`); a worktree's `.git` file put the host's path into
  git's answers; an `edit` that failed on a full disk left the file cut; an `old` whose
  occurrences overlap (`1.1` in `1.1.1`) counted once; output cut by the cap ended in
  U+FFFD where it split a character.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from worldtrace.collectors.actions import keystrokes, tool
from worldtrace.collectors.episode import failure_reason
from worldtrace.sandboxes.base import SandboxConfigError, SandboxError, TaskSpec
from worldtrace.sandboxes.conditions import parse_conditions
from worldtrace.sandboxes.docker import DockerConfig
from worldtrace.sandboxes.screen import Terminal
from worldtrace.sandboxes.swe import SWEConfig, SWESandbox
from worldtrace.sandboxes.terminal import TerminalConfig, TerminalSandbox
from worldtrace.schemas.parsing import ConfigError, parse

pytestmark = pytest.mark.docker

NO_BASH = ("rm -f /usr/bin/bash /bin/bash",)


def tools_line(s: TerminalSandbox) -> list[str]:
    [line] = [x for x in s.describe()["initial_state"].splitlines() if x.startswith("Installed")]
    return line.removeprefix("Installed tools: ").split()


def shell_of(s: TerminalSandbox) -> str:
    o = s.step(keystrokes("echo $0\n", duration=10))
    assert json.loads(o.state_json)["prompt_returned"], o.text
    return o.text.splitlines()[1]


# -- 1: each terminal episode's facts are its own container's -------------------------------
def test_each_episode_says_the_tools_and_runs_the_shell_its_own_set_up_left(docker_engine):
    s = TerminalSandbox(TerminalConfig(docker=DockerConfig(step_timeout=20)))
    try:
        s.reset(TaskSpec("no-git", setup=("rm -f /usr/bin/git",)))
        assert "git" not in tools_line(s) and "curl" in tools_line(s)
        s.reset(TaskSpec("plain"))
        assert {"git", "curl", "bash"} <= set(tools_line(s))
        s.reset(TaskSpec("no-curl", setup=("rm -f /usr/bin/curl",)))
        assert "curl" not in tools_line(s) and "git" in tools_line(s)
        # the shell too, in either order: dash where the set-up removed bash, bash after
        for task, shell, prompt in [
            (TaskSpec("no-bash", setup=NO_BASH), "/bin/sh", "user@sandbox:/root$ "),
            (TaskSpec("plain"), "/bin/bash", "user@sandbox:~$ "),
            (TaskSpec("no-bash", setup=NO_BASH), "/bin/sh", "user@sandbox:/root$ "),
        ]:
            s.reset(task)
            assert f"Prompt: {prompt}" in s.describe()["initial_state"].splitlines()
            assert "bash" not in tools_line(s) or task.setup == ()
            assert shell_of(s) == shell, task
    finally:
        s.close()


def test_a_named_shell_the_set_up_removed_is_the_jobs_mistake_said_so(docker_engine):
    s = TerminalSandbox(
        TerminalConfig(docker=DockerConfig(step_timeout=20), shell=("/bin/bash", "-i"))
    )
    try:
        s.reset(TaskSpec("plain"))  # the pool knows the image has bash
        with pytest.raises(SandboxConfigError) as e:
            s.reset(TaskSpec("no-bash", setup=NO_BASH))
        assert str(e.value).startswith(
            "shell /bin/bash is not in the container after the task's set-up (image "
        )
    finally:
        s.close()


# -- 5: a cursor moved left of where the step began -----------------------------------------
@pytest.mark.parametrize(
    "answer", [b"\x08" * 9, b"\x1b[D", b"\x1b[3D", b"\x1b[H"], ids=["C-a", "Left", "CUB3", "Home"]
)
def test_a_cursor_moved_left_is_no_row_of_blanks_on_the_screen(answer):
    """The terminal's answer to a key that only moves the cursor left (readline's to C-a
    is a backspace per character)."""
    t = Terminal(80, 24)
    t.feed(b"user@sandbox:~$ echo hello")
    t.mark()
    t.feed(answer)
    assert t.observation() == ""


def test_a_cursor_moved_left_is_no_row_of_blanks_in_a_shell(term):
    """Each step reads from where the last one left the cursor (the rest of that line as it
    stands, `l` when that was before the last letter) to where the cursor is now."""
    steps = [
        ("echo hello", "echo hello"),
        ("\x7f", "user@sandbox:~$ echo hell"),  # the line changed at its start: whole
        ("C-a", ""),  # it printed nine backspaces: 46 blanks were observed
        ("C-e", "echo hell"),
        ("\x1b[D", ""),  # Left
        ("C-e", "l"),
        ("\x02", ""),  # C-b
        ("C-e", "l"),
        ("\x1b[H", ""),  # Home
    ]
    for key, seen in steps:
        o = term.step(keystrokes(key, duration=0.3))
        assert o.text == seen, (key, o.text)
    o = term.step(keystrokes("\n", duration=10))
    assert o.text == "echo hell\nhell\nuser@sandbox:~$ ", o.text


# -- 4: a failed set-up's reason is its error, on one line --------------------------------
@pytest.mark.parametrize(
    "setup,error",
    [
        (
            "python3 -c \"print('installing deps'); import nosuchmodule\"",
            "ModuleNotFoundError: No module named 'nosuchmodule' (the last of 3 lines it wrote to "
            "stderr)",
        ),
        (
            "echo about to fail; ls /nonexistent",
            "ls: cannot access '/nonexistent': No such file or directory",
        ),
        ("echo nope; echo nothing more; exit 3", "nothing more (the last of 2 lines it printed)"),
    ],
)
def test_a_failed_set_up_says_its_error_on_one_line(docker_engine, setup, error):
    s = TerminalSandbox(TerminalConfig(docker=DockerConfig(step_timeout=20)))
    try:
        with pytest.raises(SandboxError) as e:
            s.reset(TaskSpec("t", setup=(setup,)))
    finally:
        s.close()
    code = 3 if "exit 3" in setup else 1 if "python3" in setup else 2
    assert "\n" not in failure_reason(e.value)
    reason = failure_reason(e.value)
    assert reason == f"SandboxError: task setup failed ({code}): {setup}: {error}", reason


def test_a_reason_of_several_lines_keeps_its_first_and_its_last():
    exc = RuntimeError("docker could not start the command\n  detail\nOCI runtime: the cause\n")
    assert failure_reason(exc) == (
        "RuntimeError: docker could not start the command … OCI runtime: the cause"
    )


# -- SWE -----------------------------------------------------------------------------------
def host_repo(root: Path, files: dict[str, str], owner: int | None = None) -> Path:
    """A git repository on the host, committed, optionally owned by `owner` (a host user)."""
    root.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (root / name).write_text(text)
    git = ["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@x"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "first"], check=True)
    if owner is not None:
        for path in [root, *root.rglob("*")]:
            os.chown(path, owner, owner, follow_symlinks=False)
    return root


OWNED = {".gitignore": "build/\n", "main.py": "x = 1\n", "build/out.txt": ""}


def swe(repo: Path, conditions=(), **config) -> tuple[SWESandbox, str]:
    docker = {"step_timeout": 10, **config.pop("docker", {})}
    s = SWESandbox(SWEConfig(docker=DockerConfig(**docker), repo=str(repo), **config))
    try:
        drawn = parse_conditions(list(conditions)).sample(0) if conditions else ()
        initial = s.reset(TaskSpec("t"), conditions=drawn).text
    except BaseException:
        s.close()
        raise
    return s, initial


def bash(s: SWESandbox, command: str):
    return s.step(tool("bash", command=command))


@pytest.fixture(scope="module")
def owned(tmp_path_factory) -> Path:
    """A checkout a host user (uid 1000) owns, as any normal one, with an ignored file."""
    root = tmp_path_factory.mktemp("owned") / "repo"
    (root / "build").mkdir(parents=True)
    return host_repo(root, OWNED, owner=1000)


# -- 2a: a repository a host user owns ------------------------------------------------------
@pytest.mark.parametrize("mount", [False, True], ids=["copied", "mounted"])
def test_git_works_in_a_repository_a_host_user_owns(docker_engine, owned, mount):
    s, initial = swe(owned, mount=mount)
    try:
        # git's own listing: the ignored build/out.txt is not in it
        assert initial.splitlines() == ["Repository at /repo (2 files):", ".gitignore", "main.py"]
        o = bash(s, "git status --short; git log --format=%s; git diff --stat; echo rc=$?")
        assert o.text == "first\nrc=0\n", o.text
        o = bash(s, "env | grep -c ^GIT_; stat -c %u:%g /repo /repo/main.py")
        assert o.text.splitlines() == ["0", *(["0:0"] * 2 if not mount else ["1000:1000"] * 2)]
    finally:
        s.close()


def test_a_mounted_repository_under_a_read_only_root_is_trusted_too(docker_engine, owned):
    s, initial = swe(owned, mount=True, docker={"read_only": True})
    try:
        assert initial.splitlines()[1:] == [".gitignore", "main.py"]
        assert bash(s, "git log --format=%s").text == "first\n"
        # /etc/gitconfig cannot be written there: git's variables say it (documented)
        o = bash(s, "env | grep ^GIT_ | sort")
        assert (
            o.text
            == "GIT_CONFIG_COUNT=1\nGIT_CONFIG_KEY_0=safe.directory\nGIT_CONFIG_VALUE_0=/repo\n"
        )
    finally:
        s.close()


def test_a_copied_repository_belongs_to_the_containers_user(docker_engine, owned):
    s, _ = swe(owned, docker={"user": "nobody"})
    try:
        o = bash(
            s, "id -un; stat -c %U:%a /repo /repo/main.py; git log --format=%s; env | grep -c ^GIT_"
        )
        # no exec of another user may give files away, even as uid 0: it extracted them
        assert o.text == "nobody\nroot:777\nnobody:644\nfirst\n0\n", o.text
        assert not s.step(tool("edit", path="main.py", old="1", new="2")).is_error
    finally:
        s.close()


# -- 2b: a worktree's `.git` file names a repository outside the directory -----------------
def test_a_worktree_is_refused_naming_its_path_and_what_to_give(docker_engine, tmp_path):
    main = host_repo(tmp_path / "main", {"a.py": "a = 1\n"})
    subprocess.run(["git", "-C", str(main), "worktree", "add", "-q", str(tmp_path / "wt")],
                   check=True)  # fmt: skip
    wt = tmp_path / "wt"
    with pytest.raises(ConfigError) as e:
        parse(SWEConfig, {"repo": str(wt)})
    said = str(e.value)
    assert f"{wt}/.git is a file, not a repository" in said
    assert f"git clone {wt} DIR" in said and "\n" not in said
    # a job checked before (queued): the reset refuses it, nothing recorded of the host
    config = SWEConfig(repo=str(main))
    object.__setattr__(config, "repo", str(wt))
    s = SWESandbox(config)
    try:
        with pytest.raises(SandboxConfigError, match=r"^sandbox.repo: .*is a file, not a repo"):
            s.reset(TaskSpec("t"))
    finally:
        s.close()
    # a gitdir inside the directory, written relative to it, holds in the container too
    (main / "sub").mkdir()
    (main / "sub" / ".git").write_text("gitdir: ./.realgit\n")
    assert parse(SWEConfig, {"repo": str(main / "sub")}).repo == str(main / "sub")


# -- 3: an edit that fails leaves the file as it was -----------------------------------------
BIG = "".join(f"line {i} {'x' * 60}\n" for i in range(130))
"""8,900 bytes: three pages, the last with room for no 4 KiB more."""


def test_an_edit_that_fails_on_a_full_disk_leaves_the_file_as_it_was(docker_engine, tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "big.py").write_text(BIG)
    s, _ = swe(repo, conditions=["disk_full"])
    try:
        o = s.step(tool("edit", path="big.py", old="line 0 ", new="line 0 " + "y" * 5000))
        assert o.is_error and o.text == "error: cannot write big.py: No space left on device"
        o = bash(s, "wc -c < big.py; md5sum < big.py")
        assert o.text.split()[:2] == [
            str(len(BIG)),
            __import__("hashlib").md5(BIG.encode()).hexdigest(),
        ]
        o = s.step(tool("edit", path="new.py", content="z" * 5000))
        assert o.text == "error: cannot write new.py: No space left on device"
        assert bash(s, "ls").text == "big.py\n"
    finally:
        s.close()


# -- 6, 8: overlapping occurrences; a cut that splits a character ----------------------------
@pytest.fixture(scope="module")
def small(docker_engine, tmp_path_factory):
    repo = tmp_path_factory.mktemp("small") / "repo"
    repo.mkdir()
    (repo / "ver.py").write_text('v = "1.1.1"\n')
    (repo / "a.txt").write_text("aaa\n")
    s, _ = swe(repo, docker={"output_cap": 5001})
    yield s
    s.close()


@pytest.mark.parametrize(
    "path,old,text",
    [("ver.py", "1.1", 'v = "1.1.1"\n'), ("a.txt", "aa", "aaa\n"), ("a.txt", "a\na", None)],
)
def test_an_old_that_occurs_twice_overlapping_is_refused(small, path, old, text):
    o = small.step(tool("edit", path=path, old=old, new="2.0"))
    if text is None:  # not found at all
        assert o.text == f"error: `old` must occur exactly once in {path} (found 0)"
        return
    assert o.is_error and o.text == f"error: `old` must occur exactly once in {path} (found 2)"
    assert bash(small, f"cat {path}").text == text


def test_bash_output_cut_inside_a_character_drops_it(small):
    o = bash(small, "python3 -c \"print('é' * 3000)\"")
    assert o.truncated and o.text == "é" * 2500, o.text[-5:]
