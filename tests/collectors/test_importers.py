"""Importers on our own fixtures: mapping rules, edge cases, mixed directories."""

from __future__ import annotations

import itertools
import json
import subprocess

import pytest
from worldtrace.collectors.importers import import_paths, parse_file
from worldtrace.collectors.importers.common import ImportProblem, guess_domain
from worldtrace.schemas import read_records, validate_dict


def write(path, obj):
    path.write_text(json.dumps(obj) if not isinstance(obj, str) else obj)
    return path


SWE_AGENT = {
    "environment": "swe_main",
    "trajectory": [
        {
            "action": "ls\n",
            "observation": "a.py\nb.py\n",
            "response": "Let me look.\n```\nls\n```",
            "thought": "Let me look.",
            "state": '{"open_file": "n/a", "working_dir": "/repo"}',
        },
        {
            "action": "open a.py\n",
            "observation": "[File: a.py]\n1:x = 1\n",
            "response": "Open it",
            "thought": "Open it",
            # 0.x records the state before the step: after `ls` (turn 0's state)
            "state": '{"open_file": "n/a", "working_dir": "/repo"}',
        },
    ],
    "history": [
        {"role": "system", "content": "You are an autonomous programmer."},
        {"role": "user", "content": "DEMO: ls", "is_demo": True},
        {"role": "user", "content": "Fix the bug in a.py"},
    ],
    "info": {"exit_status": "submitted"},
}

MINI = {
    "trajectory_format": "mini-swe-agent-1",
    "info": {"exit_status": "Submitted"},
    "messages": [
        {"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": "Please solve: count files"},
        {"role": "assistant", "content": "THOUGHT: list them.\n\n```bash\nls | wc -l\n```"},
        {"role": "user", "content": "<returncode>0</returncode>\n<output>\n3\n</output>"},
        {"role": "assistant", "content": "I forgot the block"},
        {"role": "user", "content": "Please always provide EXACTLY ONE action"},
        {"role": "assistant", "content": "Check failure.\n```bash\ncat nope\n```"},
        {
            "role": "user",
            "content": "<returncode>1</returncode>\n<output>\ncat: nope: No such file\n</output>",
        },
    ],
}

ATIF = {
    "schema_version": "ATIF-v1.2",
    "session_id": "sess-42",
    "agent": {"name": "terminus", "version": "1", "model_name": "m"},
    "steps": [
        {"step_id": 1, "source": "user", "message": "Create hello.txt"},
        {
            "step_id": 2, "source": "agent", "message": "I will run two commands.", "reasoning_content": "Think first.",
            "tool_calls": [
                {"tool_call_id": "c1", "function_name": "bash", "arguments": {"command": "touch hello.txt"}},
                {"tool_call_id": "c2", "function_name": "bash", "arguments": {"command": "ls"}},
            ],
            "observation": {"results": [{"source_call_id": "c2", "content": "hello.txt"}, {"source_call_id": "c1", "content": ""}]},
        },
        {"step_id": 3, "source": "agent", "message": "Check",
         "tool_calls": [{"tool_call_id": "c3", "function_name": "bash", "arguments": {"command": "cat hello.txt"}}]},
    ],
}  # fmt: skip

OPENAI = {
    "id": "conv-1",
    "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": {}}}, {"type": "function", "function": {"name": "get_time"}}],
    "messages": [
        {"role": "system", "content": "be helpful"},
        {"role": "user", "content": "Weather and time in Paris?"},
        {"role": "assistant", "content": "Calling both.", "tool_calls": [
            {"id": "t1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}},
            {"id": "t2", "type": "function", "function": {"name": "get_time", "arguments": "{\"tz\": \"CET\"}"}}]},
        {"role": "tool", "tool_call_id": "t2", "content": "14:00"},
        {"role": "tool", "tool_call_id": "t1", "content": "Sunny, 21C"},
        {"role": "assistant", "content": "Sunny and 14:00."},
    ],
}  # fmt: skip

SHAREGPT = {
    "id": "sg-1",
    "tools": json.dumps([{"name": "search"}]),
    "conversations": [
        {"from": "human", "value": "Who wrote Dune?"},
        {"from": "gpt", "value": "I should search."},
        {
            "from": "function_call",
            "value": json.dumps({"name": "search", "arguments": {"q": "Dune author"}}),
        },
        {"from": "observation", "value": "Frank Herbert wrote Dune (1965)."},
        {"from": "gpt", "value": "Frank Herbert."},
    ],
}

