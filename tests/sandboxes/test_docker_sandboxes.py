"""Real containers: state, keys, caps, timeouts, isolation, teardown."""

from __future__ import annotations

import json
import subprocess
import threading
from pathlib import Path

import pytest
from worldtrace.collectors.actions import keystrokes, tool
from worldtrace.pipelines.mask import turn_fault
from worldtrace.sandboxes.base import TaskSpec
from worldtrace.sandboxes.docker import LABEL, DockerConfig
from worldtrace.sandboxes.swe import SWEConfig, SWESandbox
from worldtrace.sandboxes.terminal import TerminalConfig, TerminalSandbox

from ..conftest import wait_until

pytestmark = pytest.mark.docker


@pytest.fixture
def term(docker_engine):
    s = TerminalSandbox(
        TerminalConfig(
            docker=DockerConfig(memory="256m", pids_limit=64, output_cap=1 << 20, step_timeout=20)
        )
    )
    s.reset(TaskSpec("t"))
    yield s
    s.close()


def state(obs):
    return json.loads(obs.state_json)


def test_shell_state_persists_across_turns(term):
    term.step(keystrokes("cd /tmp && mkdir -p w && cd w\n"))
    term.step(keystrokes("export GREETING=hello\n"))
    term.step(keystrokes("echo data > file.txt\n"))
    o = term.step(keystrokes("pwd; echo $GREETING; cat file.txt\n"))
    assert "/tmp/w\nhello\ndata\n" in o.text
    assert o.text.endswith("user@sandbox:/tmp/w$ ")
    assert state(o)["prompt_returned"]


def test_background_jobs_persist(term):
    term.step(keystrokes("sleep 300 &\n"))
    o = term.step(keystrokes("jobs\n"))
    assert "sleep 300" in o.text


def test_a_wait_that_ends_mid_stream_is_a_cut_of_ours_and_a_quiet_one_is_not(term):
    """Found: `seq 1 3000000` with the default 1 s wait stopped at line ~43,000, where our
    clock did, and was a full loss target (248,064 tokens) like any answer. The stream
    here prints a line every 50 ms: `seq` itself reaches the output cap within the second
    on a quiet machine (then the cut is `truncated`, below) and not on a loaded one."""
    o = term.step(keystrokes("while :; do echo tick; sleep 0.05; done\n", duration=1.0))
    assert state(o) == {**state(o), "prompt_returned": False, "still_printing": True}
    assert turn_fault(None, o.truncated, o.state_json) == "still_printing"
    term.step(keystrokes("C-c", duration=5))
    # a flood that cannot end: cut at the cap (or by the clock if slower), never an answer
    o = term.step(keystrokes("yes 1234567\n", duration=1.0))
    assert turn_fault(None, o.truncated, o.state_json) in ("truncated", "still_printing")
    term.step(keystrokes("C-c", duration=5))
    # the flood's last lines may still come after its prompt on a loaded machine (late
    # output, the next turn's: CI at load 16 saw them in the `sleep` step): a step that
    # ends at its own prompt takes them first
    synced = term.step(keystrokes("echo synced\n", duration=10))
    assert state(synced)["prompt_returned"] and "synced\n" in synced.text
    # waiting on a sleep, or at a REPL's prompt, the screen was quiet when the wait ended
    for keys, wait in (("sleep 300\n", 0.5), ("C-c", 5), ("python3 -q\n", 1.5)):
        o = term.step(keystrokes(keys, duration=wait))
        assert "still_printing" not in state(o), (keys, o.text)
    assert o.text.endswith(">>> ") and turn_fault(None, o.truncated, o.state_json) is None


def test_ctrl_c_interrupts_sleep(term):
    o = term.step(keystrokes("sleep 300\n", duration=0.5))
    assert not state(o)["prompt_returned"]  # still sleeping
    o = term.step(keystrokes("C-c", duration=5))
    assert state(o)["prompt_returned"] and "^C" in o.text
    o = term.step(keystrokes("echo alive\n"))
    assert "alive\n" in o.text


def test_huge_output_is_capped_and_flagged(term):
    o = term.step(keystrokes("head -c 100000000 /dev/zero | tr '\\0' a\n", duration=20))
    assert o.truncated
    assert len(o.text) < (1 << 20) + 1024
    assert "[output truncated]" in o.text
    o = term.step(keystrokes("echo next\n"))
    assert "next\n" in o.text and not o.truncated


def test_initial_state_records_os_tools_cwd_prompt(term):
    d = term.describe()
    assert "Debian" in d["initial_state"] and "python3" in d["initial_state"]
    assert (
        "Working directory: /root" in d["initial_state"] and "user@sandbox:~$" in d["initial_state"]
    )
    assert d["config"]["network"] == "none" and d["action_space"][0]["name"] == "keystrokes"


