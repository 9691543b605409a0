"""Found (two hunters, 2026-12-07): worldtrace's AgentWorldBench export imported again
did not give the record back. The GUI observations came without `state_json`, so every
web and android line was filtered on `process` (`gui_env_failure:missing_state`); a
SWE-agent command lost its `name` (the `tool_name` column) and the trajectory its outcome
(`success` -> `unknown`, reward 0.0 -> null); a search record's repeated `fetch`
answered the same was cut by `retry_cycle` (the record came back as an import of a log
with no failure flag, which `filters.carries_flags` reads as a log that flags nothing).
The `worldtrace` key now also holds each turn's other fields (`turns`), the outcome and
a collector's record as one (`source_kind`). Real parts: Parquet stores, the real CLI
(in process, and `worldtrace import` in a subprocess), the real importer and filters."""

from __future__ import annotations

import dataclasses
import json
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner
from worldtrace.collectors.importers import ImportConfig, import_paths
from worldtrace.collectors.importers import agentworldbench as awb
from worldtrace.pipelines import writers
from worldtrace.pipelines.filters import FilterConfig, apply_filters
from worldtrace.schemas import (
    Action,
    Observation,
    Outcome,
    ShardWriter,
    Source,
    Store,
    Trajectory,
    Turn,
    read_records,
)
from worldtrace.schemas import fields as F
from worldtrace.schemas.actions import keystrokes, tool

from worldtrace.cli import cli


def run(root: Path, *args: str):
    r = CliRunner().invoke(cli, ["--store", str(root), *map(str, args)], obj={})
    assert r.exit_code == 0, (args, r.output)
    return r


def obs(text: str, **fields) -> Observation:
    return Observation(text, **fields)


def web_state(url: str, title: str, status: int = 200) -> str:
    tabs = [{"title": title, "url": url}]
    return json.dumps({"active_tab": 0, "status": status, "tabs": tabs}, sort_keys=True)


def android_state(package: str, activity: str) -> str:
    return json.dumps({"activity": activity, "package": package, "keyboard": False}, sort_keys=True)


def gui_turns(*steps: tuple[Action, str, str]) -> list[Turn]:
    """A web or Android sandbox's turns: (action, screen, state), each screen changed."""
    return [
        Turn(i, action, obs(text, state_json=state, changed=True))
        for i, (action, text, state) in enumerate(steps)
    ]


