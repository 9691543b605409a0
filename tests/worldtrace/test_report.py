"""`worldtrace report`: plotly figures over real processed stores, opened in real Chromium.

Two stores with different data: A is the pipeline's output over a generated corpus with
near duplicates; B holds a subset of A's processed tables (two domains, fewer
categories) and raw trajectories recorded on Jan 1, Jan 11 and Dec 1 (an 11-month gap).
One browser serves every Chromium test.
"""

from __future__ import annotations

import dataclasses
import html
import re
import subprocess
from datetime import timedelta

import duckdb
import pytest
from worldtrace.collectors.synthetic import SyntheticConfig, generate, near_duplicate_corpus
from worldtrace.pipelines.process import ProcessConfig, run
from worldtrace.schemas import ShardWriter, Store
from worldtrace.schemas import fields as F
from worldtrace.schemas.store import shard_files
from worldtrace.schemas.views import connect

from worldtrace.report import TABLES, build
from worldtrace.report_charts import CATEGORY_COLORS, DOMAIN_COLORS, PLOTS
from worldtrace.summary import STATS_SECTIONS

CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]  # fmt: skip
B_DOMAINS = ("terminal", "web")
B_DAYS = (0, 10, 334)  # Thu Jan 1, Sun Jan 11, Tue Dec 1 2026: three weeks


@pytest.fixture(scope="module")
def store_a(tmp_path_factory):
    store = Store.at(tmp_path_factory.mktemp("a") / "store")
    data, _ = near_duplicate_corpus(150, 10, 3, seed=4, exact_copies=3)
    with ShardWriter(store.raw / "s") as w:
        w.write(data)
    run(ProcessConfig(inputs=[str(store.raw)], output=str(store.processed), workers=1))
    return store


@pytest.fixture(scope="module")
def store_b(store_a, tmp_path_factory):
    """Other data: part of A's processed tables, and raw records at three dates."""
    store = Store.at(tmp_path_factory.mktemp("b") / "store")
    domains = ", ".join(f"'{d}'" for d in B_DOMAINS)
    for table in F.PROCESSED_TABLES:
        files = [str(f) for f in shard_files(store_a.table(table))]
        out = store.table(table)
        out.mkdir(parents=True)
        keep = f"WHERE domain IN ({domains})" if table != "rejects" else ""
        duckdb.sql(
            f"COPY (SELECT * FROM read_parquet({files}) {keep}) TO '{out / 'part-0.parquet'}'"
        )
    raw = []
    for i, t in enumerate(generate(SyntheticConfig(n=30, seed=9, domains=B_DOMAINS))):
        shift = timedelta(days=B_DAYS[i % 3])
        raw.append(dataclasses.replace(t, started_at=t.started_at + shift).with_id())
    with ShardWriter(store.raw / "s") as w:
        w.write(raw)
    return store


@pytest.fixture(scope="module")
def figures(store_a, store_b):
    return {
        key: {name: make(connect(s)) for name, (_, make) in PLOTS.items()}
        for key, s in (("a", store_a), ("b", store_b))
    }


def _axes(fig) -> dict[str, str]:
    layout = fig.to_plotly_json()["layout"]
    return {
        k: (v.get("title") or {}).get("text", "")
        for k, v in layout.items()
        if re.fullmatch(r"[xy]axis\d*", k)
    }


def test_every_axis_of_every_plot_has_a_title_with_its_unit(figures):
    for key in figures:
        for name, fig in figures[key].items():
            axes = _axes(fig)
            assert any(k.startswith("x") for k in axes) and any(k.startswith("y") for k in axes)
            assert all(axes.values()), (key, name, axes)
    assert _axes(figures["a"]["throughput"])["yaxis"] == "trajectories per 10 minutes"
    assert "log scale" in _axes(figures["a"]["r"])["xaxis"]
    assert "(%)" in _axes(figures["a"]["categories"])["xaxis"]


