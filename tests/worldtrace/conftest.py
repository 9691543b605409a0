"""Fixtures of the CLI tests: a real tmpfs (a full or read-only disk)."""

from __future__ import annotations

import os
import subprocess

import pytest

SUDO = [] if os.geteuid() == 0 else ["sudo", "-n"]
"""Mounting a tmpfs needs root; set-up has it (it installs Debian packages)."""


@pytest.fixture
def tmpfs(tmp_path):
    mnt = tmp_path / "tmpfs"
    mnt.mkdir()
    r = subprocess.run(
        [
            *SUDO,
            "mount",
            "-t",
            "tmpfs",
            "-o",
            f"size=20m,uid={os.getuid()},gid={os.getgid()}",
            "tmpfs",
            str(mnt),
        ],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, f"cannot mount a tmpfs (root or sudo, as set-up has): {r.stderr}"
    try:
        yield mnt
    finally:
        subprocess.run([*SUDO, "umount", "-l", str(mnt)], check=True)
