"""Found (hunt 1205c): the SWE `bash` tool recorded a command's output and errors in
whatever order docker delivered them. Docker reads an exec's stdout and stderr on two
pipes and keeps no order between them: eight runs of `echo out; echo err >&2` came back
`err\\nout` three times, and a shell's `Killed` came after the `echo rc=$?` that followed
it. The truth is the shell's own order, what `sh -c '...' 2>&1` prints: the command now
writes both to one pipe after the session line. Real containers."""

from __future__ import annotations

import pytest

from .test_swe_text_1205 import bash, recorded  # noqa: F401  (a fixture)

pytestmark = pytest.mark.docker

INTERLEAVED = "i=0; while [ $i -lt 40 ]; do i=$((i+1)); echo o$i; echo e$i >&2; done"
EXPECTED = "".join(f"o{i}\ne{i}\n" for i in range(1, 41))


def test_bash_output_and_errors_in_the_order_written(recorded):  # noqa: F811
    """Before: 40 alternating lines of stdout and stderr came back regrouped by stream
    in some runs and mixed in others; each of three runs must be the shell's order."""
    assert recorded([bash(INTERLEAVED)] * 3) == [EXPECTED] * 3


def test_errors_only_and_exit_code_still_kept(recorded):  # noqa: F811
    """What goes to stderr alone is still the observation (nothing of the session line
    shows), and the exit code is the command's."""
    texts = recorded([bash("ls /nonexistent; echo rc=$?"), bash("cat tail.txt >&2")])
    assert texts[0].startswith("ls: ") and "No such file or directory" in texts[0]
    assert texts[0].endswith("\nrc=2\n")
    assert texts[1] == "x\ny\nz"