def records() -> list[Trajectory]:
    """One record per case the hunters met, as the collectors and importers write them."""
    web = gui_turns(
        (tool("goto", url="http://shop.test/"), "[1] link 'Books'\n[2] link 'Music'",
         web_state("http://shop.test/", "Shop")),
        (tool("click", bid="1"), "[3] heading 'Books'\n[4] link 'Dune'",
         web_state("http://shop.test/books", "Books")),
        (tool("click", bid="4"), "[5] heading 'Dune'\n[6] button 'Add to cart'",
         web_state("http://shop.test/books/dune", "Dune")),
    )  # fmt: skip
    android = gui_turns(
        (tool("tap", node=57), "[57] Calculator\n[58] Clock",
         android_state("com.android.launcher", ".Launcher")),
        (tool("tap", node=12), "[12] 7\n[13] 8\n[14] +\n[15] =",
         android_state("com.android.calculator2", ".Calculator")),
        (tool("press", key="back"), "[57] Calculator\n[58] Clock\n[59] Maps",
         android_state("com.android.launcher", ".Launcher")),
    )  # fmt: skip
    terminal = [
        Turn(
            0, keystrokes("ls\n"), obs("a.txt  b.txt\n$ ", state_json=json.dumps({"cwd": "/app"}))
        ),
        Turn(
            1,
            keystrokes("sleep 99\n", duration=2.0),
            obs("$ sleep 99\n", state_json=json.dumps({"timed_out": True})),
        ),
        Turn(2, keystrokes("cat big.log\n"), obs("line 1\nline 2\n[cut]", truncated=True)),
        Turn(3, Action("keystrokes", "echo $?\n"), obs("0\n$ ", exit_code=0)),  # no arguments
    ]
    mcp = [
        Turn(0, tool("read_query", query="select * from users"), obs("id|name\n1|ann\n2|bob")),
        Turn(
            1,
            tool("read_query", query="select * from nope"),
            obs("Error: no such table: nope", is_error=True),
        ),
        Turn(2, tool("list_tables"), obs("users\norders")),
        Turn(
            3,
            tool("read_query", query="select count(*) from orders"),
            obs("upstream error (injected)", is_error=True),
            perturbation=json.dumps({"kind": "error", "status": 502}),
        ),
        Turn(4, tool("describe_table", table_name="orders"), obs("id INTEGER\ntotal REAL")),
    ]
    swe = [  # SWE-agent's commands: the text the agent typed, its first word the name
        Turn(
            0,
            Action("command", "find_file stats.py", name="find_file"),
            obs('Found 1 matches for "stats.py":\n/repo/pkg/stats.py'),
        ),
        Turn(
            1,
            Action("command", "open pkg/stats.py", name="open"),
            obs("[File: /repo/pkg/stats.py (12 lines total)]\n1:def mean(xs):"),
        ),
        Turn(
            2,
            Action("command", "python -m pytest -q", name="python"),
            obs("1 failed in 0.1s", is_error=True, exit_code=1),
        ),
        Turn(
            3,
            Action("command", "edit 3:3\n    return sum(xs) / len(xs)\nend_of_edit", name="edit"),
            obs("File updated."),
        ),
        Turn(
            4,
            Action("command", "submit", name="submit"),
            obs("diff --git a/pkg/stats.py b/pkg/stats.py"),
        ),
    ]
    page = "Git - git-commit Documentation\ngit commit --amend replaces the tip of the branch."
    search = [  # the same page fetched twice, answered the same, no failure flagged
        Turn(
            0,
            tool("search", query="amend commit message"),
            obs("1. doc://git-commit.html\n2. doc://git-rebase.html"),
        ),
        Turn(1, tool("fetch", url="doc://git-commit.html"), obs(page)),
        Turn(2, tool("fetch", url="doc://git-commit.html"), obs(page)),
        Turn(3, tool("search", query="reword older commit"), obs("1. doc://git-rebase.html")),
    ]
    collector = Source(kind="collector", name="demo")
    cases = [
        ("web", web, Outcome("success", 1.0), collector),
        ("android", android, Outcome("failure", 0.0, "wrong result"), collector),
        ("terminal", terminal, Outcome("success"), collector),
        ("mcp", mcp, Outcome("incomplete"), collector),
        (
            "swe",
            swe,
            Outcome("success", 0.0),
            Source(kind="import", name="swe-agent", origin_format="swe-agent", origin_id="r1"),
        ),
        ("search", search, Outcome("incomplete"), collector),
    ]
    out = []
    for domain, turns, outcome, source in cases:
        t = Trajectory(
            domain=domain, turns=turns, outcome=outcome, source=dataclasses.replace(source)
        )
        t.task.instruction = f"Do the {domain} task."
        t.system.task_description = f"Do the {domain} task."
        out.append(t.with_id())
    return out


def processed_store(root: Path) -> Path:
    with ShardWriter(Store.at(root).raw / "collect") as w:
        w.write(records())
    run(root, "process")
    return root


def lines_of(directory: Path) -> list[dict]:
    return [
        json.loads(x) for f in sorted(directory.glob("*.jsonl")) for x in f.read_text().splitlines()
    ]


def query(root: Path, sql: str) -> list[dict]:
    return json.loads(run(root, "query", sql, "--format", "json").output)


def turn_fields(t: Turn) -> tuple:
    """What the round trip must give back of a processed turn: everything but timing."""
    return (t.index, t.action, t.observation, t.perturbation, t.category, t.keep, t.rule, t.stats)


def reimported(rec: Trajectory, tmp_path: Path) -> Trajectory:
    """`rec` as export writes its line (`writers.agentworldbench_lines`), imported again."""
    line = next(writers.agentworldbench_lines(rec.to_dict(), "", 0))
    src = tmp_path / f"{rec.domain}_test.jsonl"
    src.write_text(json.dumps(line) + "\n")
    report = import_paths([src], tmp_path / rec.domain, ImportConfig(workers=1))
    assert not report.problems, report.problems
    [t] = read_records(tmp_path / rec.domain)
    return t


