"""Found (12-07, a CI flake of `test_a_nearly_full_disk_leaves_the_free_bytes_asked_for`):
an SWE step's `ls -A` came back empty, exit 0, and was recorded as the environment's
answer. The exec's whole stream was lost: nothing on stdout, not even the session
line every command of ours prints first on stderr, the status intact. A loop of 1,500
`ls -A /` execs through our wrapper beside two busy loops lost it 2 times on busybox and
2 on Debian (and once the session line alone, the output kept). Without the line a
status other than our wrapper's 127 was taken as the command's, with whatever output
came: none. Now a command with no line and no output is our failure (SandboxError: the
attempt fails and is retried); with output, it stays the command's; callers that read
no output, or check it themselves (an end mark, a probe run again), are `checked`.

Its cause, docker's client reading past its HTTP buffer, is fixed since
(test_exec_buffer_1207.py); a loss cannot be caused at will: what the exec saw is handed
to the function that judges it, with a real container to look at."""

from __future__ import annotations

import pytest
from worldtrace.sandboxes.base import SandboxError
from worldtrace.sandboxes.execs import _no_session_line, exec_capture

from .test_swe_exec_failures import swe  # noqa: F401  (the fixture)


@pytest.mark.parametrize(("cmd", "code"), [(["ls", "-A"], 0), (["false"], 1)])
def test_nothing_at_all_is_our_failure_not_an_empty_answer(swe, cmd, code):  # noqa: F811
    with pytest.raises(SandboxError) as e:
        _no_session_line(swe.container, cmd, code, b"")
    assert str(e.value) == (
        f"the output of {' '.join(cmd)!r} was lost (exit {code}): nothing came, not even "
        "the line every command of ours prints first"
    )


def test_output_without_its_line_is_the_commands(swe):  # noqa: F811
    _no_session_line(swe.container, ["ls", "-A"], 0, b"README.md\npkg\n")
    _no_session_line(swe.container, ["sh"], 1, b"0\n")  # `grep -c` (12-04): no error


def test_a_caller_that_reads_no_output_keeps_the_status(swe):  # noqa: F811
    _no_session_line(swe.container, ["sh", "-c", ":"], 0, b"", checked=True)
    with pytest.raises(SandboxError, match=r"could not start the command 'sh' \(exit 127\)"):
        _no_session_line(swe.container, ["sh"], 127, b"", checked=True)  # ours, checked or not


def test_a_command_that_prints_nothing_is_still_its_own(swe):  # noqa: F811
    """The session line tells a quiet command from a lost one: `true` is no failure."""
    assert exec_capture(swe.container, ["true"], 10, 1024)[:2] == (0, "")
    assert exec_capture(swe.container, ["false"], 10, 1024)[:2] == (1, "")
