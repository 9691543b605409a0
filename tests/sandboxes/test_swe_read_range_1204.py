"""Found (a collection session, 2026-12-04 evening): `read(path, start=100, end=2)` and a
start past the file's last line answered an empty observation, as if the lines were
blank; the tool now answers the error a range check gives. Real containers."""

from __future__ import annotations

import pytest
from worldtrace.collectors.actions import tool

from .test_swe_exec_failures import swe  # noqa: F401  (the fixture)

pytestmark = pytest.mark.docker


def test_a_read_of_a_range_that_holds_no_line_is_an_error(swe):  # noqa: F811
    swe.step(tool("bash", command="printf 'a\\nb\\nc\\n' > three.txt"))
    o = swe.step(tool("read", path="three.txt", start=3, end=2))
    assert (o.text, o.is_error, o.exit_code) == ("error: start 3 is after end 2", True, 1)
    o = swe.step(tool("read", path="three.txt", start=4))
    assert o.is_error and o.text == "error: start 4 is past the last line of three.txt (3)"
    o = swe.step(tool("read", path="three.txt", start=2, end=9))  # an end past it: to the last
    assert (o.text, o.is_error) == ("     2\tb\n     3\tc", False)
    swe.step(tool("bash", command=": > empty.txt"))
    assert swe.step(tool("read", path="empty.txt")).text == ""  # an empty file: nothing


def test_an_integral_float_line_number_is_the_integer(swe):  # noqa: F811
    """A model's `start: 2.0` passed the JSON Schema (an integer) and sliced a list with a
    float: the attempt failed with our TypeError (web's `tab_focus` alike, hunt 12-06s)."""
    swe.step(tool("bash", command="printf 'a\\nb\\nc\\n' > three.txt"))
    o = swe.step(tool("read", path="three.txt", start=2.0, end=3.0))
    assert (o.text, o.is_error) == ("     2\tb\n     3\tc", False)
    o = swe.step(tool("read", path="three.txt", start=1.5))
    assert o.is_error and "1.5 is not of type 'integer'" in o.text