def by_domain(domain: str) -> Trajectory:
    t = next(t for t in records() if t.domain == domain)
    for turn in t.turns:
        turn.keep = 1.0
    return t


@pytest.mark.parametrize("domain", ["web", "android"])
def test_a_gui_record_comes_back_with_its_state_and_is_not_filtered(tmp_path, domain):
    rec = by_domain(domain)
    t = reimported(rec, tmp_path)
    assert [x.observation for x in t.turns] == [x.observation for x in rec.turns]
    kept, removed, reason = apply_filters(json.loads(t.to_json()), FilterConfig())
    assert (reason, removed) == (None, [])  # before: gui_env_failure:missing_state
    assert len(kept[F.TURNS]) == len(rec.turns)


def test_a_swe_agent_record_comes_back_with_its_command_names_and_outcome(tmp_path):
    rec = by_domain("swe")
    t = reimported(rec, tmp_path)
    assert [x.action for x in t.turns] == [x.action for x in rec.turns]  # find_file, not None
    assert t.outcome == rec.outcome == Outcome("success", 0.0)  # not unknown, None


def test_a_collectors_repeated_fetch_answered_the_same_is_no_retry_cycle(tmp_path):
    """The lead: `carries_flags` takes a collector's record (which flags every failure)
    for flagged, an imported log for flagged only where a turn has `is_error` or an
    `exit_code`. This record flags none, so imported as `import` the fetch answered the
    same as its repeat read as a failure retried."""
    rec = by_domain("search")
    t = reimported(rec, tmp_path)
    kept, removed, reason = apply_filters(json.loads(t.to_json()), FilterConfig())
    assert (reason, [why for _, why in removed]) == (None, [])  # before: retry_cycle
    assert t.source.kind == "collector"
    assert len(kept[F.TURNS]) == 4
    # flags carried: the mcp record's failures come back flagged
    mcp = reimported(by_domain("mcp"), tmp_path)
    assert [x.observation.is_error for x in mcp.turns] == [False, True, False, True, False]
    assert json.loads(mcp.turns[3].perturbation) == {"kind": "error", "status": 502}


