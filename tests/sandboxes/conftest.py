"""Fixtures the sandbox tests share."""

from __future__ import annotations

import pytest
from worldtrace.sandboxes.android_sim import start


@pytest.fixture
def sim():
    """A device simulator on its own loopback port (stopped after the test)."""
    s = start()
    yield s
    s.stop()