AWB = {
    "id": "awb-1",
    "task": "agentworld/terminal",
    "system_str": "A Linux shell.",
    "prompt": ["ls\n", "pwd\n"],
    "response": ["a b\n$ ", "/home\n$ "],
    "turn_idx": [0, 1],
}


def only(path, fmt="auto"):
    items = [i for _, i in parse_file(path, fmt)]
    trajs = [i for i in items if not isinstance(i, ImportProblem)]
    assert len(trajs) == 1, items
    return trajs[0], [i for i in items if isinstance(i, ImportProblem)]


def test_swe_agent(tmp_path):
    t, problems = only(write(tmp_path / "task-1.traj", SWE_AGENT))
    assert problems == []
    assert (t.domain, t.source.origin_format, t.source.origin_id) == ("swe", "swe-agent", "task-1")
    assert [x.action.text for x in t.turns] == ["ls", "open a.py"]
    assert t.turns[1].action.name == "open"
    assert t.turns[0].reasoning == "Let me look." and "Let me look" not in t.turns[0].action.text
    assert json.loads(t.turns[0].observation.state_json) == {
        "open_file": "n/a",
        "working_dir": "/repo",
    }
    assert t.turns[1].observation.state_json is None  # after 0.x's last step: unknown
    assert t.task.instruction == "Fix the bug in a.py"
    assert json.loads(t.system.demonstrations) == ["DEMO: ls"]
    assert t.outcome.status == "success"
    assert validate_dict(t.to_dict()) == []


def test_mini_swe_agent_commands_not_prose(tmp_path):
    t, problems = only(write(tmp_path / "run.traj.json", MINI))
    assert problems == []
    assert t.source.origin_id == "run"
    assert [x.action.text for x in t.turns] == [
        "ls | wc -l",
        "cat nope",
    ]  # the no-block message is skipped
    assert [x.observation.text for x in t.turns] == ["3\n", "cat: nope: No such file\n"]
    assert [x.observation.exit_code for x in t.turns] == [0, 1]
    assert t.turns[0].reasoning == "THOUGHT: list them."
    assert t.task.instruction == "Please solve: count files"


def test_mini_swe_agent_bare_list_and_unknown_version(tmp_path):
    t, _ = only(write(tmp_path / "a.traj.json", MINI["messages"]))
    assert len(t.turns) == 2
    t, problems = only(
        write(tmp_path / "b.traj.json", {**MINI, "trajectory_format": "mini-swe-agent-9"})
    )
    assert [p.kind for p in problems] == ["unknown_version"] and not problems[0].fatal


def test_atif_pairs_by_call_id_in_listed_order(tmp_path):
    t, problems = only(write(tmp_path / "trajectory.json", ATIF))
    assert t.source.origin_id == "sess-42" and t.domain == "terminal"
    assert [x.action.name for x in t.turns] == ["bash"] * 2
    assert [json.loads(x.action.arguments_json)["command"] for x in t.turns] == [
        "touch hello.txt",
        "ls",
    ]  # `cat hello.txt` has no result: no turn
    assert [x.observation.text for x in t.turns] == ["", "hello.txt"]
    assert (
        t.turns[0].reasoning == "Think first.\n\nI will run two commands."
        and t.turns[1].reasoning is None
    )
    assert [(p.kind, p.fatal) for p in problems] == [("unpaired_call", False)]
    t2, problems = only(write(tmp_path / "v2.json", {**ATIF, "schema_version": "ATIF-v2.0"}))
    assert "unknown_version" in [p.kind for p in problems] and len(t2.turns) == 2


def test_openai_messages(tmp_path):
    t, _ = only(write(tmp_path / "c.json", OPENAI))
    assert t.source.origin_id == "conv-1" and t.domain == "mcp"
    assert [x.action.text for x in t.turns] == [
        'get_weather({"city": "Paris"})',
        'get_time({"tz": "CET"})',
    ]
    assert [x.observation.text for x in t.turns] == ["Sunny, 21C", "14:00"]
    assert t.turns[0].reasoning == "Calling both."
    space = json.loads(t.system.action_space)  # ToolSpec dicts, whatever shape came in
    assert {s["name"] for s in space} == {"get_weather", "get_time"}
    assert all(set(s) == {"name", "description", "input_schema"} for s in space)