@pytest.fixture
def swe(docker_engine, repo):
    s = SWESandbox(
        SWEConfig(
            docker=DockerConfig(pids_limit=64, step_timeout=3, output_cap=1 << 20), repo=str(repo)
        )
    )
    s.reset(TaskSpec("fix"))
    yield s
    s.close()


def test_swe_tools(swe, repo):
    o = swe.step(tool("read", path="pkg/calc.py"))
    assert o.text == "     1\tdef add(a, b):\n     2\t    return a - b"
    o = swe.step(tool("edit", path="pkg/calc.py", old="a - b", new="a + b"))
    assert "-    return a - b\n+    return a + b" in o.text and not o.is_error
    o = swe.step(tool("bash", command="python3 -c 'from pkg.calc import add; print(add(2, 3))'"))
    assert (o.text, o.exit_code) == ("5\n", 0)
    o = swe.step(tool("bash", command="exit 3"))
    assert o.exit_code == 3 and o.is_error
    o = swe.step(tool("edit", path="pkg/calc.py", old="nope", new="x"))
    assert o.is_error and "exactly once" in o.text
    o = swe.step(tool("delete", path="x"))
    assert o.is_error and "unknown tool" in o.text
    # a call that does not fit the tool's schema gets the tool's usage error, never our
    # Python exception text
    o = swe.step(tool("read", file="pkg/calc.py"))
    assert o.is_error and o.text == (
        "error: read: 'path' is a required property; "
        "Additional properties are not allowed ('file' was unexpected)"
    )
    assert (
        repo / "pkg" / "calc.py"
    ).read_text() == "def add(a, b):\n    return a - b\n"  # host copy untouched


def test_hanging_step_times_out(swe):
    o = swe.step(tool("bash", command="sleep 100"))
    assert o.exit_code == 137 and json.loads(o.state_json)["timed_out"]
    assert "[timed out after 3s]" in o.text


def test_huge_output_capped_in_one_shot(swe):
    o = swe.step(tool("bash", command="head -c 100000000 /dev/zero | tr '\\0' a"))
    assert o.truncated and len(o.text) == 1 << 20


def test_no_network(swe):
    o = swe.step(tool("bash", command="ls /sys/class/net"))
    assert o.text.split() == ["lo"]
    # TEST-NET-1 is never routed; with no interface the kernel refuses before sending anything
    o = swe.step(tool("bash", command="curl -sS -m 2 http://192.0.2.1/ ; echo rc=$?"))
    assert "rc=7" in o.text or "unreachable" in o.text.lower()
    o = swe.step(tool("bash", command="ping -c 1 -W 1 192.0.2.1; echo rc=$?"))
    assert "rc=0" not in o.text


def _pids_cgroup(docker_engine, cid: str) -> Path:
    """The host directory of a container's pids cgroup (v1 or v2)."""
    pid = docker_engine.api.inspect_container(cid)["State"]["Pid"]
    for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        if "pids" in controllers.split(","):
            return Path("/sys/fs/cgroup/pids") / path.lstrip("/")
        if controllers == "":
            unified = Path("/sys/fs/cgroup") / path.lstrip("/")
    return unified


def test_fork_bomb_contained_by_pids_limit(swe, docker_engine):
    """Containment, not timing: the bomb fills the container's pids cgroup up to the limit
    and no further (forks are refused there), then the sandbox and the host work on."""
    cid = swe.container.id
    assert docker_engine.api.inspect_container(cid)["HostConfig"]["PidsLimit"] == 64
    cgroup = _pids_cgroup(docker_engine, cid)
    assert (cgroup / "pids.max").read_text().strip() == "64"
    done, answers, peak = threading.Event(), [], 0

    def bomb() -> None:  # the shell forks once, first, then loops on builtins until the
        # step timeout kills its process group, the bomb's processes with it
        cmd = "(bomb() { bomb | bomb & }; bomb) & while :; do :; done"
        answers.append(swe.step(tool("bash", command=cmd)))
        done.set()

    threading.Thread(target=bomb, daemon=True).start()
    while not done.wait(0.02):  # sample the process count while the bomb runs
        peak = max(peak, int((cgroup / "pids.current").read_text()))
    refused = int((cgroup / "pids.events").read_text().split()[1])  # "max N": forks refused
    assert refused > 0 and peak <= 64
    [o] = answers  # the environment's answer, killed by the step timeout: not our failure
    assert o.exit_code == 137 and json.loads(o.state_json)["timed_out"]
    wait_until(lambda: int((cgroup / "pids.current").read_text()) < 8, 30)
    assert swe.step(tool("bash", command="echo alive")).text == "alive\n"
    assert subprocess.run(["true"]).returncode == 0  # the host still forks
    swe.close()
    assert not docker_engine.containers.list(all=True, filters={"id": cid})


