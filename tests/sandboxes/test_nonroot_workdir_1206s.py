"""The working directory of an agent that is not root (left by the 12-06 notes, found when
tried): docker makes a workdir the image lacks as root (mode 755), a read-only root's
tmpfs there alike, and the image's /root is root's (mode 700). Under `docker.user: nobody`
or an image whose USER is nobody, the terminal's agent started in a home it could not
write (`touch x`: Permission denied; in /root not even `ls`), while the docs promised
"a tmpfs stays writable at /tmp and the workdir". Now the directory is the agent's; what
the image put in it keeps its owner. Real containers on the real engine."""

from __future__ import annotations

import pytest
from worldtrace.sandboxes.base import TaskSpec
from worldtrace.sandboxes.docker import DockerConfig
from worldtrace.sandboxes.terminal import TerminalConfig, TerminalSandbox

from .test_nonroot_conditions_1206r import agent, nobody_image, said  # noqa: F401

pytestmark = pytest.mark.docker


@pytest.mark.parametrize("read_only", [False, True], ids=["writable-root", "read-only-root"])
@pytest.mark.parametrize("workdir", ["/root", "/work"])
def test_a_non_root_agent_can_write_its_working_directory(
    docker_engine,
    agent,  # noqa: F811
    workdir,
    read_only,
):
    config = DockerConfig(step_timeout=20, warm=0, workdir=workdir, read_only=read_only, **agent)
    s = TerminalSandbox(TerminalConfig(docker=config, cols=200))
    try:
        s.reset(TaskSpec("t", setup=("echo from-setup > made-by-setup",)))
        run = lambda command: said(s, command)  # noqa: E731
        assert run("id -un; pwd; echo $HOME") == f"nobody {workdir} {workdir}"
        assert run("touch x && mkdir d && echo ok") == "ok"
        assert run("stat -c %U . x d made-by-setup") == "nobody nobody nobody nobody"
        if workdir == "/root" and not read_only:  # the image's files there stay root's
            assert run("stat -c %U .bashrc; cat .bashrc >/dev/null && echo readable") == (
                "root readable"
            )
    finally:
        s.close()


def test_a_root_agent_s_working_directory_is_left_as_the_image_has_it(docker_engine):
    s = TerminalSandbox(TerminalConfig(docker=DockerConfig(step_timeout=20, warm=0), cols=200))
    try:
        s.reset(TaskSpec("t"))
        assert said(s, "id -un; stat -c '%U %a' .") == "root root 700"
    finally:
        s.close()


def test_a_working_directory_the_agent_can_write_already_is_left_as_it_is(docker_engine):
    config = DockerConfig(step_timeout=20, warm=0, workdir="/tmp", user="nobody")
    s = TerminalSandbox(TerminalConfig(docker=config, cols=200))
    try:
        s.reset(TaskSpec("t"))
        assert said(s, "id -un; stat -c '%U %a' .") == "nobody root 1777"
    finally:
        s.close()