def test_distributions_are_drawn_per_domain(figures, store_a):
    present = [d for d in F.DOMAINS if d in {"mcp", "swe", "terminal", "web"}]
    for name in ("nov", "ol", "r", "obs_len"):
        fig = figures["a"][name]
        facets = [a.text for a in fig.layout.annotations]
        assert facets == present, name
        # each domain's bars sit on that domain's own axes, none pooled
        axes_of = {
            d: {t.xaxis for t in fig.data if t.hovertemplate.startswith(d + ",")} for d in present
        }
        assert all(len(a) == 1 for a in axes_of.values()), axes_of
        assert len({a.pop() for a in axes_of.values()}) == len(present)
    con = connect(store_a)
    mcp_nov = sum(sum(t.y) for t in figures["a"]["nov"].data if t.hovertemplate.startswith("mcp,"))
    assert mcp_nov == con.execute("SELECT count(*) FROM turns WHERE domain = 'mcp'").fetchone()[0]


def _colors(fig) -> dict[str, str]:
    return {t.name: t.marker.color for t in fig.data}


def test_category_and_domain_colours_are_the_same_in_every_report(figures):
    a, b = figures["a"], figures["b"]
    assert set(_colors(b["nov"])) < set(_colors(a["nov"]))  # B lacks categories A has
    for name in ("categories", "nov", "ol", "r"):
        for key in (a, b):
            assert all(CATEGORY_COLORS[c] == col for c, col in _colors(key[name]).items()), name
    for name in ("obs_len", "clusters", "throughput"):
        for key in (a, b):
            assert all(DOMAIN_COLORS[d] == col for d, col in _colors(key[name]).items()), name
    assert len(set(CATEGORY_COLORS.values())) == len(F.CATEGORIES)


def test_time_axis_places_bars_at_their_dates(figures):
    fig = figures["b"]["throughput"]
    assert fig.layout.xaxis.type == "date"
    starts = sorted({c for t in fig.data for c in t.customdata})
    assert [s[:10] for s in starts] == ["2025-12-29", "2026-01-05", "2026-11-30"]  # Mondays
    assert fig.layout.yaxis.title.text == "trajectories per week"


def test_an_empty_store_reports_no_data_in_every_plot(tmp_path):
    page = build(connect(Store.at(tmp_path / "empty")))
    for name in PLOTS:
        assert f'data-plot="{name}"' in page
    assert page.count("no data yet") >= len(PLOTS)
    assert "no processed turns yet" in page


def test_an_empty_table_says_in_the_report_what_stats_says(tmp_path):
    """The report repeats `stats` tables; an empty one reads the same in both (it said
    'no data yet' where `stats` said 'none recorded')."""
    page = build(connect(Store.at(tmp_path / "empty")))
    sections = {s.title: s for s in STATS_SECTIONS}
    for title in TABLES:
        empty = sections[title].empty
        assert f"<h3>{html.escape(title)}</h3><p class=empty>{html.escape(empty)}</p>" in page
    assert "none recorded (no turn perturbation, no episode condition)" in page
    assert "none: no secret was replaced" in page


# -- in Chromium --------------------------------------------------------------------------
@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
        yield b
        b.close()


PAGE_FACTS = """() => [...document.querySelectorAll('figure.plot')].map(fig => {
  const gd = fig.querySelector('.js-plotly-plot');
  const titles = kind => [...gd.querySelectorAll(`text[class^="${kind}"][class$="title"]`)]
      .map(t => t.textContent.trim());
  const box = gd.querySelector('.main-svg').getBoundingClientRect();
  return {
    name: fig.dataset.plot,
    width: box.width, height: box.height,
    axes: Object.keys(gd.layout).filter(k => /^[xy]axis\\d*$/.test(k)).length,
    xtitles: titles('x'), ytitles: titles('y'),
    bars: [...gd.querySelectorAll('.bars .point path')].filter(p => p.getBBox().height > 0).length,
    legend: Object.fromEntries([...gd.querySelectorAll('.legend .traces')].map(t =>
        [t.querySelector('.legendtext').textContent, t.querySelector('.legendpoints path').style.fill])),
  };
})"""