def test_an_export_imported_again_is_the_record_again(tmp_path, wt_env):
    """Store A (the records, processed) -> AgentWorldBench -> store B (imported by the
    `worldtrace` command, processed) -> AgentWorldBench again."""
    a = processed_store(tmp_path / "A")
    for d in ("awb1", "twice"):
        run(a, "export", "--format", "agentworldbench", "-o", tmp_path / d, "--progress-every", "0")
    b = tmp_path / "B"
    r = subprocess.run(
        ["worldtrace", "--store", str(b), "--create", "import", str(tmp_path / "awb1")],
        capture_output=True,
        text=True,
        env=wt_env,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    run(b, "process")
    run(
        b, "export", "--format", "agentworldbench", "-o", tmp_path / "awb2", "--progress-every", "0"
    )
    the_processed_turns_come_back_as_they_were(a, b)
    nothing_is_rejected_that_was_not_before(a, b)
    exporting_again_gives_the_same_lines(tmp_path)
    an_export_of_the_same_store_twice_is_the_same(tmp_path / "awb1", tmp_path / "twice")


def the_processed_turns_come_back_as_they_were(a: Path, b: Path) -> None:
    original = {t.trajectory_id: t for t in read_records(a / "processed" / "trajectories")}
    assert sorted(t.domain for t in original.values()) == sorted(F.DOMAINS[:6])
    back = list(read_records(b / "processed" / "trajectories"))
    # every domain back (web and android were all `gui_env_failure:missing_state`)
    assert {t.metadata["exported_from"] for t in back} == set(original)
    for t in back:
        o = original[t.metadata["exported_from"]]
        assert t.domain == o.domain
        assert t.trajectory_id == o.trajectory_id  # its content hash: the same actions, texts
        assert [turn_fields(x) for x in t.turns] == [turn_fields(x) for x in o.turns], o.domain
        assert t.outcome == o.outcome, o.domain  # success stays success, reward 0.0 stays 0.0
        assert t.source.kind == o.source.kind and t.source.origin_format == "agentworldbench"
    swe = next(t for t in back if t.domain == "swe")
    assert [x.action.name for x in swe.turns] == ["find_file", "open", "python", "edit", "submit"]
    assert swe.outcome == Outcome("success", 0.0)
    tool_names = query(b, "select tool_name from turns where domain = 'swe' order by turn_index")
    assert [r["tool_name"] for r in tool_names][:2] == ["find_file", "open"]


def nothing_is_rejected_that_was_not_before(a: Path, b: Path) -> None:
    reasons = "select distinct reason from rejects order by 1"
    assert query(b, reasons) == query(a, reasons) == []  # no missing_state, no retry_cycle
    domains = "select distinct domain from trajectories order by 1"
    assert query(b, domains) == query(a, domains)
    search = next(t for t in read_records(b / "processed" / "trajectories") if t.domain == "search")
    assert len(search.turns) == 4  # the repeated fetch kept, as in the collector's record


def exporting_again_gives_the_same_lines(tmp_path: Path) -> None:
    def without_ids(line: dict) -> str:
        line = {**line, "worldtrace": {**line["worldtrace"], "trajectory_id": None}, "id": None}
        return json.dumps(line, sort_keys=True)

    first, again = lines_of(tmp_path / "awb1"), lines_of(tmp_path / "awb2")
    assert sorted(map(without_ids, again)) == sorted(map(without_ids, first))
    # the new keys are there, compact: only fields that are not their default
    web = next(x for x in first if x["task"] == "worldtrace/web")["worldtrace"]
    assert web["turns"][0] == {
        "name": "goto",
        "state_json": web_state("http://shop.test/", "Shop"),
        "changed": True,
    }
    assert web["outcome"] == {"status": "success", "reward": 1.0}
    assert web["source_kind"] == "collector"
    term = next(x for x in first if x["task"] == "worldtrace/terminal")["worldtrace"]
    assert term["turns"][1]["arguments_json"] == '{"duration": 2.0, "keystrokes": "sleep 99\\n"}'
    assert "arguments_json" not in term["turns"][0]  # the keys give it back
    assert term["turns"][3] == {"arguments_json": None, "exit_code": 0}
    swe = next(x for x in first if x["task"] == "worldtrace/swe")["worldtrace"]
    assert "source_kind" not in swe and swe["outcome"] == {"status": "success", "reward": 0.0}


def an_export_of_the_same_store_twice_is_the_same(x: Path, y: Path) -> None:
    files = sorted(p.name for p in x.glob("*.jsonl"))
    assert files and files == sorted(p.name for p in y.glob("*.jsonl"))
    for name in files:
        assert (x / name).read_bytes() == (y / name).read_bytes()


# -- the key's shape, checked on import ---------------------------------------------------


def line_of(**ours) -> dict:
    base = {
        "trajectory_id": "x",
        "synthetic": False,
        "kinds": ["tool_call"] * 2,
        "system": {},
        "turns": [{"name": "f"}, {}],
    }
    return {
        "id": "x/1",
        "task": "worldtrace/mcp",
        "system_str": "",
        "turn_idx": 1,
        "prompt": ['f({"a": 1})', "g()"],
        "response": ["1", "2"],
        "worldtrace": {**base, **ours},
    }


@pytest.mark.parametrize(
    "ours,said",
    [
        ({"turns": [{}]}, "worldtrace.turns: expected a list of 2 objects"),
        ({"turns": [{}, 3]}, "worldtrace.turns[1]: expected an object"),
        ({"turns": [{}, {"colour": "red"}]}, "worldtrace.turns[1]: expected fields of name, "),
        ({"turns": [{"is_error": "yes"}, {}]}, "worldtrace.turns[0].is_error: expected a bool"),
        ({"turns": [{"exit_code": True}, {}]}, "worldtrace.turns[0].exit_code: expected an int"),
        (
            {"turns": [{"truncated": None}, {}]},
            "worldtrace.turns[0].truncated: expected a bool, not null",
        ),
        (
            {"turns": [{}, {"state_json": "[1]"}]},
            "worldtrace.turns[1].state_json: expected JSON text of an object",
        ),
        (
            {"turns": [{}, {"perturbation": "{"}]},
            "worldtrace.turns[1].perturbation: expected JSON text of an object",
        ),
        ({"outcome": "won"}, "worldtrace.outcome: expected an object"),
        ({"outcome": {"status": "won"}}, "worldtrace.outcome.status: expected one of success"),
        ({"outcome": {"reward": False}}, "worldtrace.outcome.reward: expected a float"),
        ({"outcome": {"score": 1}}, "worldtrace.outcome: expected fields of status, reward, error"),
        (
            {"source_kind": "robot"},
            "worldtrace.source_kind: expected a source kind (collector, import)",
        ),
    ],
)
def test_a_carried_field_of_the_wrong_shape_is_invalid_naming_it(tmp_path, ours, said):
    src = tmp_path / "mcp_test.jsonl"
    src.write_text(json.dumps(line_of(**ours)) + "\n")
    report = import_paths([src], tmp_path / "out", ImportConfig(workers=1))
    [p] = [p for p in report.problems if p.kind == "invalid"]
    assert p.message.startswith(said), p.message


def test_a_well_made_line_is_that_record(tmp_path):
    ours = {
        "turns": [
            {"name": "f", "is_error": True, "perturbation": '{"kind": "error"}'},
            {"name": "g", "arguments_json": None, "changed": False},
        ],
        "outcome": {"status": "failure", "reward": 0},
        "source_kind": "collector",
    }
    src = tmp_path / "mcp_test.jsonl"
    src.write_text(json.dumps(line_of(**ours)) + "\n")
    assert not import_paths([src], tmp_path / "out", ImportConfig(workers=1)).problems
    [t] = read_records(tmp_path / "out")
    assert [x.action for x in t.turns] == [
        Action("tool_call", 'f({"a": 1})', "f", '{"a": 1}'),  # the arguments from the text
        Action("tool_call", "g()", "g", None),
    ]
    assert [x.observation for x in t.turns] == [
        Observation("1", is_error=True),
        Observation("2", changed=False),
    ]
    assert [x.perturbation for x in t.turns] == ['{"kind": "error"}', None]
    assert (t.outcome, t.source.kind) == (Outcome("failure", 0), "collector")


def test_an_older_export_imports_as_before(tmp_path):
    """A line of 12-06 (kinds and system, no turns): a rendered call is that call again;
    no state, the default outcome, an import."""
    line = line_of()
    for key in ("turns",):
        del line["worldtrace"][key]
    src = tmp_path / "mcp_test.jsonl"
    src.write_text(json.dumps(line) + "\n")
    assert not import_paths([src], tmp_path / "out", ImportConfig(workers=1)).problems
    [t] = read_records(tmp_path / "out")
    assert [(x.action.name, x.action.arguments_json) for x in t.turns] == [
        ("f", '{"a": 1}'),
        (None, None),
    ]
    assert all(x.observation == Observation(x.observation.text) for x in t.turns)
    assert (t.outcome, t.source.kind) == (Outcome(), "import")


def test_writer_and_importer_agree_on_the_fields_and_the_arguments():
    """The importer may not import the writer (`pipelines`): the two are held equal here."""
    carried = [*writers.AWB_ACTION, *writers.AWB_OBSERVATION, *writers.AWB_TURN]
    assert carried == list(awb.CARRIED) and len(set(carried)) == len(carried)
    names = {f.name for f in dataclasses.fields(Observation)} - {"text"}
    assert set(writers.AWB_OBSERVATION) == names  # a new observation field is carried
    for kind, text, name in [
        ("tool_call", 'f({"a": 1})', "f"),
        ("tool_call", "f()", "f"),
        ("gui", "click(#b)", "click"),
        ("keystrokes", "ls\n", None),
        ("keystrokes", "é\n", None),
        ("command", "find_file x", "find_file"),
        ("text", "hi", None),
        ("tool_call", "f(x", "f"),
        ("tool_call", "(x)", ""),
    ]:
        assert writers.awb_arguments(kind, text, name) == awb._arguments(kind, text, name)