def test_sharegpt(tmp_path):
    t, _ = only(write(tmp_path / "s.json", SHAREGPT))
    assert t.domain == "search"
    assert t.turns[0].action.name == "search" and t.turns[0].observation.text.startswith(
        "Frank Herbert"
    )
    assert t.turns[0].reasoning == "I should search."


def test_agentworldbench(tmp_path):
    f = write(tmp_path / "a.jsonl", json.dumps(AWB) + "\n")
    t, _ = only(f)
    assert (t.domain, t.source.origin_id) == ("terminal", "awb-1")
    assert [(x.action.text, x.observation.text) for x in t.turns] == [
        ("ls\n", "a b\n$ "),
        ("pwd\n", "/home\n$ "),
    ]
    bad = write(tmp_path / "b.jsonl", json.dumps({**AWB, "task": "x/chess"}) + "\n")
    [(_, p)] = list(parse_file(bad))
    assert p.kind == "missing_field" and "not a domain" in p.message


def test_jsonl_broken_lines_reported_rest_imported(tmp_path):
    lines = [
        json.dumps(OPENAI),
        "{broken",
        json.dumps(SHAREGPT),
        json.dumps({"hello": 1}),
        json.dumps(AWB),
    ]
    f = write(tmp_path / "mixed.jsonl", "\n".join(lines) + "\n")
    r = import_paths([f], tmp_path / "out")
    assert dict(r.imported) == {"openai": 1, "sharegpt": 1, "agentworldbench": 1}
    assert dict(r.errors) == {"invalid_json": 1, "unrecognized": 1}
    locs = sorted(f"{p.where}:{p.kind}" for p in r.problems)
    assert locs == ["line 2:invalid_json", "line 4:unrecognized"]
    assert all(str(f) in str(p) for p in r.problems)


def test_missing_fields_and_empty(tmp_path):
    f = write(tmp_path / "x.traj", {"trajectory": [{"observation": "no action"}]})
    [(_, p)] = list(parse_file(f))
    assert p.kind == "missing_field" and "action" in p.message
    r = import_paths(
        [write(tmp_path / "e.json", {"messages": [{"role": "user", "content": "hi"}]})],
        tmp_path / "o",
    )
    assert dict(r.errors) == {"empty": 1}
    r = import_paths([write(tmp_path / "bad.json", "{ not json")], tmp_path / "o2")
    assert dict(r.errors) == {"invalid_json": 1} and r.problems[0].where == "line 1"


def test_huge_jsonl_streams(tmp_path):
    f = tmp_path / "big.jsonl"
    with open(f, "w") as fh:
        for i in range(3000):
            fh.write(
                json.dumps({**AWB, "id": f"awb-{i}", "response": [f"out {i}\n", "/home\n"]}) + "\n"
            )
    r = import_paths([f], tmp_path / "out")
    assert r.imported["agentworldbench"] == 3000
    assert len({t.source.origin_id for t in read_records(tmp_path / "out")}) == 3000


def test_mixed_directory_cli_reports_counts(tmp_path, wt_env):
    d = tmp_path / "in"
    (d / "sub").mkdir(parents=True)
    write(d / "a.traj", SWE_AGENT)
    write(d / "b.traj.json", MINI)
    write(d / "sub" / "trajectory.json", ATIF)
    write(d / "c.jsonl", json.dumps(OPENAI) + "\n" + json.dumps(SHAREGPT) + "\n{bad\n")
    write(d / "d.jsonl", json.dumps(AWB) + "\n")
    r = subprocess.run(["worldtrace", "import", str(d)], capture_output=True, text=True, env=wt_env)
    assert r.returncode == 0, r.stderr
    for fmt in ("swe-agent", "mini-swe-agent", "atif", "openai", "sharegpt", "agentworldbench"):
        assert f"│ imported │ {fmt}" in r.stdout.replace("  ", " ") or fmt in r.stdout
    assert "invalid_json" in r.stdout and "c.jsonl:line 3" in r.stderr
    trajs = list(read_records(f"{wt_env['WORLDTRACE_STORE']}/raw/import"))
    assert len(trajs) == 6 and all(t.source.kind == "import" for t in trajs)
    r = subprocess.run(
        ["worldtrace", "import", "--strict", str(d)], capture_output=True, text=True, env=wt_env
    )
    assert r.returncode == 1