def _hex(rgb: str) -> str:
    return "#" + "".join(f"{int(v):02x}" for v in re.findall(r"\d+", rgb))


def _open(browser, path):
    page = browser.new_page(viewport={"width": 1300, "height": 900})
    errors, requests = [], []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("request", lambda r: requests.append(r.url))
    page.goto(path.as_uri())
    page.wait_for_function(
        f"document.querySelectorAll('.js-plotly-plot .main-svg').length >= {len(PLOTS)}"
    )
    return page, errors, requests


@pytest.mark.browser
def test_report_in_chromium(store_a, store_b, wt_env, browser, tmp_path):
    facts, legends = {}, {}
    for key, store in (("a", store_a), ("b", store_b)):
        out = tmp_path / f"report-{key}.html"
        r = subprocess.run(
            ["worldtrace", "report", "--store", str(store.root), "-o", str(out)],
            capture_output=True, text=True, env=wt_env,
        )  # fmt: skip
        assert r.returncode == 0, r.stderr
        assert out.stat().st_size < 6_000_000  # plotly.js (4.8 MB) once, the data small
        page, errors, requests = _open(browser, out)
        facts[key] = page.evaluate(PAGE_FACTS)
        assert [f["name"] for f in facts[key]] == list(PLOTS)
        for f in facts[key]:
            assert f["width"] > 300 and f["height"] > 200, f
            assert f["bars"] > 0, f"{key}: plot {f['name']} drew nothing"
            # every axis shows its title (facets: one x and one y title per domain)
            assert len(f["xtitles"]) + len(f["ytitles"]) == f["axes"], f
            assert all(f["xtitles"]) and all(f["ytitles"]), f
            legends.setdefault(f["name"], []).append(f["legend"])
        assert not errors, errors
        assert requests == [out.as_uri()], requests  # nothing fetched: one file, offline
        if key == "a":
            box = page.locator("#plot-nov .bars .point path").first.bounding_box()
            page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
            page.wait_for_selector("#plot-nov .hovertext")
            assert re.search(r"\d+ turns", page.locator("#plot-nov .hovertext").text_content())
            cmd = page.locator("code.cmd").first.inner_text()
            shot = tmp_path / "report-a.png"
            page.screenshot(path=str(shot), full_page=True)
            print(f"\nscreenshot: {shot}")
        else:
            gap = _bar_centres(page, "#plot-throughput")
        page.close()
    # the same category, the same colour, in reports of different data
    for name in ("categories", "nov", "ol", "r"):
        la, lb = legends[name]
        assert lb and set(lb) < set(la), name
        assert all(_hex(lb[c]) == _hex(la[c]) == CATEGORY_COLORS[c] for c in lb), name
    # the weeks of Jan 1 and Jan 11 are neighbours; Dec 1 is 11 months to the right
    assert gap[1] - gap[0] < 0.05 * (gap[2] - gap[1]), gap
    # the copyable command explains that trajectory
    assert cmd.startswith("worldtrace explain ") and f"--store {store_a.root}" in cmd
    r = subprocess.run(cmd.split(), capture_output=True, text=True, env=wt_env)
    assert r.returncode == 0 and "rule: " in r.stdout, r.stdout + r.stderr


def _bar_centres(page, plot: str) -> list[float]:
    """x centres (px) of the distinct bar positions of a plot, left to right."""
    boxes = page.evaluate(
        f"""() => [...document.querySelectorAll('{plot} .bars .point path')]
              .map(p => p.getBoundingClientRect()).filter(b => b.height > 0)
              .map(b => Math.round(b.x + b.width / 2))"""
    )
    return sorted(set(boxes))


def test_report_help_has_an_example(wt_env):
    out = subprocess.run(
        ["worldtrace", "report", "--help"], capture_output=True, text=True, env=wt_env
    ).stdout
    example = out.split("Example:")[1]
    assert "worldtrace report" in example and "--store" in example
