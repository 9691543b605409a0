"""A value on a bin edge is drawn in the bin it opens, as the rules compare it (`Nov >= 0.5`
is `action`, never drawn in [0.45, 0.5)), and the top of the range in the last bin."""

from __future__ import annotations

import duckdb
import pytest

from worldtrace.report_charts import PLOTS, histogram


def drawn(fig) -> dict[str, float]:
    """Hover range ('from to') -> turns, over every bar of the figure."""
    out: dict[str, float] = {}
    for trace in fig.data:
        for (a, b), n in zip(trace.customdata, trace.y, strict=True):
            out[f"{a} {b}"] = out.get(f"{a} {b}", 0) + n
    return out


def con_of(values: list[float], column: str) -> duckdb.DuckDBPyConnection:
    con = duckdb.connect()
    con.execute(f"CREATE TABLE turns (domain TEXT, category TEXT, {column} DOUBLE)")
    con.executemany("INSERT INTO turns VALUES ('web', 'action', ?)", [[v] for v in values])
    return con


@pytest.mark.parametrize("plot", ["nov", "ol"])
def test_values_on_edges_fall_in_the_bin_they_open(plot):
    fig = PLOTS[plot][1](con_of([0.5, 0.3, 0.15, 0.7, 0.0, 1.0, 0.95, 0.4999], plot))
    assert drawn(fig) == {
        "0.50 0.55": 1, "0.30 0.35": 1, "0.15 0.20": 1, "0.70 0.75": 1, "0.00 0.05": 1,
        "0.95 1.00": 2, "0.45 0.50": 1,
    }  # fmt: skip
    (bar,) = fig.data
    assert all(abs(x - round(x, 3)) < 1e-9 for x in bar.x)  # bars centred in their bins


def test_values_outside_the_range_go_to_its_end_bins():
    fig = histogram(
        con_of([-0.5, 2.5, 3.0, 1.0], "v"), value="v", source="turns", lo=0, hi=3, bins=3,
        x_title="v", title="v",
    )  # fmt: skip
    assert drawn(fig) == {"0.00 1.00": 1, "1.00 2.00": 1, "2.00 3.00": 2}