def test_agentworldbench_round_trip(tmp_path):
    """export --format agentworldbench, then import: the same turns."""
    from worldtrace.collectors.synthetic import SyntheticConfig, generate
    from worldtrace.pipelines.export import ExportConfig, export
    from worldtrace.pipelines.process import ProcessConfig, run
    from worldtrace.schemas import ShardWriter

    with ShardWriter(tmp_path / "raw") as w:
        w.write(generate(SyntheticConfig(n=30, seed=9)))
    run(ProcessConfig(inputs=[str(tmp_path / "raw")], output=str(tmp_path / "p"), workers=1))
    export(
        ExportConfig(
            input=str(tmp_path / "p" / "trajectories"),
            output=str(tmp_path / "awb"),
            format="agentworldbench",
        )
    )
    # one record per target turn, each carrying its whole trajectory; ids are `<tid>/<turn>`
    files = sorted((tmp_path / "awb").glob("*_test.jsonl"))
    n_lines = sum(len(f.read_text().splitlines()) for f in files)
    r = import_paths(files, tmp_path / "back")
    assert r.imported["agentworldbench"] == n_lines and not r.errors
    original = {t.trajectory_id: t for t in read_records(tmp_path / "p" / "trajectories")}
    back = list(read_records(tmp_path / "back"))
    assert {t.source.origin_id.rsplit("/", 1)[0] for t in back} == set(original)
    for t in back:
        o = original[t.source.origin_id.rsplit("/", 1)[0]]
        assert t.domain == o.domain
        assert [(x.action.text, x.observation.text) for x in t.turns] == [
            (x.action.text, x.observation.text) for x in o.turns
        ]


@pytest.mark.parametrize(
    "names,domain",
    [
        (["bash"], "terminal"),
        (["str_replace_editor", "bash"], "swe"),
        (["browser_click"], "web"),
        (["search"], "search"),
        (["create_entities"], "mcp"),
        ([], "mcp"),
    ],
)
def test_guess_domain(names, domain):
    assert guess_domain(names) == domain


SHARED_FORMATS = __import__("pathlib").Path(__file__).resolve().parents[3] / "shared" / "formats"


@pytest.mark.skipif(
    not SHARED_FORMATS.is_dir(),
    reason="the project's shared/formats examples are not beside this checkout",
)
def test_real_foreign_files(tmp_path):
    """The real files from shared/formats (read, not copied): SWE-agent, mini-swe-agent and
    a tau-bench results file (runs under `traj`, tool-call ids reused within a run)."""
    r = import_paths([SHARED_FORMATS], tmp_path / "out")
    assert not r.errors
    assert r.imported["swe-agent"] >= 1 and r.imported["mini-swe-agent"] >= 1
    runs = json.loads((SHARED_FORMATS / "tau-bench.results-sample.json").read_text())
    assert r.imported["openai"] == len(runs)
    for t in read_records(tmp_path / "out"):
        assert validate_dict(t.to_dict()) == []
        assert all(x.action.text and "THOUGHT" not in x.action.text for x in t.turns)
        assert t.source.origin_path.startswith(str(SHARED_FORMATS))
        if t.source.origin_format == "swe-agent":
            assert t.turns[0].reasoning and t.turns[0].action.text == t.turns[0].action.text.rstrip(
                "\n"
            )
            names = {s["name"] for s in json.loads(t.system.action_space)}
            assert {"open", "goto", "edit", "submit"} <= names
        if t.source.origin_format == "openai":
            run = runs[t.source.origin_index]
            assert (t.task.task_id, t.outcome.reward) == (str(run["task_id"]), run["reward"])
            assert t.metadata["trial"] == str(run["trial"])
            # each call gets exactly the result that followed it, though ids repeat
            calls = [
                (c["function"]["name"], m2["content"])
                for m, m2 in itertools.pairwise(run["traj"])
                for c in m.get("tool_calls") or []
                if m2.get("role") == "tool"
            ]
            made = [(x.action.name, x.observation.text) for x in t.turns]
            assert [x for x in made if x[0]] == calls
            # what the agent said to its user, each answered by the next user message
            said = [
                (m["content"], m2["content"])
                for m, m2 in itertools.pairwise(run["traj"])
                if m["role"] == "assistant" and not m.get("tool_calls") and m2["role"] == "user"
            ]
            texts = [(x.action.text, x.observation.text) for x in t.turns if not x.action.name]
            assert said and texts == said
    assert r.warnings["repeated_call_id"] >= 1
