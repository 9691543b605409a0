"""Found (user hunt 1204d): the report is the page a user reads later, away from the
terminal, and it did not say what state the store was in. Of a store imported but never
processed, every plot of the processed data said "no data yet" and "Turns to look at"
said "no processed turns yet" (its `stats` tables said `not processed yet: run
`worldtrace process``); an empty store's page named no command; and a report of
processed data older than the raw data (a new import since) read as current: the hint
went to stderr only.

Stores are made as a user makes them: OpenAI chat JSONL through `worldtrace import`, the
real pipeline, the real `worldtrace report` command."""

from __future__ import annotations

import html
import json
import re

from worldtrace.pipelines.process import ProcessConfig, run
from worldtrace.schemas import Store

from worldtrace.report_charts import PLOTS, RAW_PLOTS
from worldtrace.summary import UNPROCESSED

from .test_query import run_cli


def chats(path, first: int, n: int, tail: str = ""):
    """`n` OpenAI chat records with three answered tool calls each; `tail` makes them
    near-duplicates of the records without it."""
    lines = []
    for i in range(first, first + n):
        messages = [{"role": "user", "content": f"task {i}"}]
        for k in range(3):
            call = {"id": f"c{k}", "type": "function",
                    "function": {"name": "bash", "arguments": json.dumps({"command": f"ls {i} {k}"})}}  # fmt: skip
            messages += [
                {"role": "assistant", "content": "", "tool_calls": [call]},
                {"role": "tool", "tool_call_id": f"c{k}",
                 "content": " ".join(f"file{i}_{k}_{j}" for j in range(25)) + tail},
            ]  # fmt: skip
        lines.append(json.dumps({"id": f"r{i}{tail.strip()}", "messages": messages}) + "\n")
    path.write_text("".join(lines))
    return path


def imported(tmp_path, n: int = 12) -> Store:
    store = Store.at(tmp_path / "store")
    r = run_cli(store, "import", "--create", str(chats(tmp_path / "a.jsonl", 0, n)))
    assert r.exit_code == 0, r.output
    return store


def report(store: Store, tmp_path) -> str:
    out = tmp_path / "report.html"
    r = run_cli(store, "report", "-o", str(out))
    assert r.exit_code == 0, r.output
    return out.read_text()


def plot_messages(page: str) -> dict[str, list[str]]:
    """Per plot, the texts of its annotations (plotly's JSON in the page)."""
    out = {}
    for name in PLOTS:
        start = page.index(f'data-plot="{name}"')
        figure = page[start : page.index("</figure>", start)]
        out[name] = [
            json.loads(f'"{t}"') for t in re.findall(r'"text":"((?:[^"\\]|\\.)*)"', figure)
        ]
    return out


def test_a_store_never_processed_says_on_the_page_to_run_process(tmp_path):
    page = report(imported(tmp_path), tmp_path)
    messages = plot_messages(page)
    for name in set(PLOTS) - RAW_PLOTS:  # the plots of the processed data
        assert UNPROCESSED in messages[name], (name, messages[name])
    for name in RAW_PLOTS:  # the raw data is there: drawn
        assert "no data yet" not in " ".join(messages[name]), (name, messages[name])
    # imported chats carry no start time: the plot says so, not "no data yet"
    assert "no trajectory to draw: 12 have no start time" in messages["throughput"]
    assert "no data yet" not in page
    assert f"no processed turns yet: {html.escape(UNPROCESSED)}" in page
    assert "run `worldtrace process`" in html.unescape(page.split("<h2>Plots</h2>")[0])


def test_an_empty_store_names_what_brings_data_in(tmp_path):
    store = Store.at(tmp_path / "empty")
    store.root.mkdir()
    page = html.unescape(report(store, tmp_path))
    head = page.split("<h2>Plots</h2>")[0]
    assert "`worldtrace import PATH`" in head and "`worldtrace collect JOB_FILE`" in head
    for name, texts in plot_messages(page).items():
        assert any("worldtrace import PATH" in t for t in texts), (name, texts)


def test_a_report_of_processed_data_older_than_the_raw_data_says_so(tmp_path):
    store = imported(tmp_path)
    run(ProcessConfig(inputs=[str(store.raw)], output=str(store.processed), workers=1))
    assert "leaves out" not in report(store, tmp_path)
    r = run_cli(store, "import", str(chats(tmp_path / "b.jsonl", 100, 4)))
    assert r.exit_code == 0, r.output
    head = html.unescape(report(store, tmp_path).split("<h2>Plots</h2>")[0])
    assert "the processed data leaves out 1 raw shard(s) written or added since" in head
    assert "run `worldtrace process` to include them" in head


def test_control_and_bidi_characters_of_the_data_are_shown_as_escapes(tmp_path):
    """Found: an observation holding U+202E (right-to-left override) or an ANSI escape
    was put in the page as it was: the override showed the rest of its cell reversed
    (`<td>ls  evil.sh</td>` read `hs.live`), where `explain` and `query` write `\\u202e`."""
    src = chats(tmp_path / "a.jsonl", 0, 12)
    records = [json.loads(line) for line in src.read_text().splitlines()]
    for r in records:  # every turn: whichever are shown under "Turns to look at"
        for m in r["messages"]:
            if m["role"] == "tool":
                m["content"] = "ok \u202eevil.sh \x1b[31mred\x1b[0m <b>&amp;</b> " + m["content"]
    src.write_text("".join(json.dumps(r) + "\n" for r in records))
    store = Store.at(tmp_path / "store")
    assert run_cli(store, "import", "--create", str(src)).exit_code == 0
    run(ProcessConfig(inputs=[str(store.raw)], output=str(store.processed), workers=1))
    page = report(store, tmp_path)
    body = page[page.index("<h2>Turns to look at</h2>") :]
    assert "evil.sh" in body  # the excerpts are shown
    assert "\u202e" not in body and "\x1b" not in body
    assert "ok \\u202eevil.sh \\x1b[31mred\\x1b[0m &lt;b&gt;&amp;amp;&lt;/b&gt;" in body