def test_rm_rf_root_leaves_host_alone(swe, repo, tmp_path):
    marker = tmp_path / "host-file.txt"
    marker.write_text("still here")
    swe.step(tool("bash", command="rm -rf --no-preserve-root / 2>/dev/null; true"))
    assert marker.read_text() == "still here"
    assert (repo / "pkg" / "calc.py").exists()
    assert subprocess.run(["ls", "/usr/bin"], capture_output=True).returncode == 0


def test_limits_and_label_applied(term, docker_engine):
    info = docker_engine.api.inspect_container(term.container.id)
    hc = info["HostConfig"]
    assert hc["NetworkMode"] == "none"
    assert hc["Memory"] == 256 * 1024 * 1024 and hc["PidsLimit"] == 64 and hc["NanoCpus"] == 10**9
    assert info["Config"]["Labels"][LABEL] == "1"


def test_read_only_root(docker_engine):
    t = TerminalSandbox(TerminalConfig(docker=DockerConfig(read_only=True)))
    t.reset(TaskSpec("ro"))
    try:
        o = t.step(keystrokes("touch /etc/x; echo rc=$?\n"))
        assert "Read-only file system" in o.text and "rc=1" in o.text
        o = t.step(keystrokes("touch /tmp/x && echo ok\n"))
        assert "ok\n" in o.text
    finally:
        t.close()


def test_live_sandbox_refuses_pickling(term):
    import pickle

    with pytest.raises(TypeError, match="live sandbox"):
        pickle.dumps(term)


def test_teardown_removes_container(docker_engine):
    s = TerminalSandbox()
    s.reset(TaskSpec("x"))
    cid = s.container.id
    s.close()
    assert not docker_engine.containers.list(all=True, filters={"id": cid})


def test_swe_mounted_repository_is_read_only(docker_engine, repo):
    s = SWESandbox(SWEConfig(docker=DockerConfig(step_timeout=5), repo=str(repo), mount=True))
    s.reset(TaskSpec("ro"))
    try:
        assert "return a - b" in s.step(tool("read", path="pkg/calc.py")).text
        o = s.step(tool("bash", command="touch /repo/new.txt"))
        assert o.exit_code != 0 and "Read-only file system" in o.text
        assert s.describe()["config"]["mount"] is True
    finally:
        s.close()
    assert not (repo / "new.txt").exists()


def test_swe_edit_on_read_only_mount_is_an_observation(docker_engine, repo):
    """The file system's answer (EROFS), in the tool's words; the attempt goes on."""
    s = SWESandbox(SWEConfig(docker=DockerConfig(step_timeout=5), repo=str(repo), mount=True))
    s.reset(TaskSpec("ro"))
    try:
        o = s.step(tool("edit", path="pkg/calc.py", old="a - b", new="a + b"))
        assert o.is_error and o.text == "error: cannot write pkg/calc.py: Read-only file system"
        o = s.step(tool("edit", path="pkg/new.py", content="x = 1\n"))
        assert o.text == "error: cannot write pkg/new.py: Read-only file system"
        assert "return a - b" in s.step(tool("read", path="pkg/calc.py")).text
    finally:
        s.close()
    assert (repo / "pkg" / "calc.py").read_text() == "def add(a, b):\n    return a - b\n"


def test_swe_edit_large_files(docker_engine, repo):
    """A file over the output cap is edited whole; one over the edit limit is refused in
    those words; a missing file is said to be missing."""
    lines = [f"value_{i} = {i}\n" for i in range(120_000)]  # about 1.9 MiB
    (repo / "big.py").write_text("".join(lines))
    s = SWESandbox(SWEConfig(docker=DockerConfig(step_timeout=20), repo=str(repo)))
    s.reset(TaskSpec("big"))
    try:
        o = s.step(tool("edit", path="big.py", old="value_99999 = 99999\n", new="changed = 1\n"))
        assert not o.is_error and "-value_99999 = 99999\n+changed = 1" in o.text
        o = s.step(tool("bash", command="wc -c < big.py; grep -c value_ big.py; tail -n 1 big.py"))
        size = len("".join(lines)) - len("value_99999 = 99999\n") + len("changed = 1\n")
        assert o.text == f"{size}\n119999\nvalue_119999 = 119999\n"
        o = s.step(tool("read", path="big.py"))
        assert o.truncated and o.text.startswith("     1\tvalue_0 = 0\n")
        s.step(tool("bash", command="truncate -s 17M huge.txt"))
        o = s.step(tool("edit", path="huge.txt", old="x", new="y"))
        assert o.is_error and o.text == "error: huge.txt is too large to edit (over 16 MiB)"
        o = s.step(tool("edit", path="nope.py", old="x", new="y"))
        assert o.is_error and o.text == "error: nope.py does not exist"
        o = s.step(tool("edit", path="pkg", old="x", new="y"))
        assert o.text == "error: cannot read pkg: Is a directory"
    finally:
        s.close()
