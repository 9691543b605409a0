"""Found (a hunter's import session, 2026-12-06): worldtrace's own AgentWorldBench export
imported again doubled the simulation instruction at the next export (the record took the
whole `system_str` for its task description) and made every tool call a keystroke; a file
whose path holds a secret-shaped name was imported again on every run; runs under a link
to a directory, and a pretty-printed `.jsonl` document, were not read; `--format openai`
refused JSONL from a pipe; a Terminus-2 call answered together with the next one trained
"printed nothing"; and some problems named what the importer made of the file rather
than the file. Real parts: files written here, the `worldtrace` CLI in a subprocess, the
real importers and export."""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import pytest
from worldtrace.collectors.importers import ImportConfig, agentworldbench, import_paths
from worldtrace.pipelines import prompt as P
from worldtrace.schemas import fields as F
from worldtrace.schemas import read_records

from .test_import_hunt_1205f import stored, wt


def call(cid, name, **args):
    return {"id": cid, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}  # fmt: skip


def chats():
    """A terminal chat of three bash calls (OpenAI's shape), as the hunter's."""
    msgs = [{"role": "user", "content": "List files"}]
    for cid, cmd, out in (("a", "ls", "x.txt\ny.txt"), ("b", "pwd", "/home"), ("c", "whoami", "root")):  # fmt: skip
        msgs += [
            {"role": "assistant", "content": None, "tool_calls": [call(cid, "bash", command=cmd)]},
            {"role": "tool", "tool_call_id": cid, "content": out},
        ]
    return {"id": "r1", "messages": msgs}


def store(env, name):
    return {**env, "WORLDTRACE_STORE": str(Path(env["WORLDTRACE_STORE"]).parent / name)}


def round_trip(tmp_path, env, record, domain):
    """Import `record` into store A, process, export AgentWorldBench; import that export
    into B, process, export again: (A's record, B's record, the two first lines)."""
    src = tmp_path / "in.jsonl"
    src.write_text(json.dumps(record) + "\n")
    a, b = store(env, "A"), store(env, "B")
    for e, inp, out in ((a, src, tmp_path / "awb1"), (b, tmp_path / "awb1", tmp_path / "awb2")):
        for args in (("--create", "import", inp), ("process",), ("export", "--format", "agentworldbench", "-o", out)):  # fmt: skip
            r = wt(e, *args)
            assert r.returncode == 0, (args, r.stdout, r.stderr)
    lines = [json.loads((tmp_path / d / f"{domain}_test.jsonl").read_text().splitlines()[0]) for d in ("awb1", "awb2")]  # fmt: skip
    [rec_a], recs_b = stored(a), stored(b)
    return rec_a, recs_b, lines


def system_of(t):
    return (t.task.instruction, t.system.task_description, t.system.action_space is not None,
            t.system.initial_state, t.system.demonstrations, t.system.simulation_instruction)  # fmt: skip


def actions(t):
    return [(x.action.kind, x.action.text, x.action.name, x.action.arguments_json) for x in t.turns]


# -- 1. worldtrace's AgentWorldBench export, imported again --------------------------------


def test_our_agentworldbench_export_imported_again_is_the_same_record_and_prompt(tmp_path, wt_env):
    a, bs, (first, again) = round_trip(tmp_path, wt_env, chats(), "terminal")
    assert again["system_str"] == first["system_str"]  # before: the instruction twice
    assert first["system_str"].count("# Simulation instruction") == 1
    assert (again["prompt"], again["response"]) == (first["prompt"], first["response"])
    assert len(bs) == 3  # one line per target turn, each the whole trajectory
    for b in bs:
        assert actions(b) == actions(a)  # tool calls again, not keystrokes
        assert [x.action.kind for x in b.turns] == ["tool_call"] * 3
        assert system_of(b) == system_of(a) == ("List files", "List files", False, None, None, None)  # fmt: skip
    # the lines alone, without the export's manifest: each line's `worldtrace` key says
    # the record's parts (12-06), so worldtrace's instruction is not taken for its own
    lone = tmp_path / "lone"
    lone.mkdir()
    shutil.copy(tmp_path / "awb1" / "terminal_test.jsonl", lone)
    import_paths([lone], tmp_path / "c", ImportConfig(workers=1))
    c = next(read_records(tmp_path / "c"))
    assert (c.system.task_description, c.system.simulation_instruction) == ("List files", None)
    assert actions(c) == actions(a) and system_of(c) == system_of(a)
    # a line of an export before 12-06 (trajectory and `synthetic` only), alone: nothing
    # tells the instruction from worldtrace's, so it is the record's own, shown once
    old = tmp_path / "old"
    old.mkdir()
    (old / "terminal_test.jsonl").write_text(before_1206(lone / "terminal_test.jsonl"))
    import_paths([old], tmp_path / "d", ImportConfig(workers=1))
    d = next(read_records(tmp_path / "d"))
    instruction = first["system_str"].split("# Simulation instruction\n", 1)[1]
    assert (d.system.task_description, d.system.simulation_instruction) == ("List files", instruction)  # fmt: skip


def before_1206(path: Path) -> str:
    """The lines of `path` as an export before 12-06 wrote them: `worldtrace` holds the
    trajectory and `synthetic` only (`writers.awb_provenance` added the record's parts)."""
    out = []
    for text in path.read_text().splitlines():
        line = json.loads(text)
        ours = line[F.AWB_PROVENANCE]
        line[F.AWB_PROVENANCE] = {k: ours[k] for k in ("trajectory_id", "synthetic")}
        out.append(json.dumps(line) + "\n")
    return "".join(out)


def tau_run():
    """A tau-bench run: the agent talks to its user and calls a declared tool; the
    simulated user's script is the record's own simulation instruction."""
    tools = [{"type": "function", "function": {"name": "get_order", "description": "Look up an order.",
              "parameters": {"type": "object", "properties": {"id": {"type": "string", "description": "order id"}},
                             "required": ["id"]}}}]  # fmt: skip
    traj = [
        {"role": "system", "content": "You are a support agent."},
        {"role": "user", "content": "Hi, cancel my order"},
        {"role": "assistant", "content": "Which order?"},
        {"role": "user", "content": "Order 7"},
        {"role": "assistant", "content": None, "tool_calls": [call("a", "get_order", id="7")]},
        {"role": "tool", "tool_call_id": "a", "content": '{"status": "open"}'},
        {"role": "assistant", "content": "Cancelled. Anything else?"},
        {"role": "user", "content": "No, thanks ###STOP###"},
    ]
    info = {"task": {"instruction": "You are Ann; you want order 7 cancelled."}}
    return {"task_id": "t1", "trial": 0, "reward": 1.0, "info": info, "traj": traj, "tools": tools}


def test_a_chat_with_its_user_comes_back_with_its_own_instruction_once(tmp_path, wt_env):
    a, bs, (first, again) = round_trip(tmp_path, wt_env, tau_run(), "mcp")
    assert again["system_str"] == first["system_str"]
    assert first["system_str"].count("You are the world model") == 1
    for b in bs:
        assert [x.action.kind for x in b.turns] == ["text", "tool_call", "text"] == [x.action.kind for x in a.turns]  # fmt: skip
        assert actions(b) == actions(a)
        assert b.system.simulation_instruction == "You are Ann; you want order 7 cancelled."
        assert (b.task.instruction, b.system.task_description) == ("Hi, cancel my order",) * 2
        assert [t["name"] for t in json.loads(b.system.action_space)] == ["get_order"]


def exported_line(
    rec: dict, tmp_path: Path, sp: P.SystemPrompt | None = None, old: bool = False
) -> Path:
    """`rec` as worldtrace's export writes it (`agentworldbench_lines`, the system prompt
    `SystemPrompt.text`), with the export's manifest description of its instructions;
    `old`: as an export before 12-06 wrote it (`before_1206`)."""
    from worldtrace.pipelines.writers import agentworldbench_lines

    sp = sp or P.SystemPrompt()
    out = tmp_path / "awb"
    out.mkdir(exist_ok=True)
    line = next(agentworldbench_lines(rec, sp.text(rec), 0))
    path = out / f"{rec[F.DOMAIN]}_test.jsonl"
    path.write_text(json.dumps(line) + "\n")
    if old:
        path.write_text(before_1206(path))
    manifest = {"schema_version": F.TRAINING_SCHEMA_VERSION, "format": "agentworldbench",
                "counts": {}, "simulation_instructions": sp.describe(None)}  # fmt: skip
    (out / "manifest.json").write_text(json.dumps(manifest))
    return out


def record(**system):
    turns = [{"index": i, "action": {"kind": "keystrokes", "text": f"echo {i}\n"},
              "observation": {"text": f"{i}\n$ "}, "keep": 1.0} for i in range(2)]  # fmt: skip
    return {F.TRAJECTORY_ID: "t" * 32, F.DOMAIN: "terminal", F.TURNS: turns,
            F.SYSTEM: {"task_description": "Count", **system},
            P.CONDITIONS: json.dumps(["disk is full", "no network"])}  # fmt: skip


@pytest.mark.parametrize(
    "tools",
    [
        [
            {
                "name": "bash",
                "description": "Run a command.",
                "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}},
            }
        ],
        [3, {"name": "x"}],  # a tool that is no object: shown as JSON, kept in the task description
    ],
)
@pytest.mark.parametrize("old", [False, True], ids=["export", "export before 12-06"])
def test_every_part_of_the_prompt_comes_back_in_its_field(tmp_path, tools, old):
    rec = record(action_space=json.dumps(tools), initial_state="cwd: /app\n",
                 demonstrations=json.dumps([{"turns": []}]), simulation_instruction="Be a shell.")  # fmt: skip
    out = exported_line(rec, tmp_path, old=old)
    r = import_paths([out], tmp_path / "back", ImportConfig(workers=1))
    assert dict(r.imported) == {"agentworldbench": 1} and not r.errors
    b = next(read_records(tmp_path / "back"))
    back = json.loads(b.to_json())
    assert P.SystemPrompt().text(back) == P.SystemPrompt().text(rec)  # composed the same again
    assert b.system.simulation_instruction == "Be a shell."  # the record's own: kept
    assert json.loads(b.conditions) == ["disk is full", "no network"]
    assert b.system.initial_state == "cwd: /app\n" and json.loads(b.system.demonstrations) == [{"turns": []}]  # fmt: skip
    if isinstance(tools[0], dict):
        assert b.system.task_description == "Count"
        assert [t["name"] for t in json.loads(b.system.action_space)] == ["bash"]
    elif not old:  # the line says the record's parts: each in its field, as it was
        assert (b.system.task_description, b.system.action_space) == ("Count", json.dumps(tools))
    else:  # parsed back from `system_str`: shown as it was, before the parts in their fields
        assert b.system.task_description.startswith("Count\n\n# Action space\n3\n\n## x")
        assert b.task.instruction == "Count"
        assert b.system.action_space is None


@pytest.mark.parametrize("old", [False, True], ids=["export", "export before 12-06"])
def test_worldtraces_own_instruction_is_left_to_the_next_export(tmp_path, old):
    """Told by the line's `worldtrace` key, or for an older export's line by the sha256
    of the instructions in the export's manifest."""
    rec = record()
    rec.pop(P.CONDITIONS)
    out = exported_line(rec, tmp_path, old=old)
    import_paths([out], tmp_path / "back", ImportConfig(workers=1))
    b = next(read_records(tmp_path / "back"))
    assert b.system.simulation_instruction is None and b.conditions is None
    assert P.SystemPrompt().text(json.loads(b.to_json())) == P.SystemPrompt().text(rec)
    # exported with a user's instructions: those are told by the manifest too
    other = P.SystemPrompt({**P.builtin_instructions(), "terminal": "Answer as bash would."})
    (tmp_path / "x").mkdir()
    out = exported_line(rec, tmp_path / "x", other, old=old)
    assert "Answer as bash would." in (out / "terminal_test.jsonl").read_text()
    import_paths([out], tmp_path / "back2", ImportConfig(workers=1))
    assert next(read_records(tmp_path / "back2")).system.simulation_instruction is None


def test_the_headers_are_the_exports():
    assert [h for _, h in agentworldbench.HEADERS] == [P.HEADERS[k] for k, _ in agentworldbench.HEADERS]  # fmt: skip
    assert [k for k, _ in agentworldbench.HEADERS] == list(P.HEADERS)
    assert agentworldbench.CONDITIONS_INTRO == P.CONDITIONS_INTRO
    assert agentworldbench.TEXT_KIND == P.TEXT_KIND


def test_a_foreign_line_is_read_as_before(tmp_path):
    line = {"id": "x/1", "task": "agentworld/terminal", "prompt": ['bash({"command": "ls"})'],
            "response": ["a\n"], "system_str": "Do it\n\n# Simulation instruction\nBe a shell."}  # fmt: skip
    f = tmp_path / "terminal_test.jsonl"
    f.write_text(json.dumps(line) + "\n")
    import_paths([f], tmp_path / "out", ImportConfig(workers=1))
    t = next(read_records(tmp_path / "out"))
    assert [x.action.kind for x in t.turns] == ["keystrokes"]
    assert (t.system.task_description, t.system.simulation_instruction) == (line["system_str"], None)  # fmt: skip


# -- 2. a path holding a secret-shaped name ------------------------------------------------


def test_a_file_whose_path_holds_a_secret_is_found_present_again(tmp_path, wt_env):
    runs = tmp_path / "runs"
    (runs / "pw=Hunter2Secret99").mkdir(parents=True)
    (runs / "out-ghp_a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8.jsonl").write_text(json.dumps(chats()) + "\n")  # fmt: skip
    (runs / "pw=Hunter2Secret99" / "a.jsonl").write_text(json.dumps(chats()) + "\n")
    r = wt(wt_env, "import", runs)
    assert r.returncode == 0 and re.search(r"imported\s+│ openai\s+│\s+2", r.stdout), r.stdout
    for _ in range(2):  # before: imported again on every run
        r = wt(wt_env, "import", runs)
        assert r.returncode == 0 and re.search(r"already present\s+│ openai\s+│\s+2", r.stdout)
        assert "imported │" not in r.stdout, r.stdout
    got = stored(wt_env)
    assert len(got) == 2
    paths = " ".join(t.source.origin_path for t in got)
    assert "ghp_a1B2" not in paths and "<secret:" in paths  # still redacted


# -- 3, 9. the walk: links to directories, hidden directories -------------------------------


def test_a_walk_follows_links_to_directories_once_and_passes_hidden_ones(tmp_path, wt_env):
    real, tree, only = tmp_path / "real" / "run1", tmp_path / "tree", tmp_path / "only"
    for d in (real, tree, only):
        d.mkdir(parents=True)
    (real / "a.jsonl").write_text(json.dumps(chats()) + "\n")
    (real / "up").symlink_to("..")  # a loop
    (tree / "b.jsonl").write_text(json.dumps({**chats(), "id": "b"}) + "\n")
    (tree / "run1").symlink_to(real)
    (tree / "again").symlink_to(real)  # the same directory twice: its file once
    (only / "run1").symlink_to(real)
    hidden = tree / ".ipynb_checkpoints"
    hidden.mkdir()
    (hidden / "a-checkpoint.jsonl").write_text(json.dumps({**chats(), "id": "ckpt"}) + "\n")
    r = wt(wt_env, "import", only)  # before: "holds no ... file"
    assert r.returncode == 0 and re.search(r"imported\s+│ openai\s+│\s+1", r.stdout), r.stderr
    r = wt(wt_env, "import", tree)
    assert r.returncode == 0, r.stderr
    assert "import: 2 file(s)" in r.stdout and re.search(r"imported\s+│ openai\s+│\s+1", r.stdout)
    assert re.search(r"already present\s+│ openai\s+│\s+1", r.stdout), r.stdout
    assert sorted(t.source.origin_id for t in stored(wt_env)) == ["b", "r1"]  # no checkpoint
    r = wt(wt_env, "import", hidden)  # named: read
    assert r.returncode == 0 and re.search(r"imported\s+│ openai\s+│\s+1", r.stdout), r.stderr
    assert sorted(t.source.origin_id for t in stored(wt_env)) == ["b", "ckpt", "r1"]


# -- 4, 5. one document named .jsonl; JSONL under another name ------------------------------


def test_a_pretty_printed_jsonl_document_imports_as_validate_says(tmp_path, wt_env):
    f = tmp_path / "pretty.jsonl"
    f.write_text(json.dumps(chats(), indent=2))
    r = wt(wt_env, "validate", f)
    assert f"it reads as the openai format: import it with `worldtrace import {f}`" in r.stdout + r.stderr  # fmt: skip
    r = wt(wt_env, "import", f)  # before: an invalid_json per line
    assert r.returncode == 0 and re.search(r"imported\s+│ openai\s+│\s+1", r.stdout), r.stderr
    assert "invalid_json" not in r.stdout + r.stderr
    [t] = stored(wt_env)
    assert [x.action.name for x in t.turns] == ["bash"] * 3
    odd = tmp_path / "odd.jsonl"
    odd.write_text(json.dumps({"hello": [1, 2], "x": {"y": 1}}, indent=2))
    r = wt(wt_env, "import", odd)
    assert r.returncode == 1
    assert (
        f"{odd}: unrecognized: one JSON document over 9 lines, not JSONL (one record per "
        "line), read whole: not a record of any known format"
    ) in r.stderr.splitlines()


def test_a_record_format_reads_jsonl_by_line_whatever_the_name(tmp_path, wt_env):
    text = "".join(json.dumps({**chats(), "id": f"p{i}"}) + "\n" for i in range(2))
    r = wt_pipe(wt_env, text, "import", "--format", "openai", "/dev/stdin")
    assert r.returncode == 0 and re.search(r"imported\s+│ openai\s+│\s+2", r.stdout), r.stderr
    log = tmp_path / "two.log"
    log.write_text(text.replace("p0", "l0").replace("p1", "l1"))
    r = wt(wt_env, "import", "--format", "openai", log)
    assert r.returncode == 0 and re.search(r"imported\s+│ openai\s+│\s+2", r.stdout), r.stderr
    assert sorted(t.source.origin_index for t in stored(wt_env) if t.source.origin_id[0] == "l") == [0, 1]  # fmt: skip
    r = wt_pipe(wt_env, text, "import", "/dev/stdin")  # auto: a pipe's message names what works
    assert r.returncode == 1
    assert (
        "a file without a suffix is read as one JSON document, and this file looks like JSONL "
        "(a JSON value on each line: line 2 starts another): give its record format (--format "
        "agentworldbench, sharegpt, openai, openhands) to read a record per line"
    ) in r.stderr


def test_a_fifo_named_jsonl_is_read_once(tmp_path, wt_env):
    """A named pipe is read once, by line: before, the session sniff read its lines and the
    import then waited for a writer that had gone (it hung)."""
    import subprocess

    fifo = tmp_path / "feed.jsonl"
    os.mkfifo(fifo)
    text = "".join(json.dumps({**chats(), "id": f"f{i}"}) + "\n" for i in range(2))
    with subprocess.Popen(["sh", "-c", f"printf '%s' '{text}' > '{fifo}'"]) as writer:
        r = subprocess.run(["worldtrace", "import", str(fifo)], capture_output=True, text=True,
                           env=wt_env, timeout=60)  # fmt: skip
        writer.wait(timeout=60)
    assert r.returncode == 0 and re.search(r"imported\s+│ openai\s+│\s+2", r.stdout), r.stderr


def wt_pipe(env, stdin, *args):
    import subprocess

    return subprocess.run(["worldtrace", *map(str, args)], input=stdin, capture_output=True, text=True, env=env)  # fmt: skip


# -- 6. a Terminus-2 call answered together with the next ----------------------------------


def terminus():
    keys = lambda cid, k: {"tool_call_id": cid, "function_name": "bash_command", "arguments": {"keystrokes": k, "duration": 0.1}}  # noqa: E731  # fmt: skip
    steps = [
        {"step_id": 1, "source": "user", "message": "Create hello.txt"},
        {"step_id": 2, "source": "agent", "message": "Analysis: do it", "reasoning_content": "think",
         "tool_calls": [keys("c1", "echo hi > hello.txt\n"), keys("c2", "cat hello.txt\n")],
         "observation": {"results": [{"content": "New Terminal Output:\n\n$ echo hi > hello.txt\n$ cat hello.txt\nhi\n$ "}]}},
        {"step_id": 3, "source": "agent", "message": "done",
         "tool_calls": [keys("c3", "ls\n")],
         "observation": {"results": [{"content": "New Terminal Output:\n\n$ ls\nhello.txt\n$ "}]}},
    ]  # fmt: skip
    return {"schema_version": "ATIF-v1.5", "session_id": "s1", "agent": {"name": "terminus-2"}, "steps": steps}  # fmt: skip


def test_a_call_answered_together_with_the_next_makes_no_turn(tmp_path, wt_env):
    f = tmp_path / "trajectory.json"
    f.write_text(json.dumps(terminus()))
    r = wt(wt_env, "import", f)
    assert r.returncode == 0, r.stderr
    assert (
        f"{f}:steps[1].tool_calls[0]: unpaired_call: no result of its own for call 'c1' "
        "(bash_command): the step's results without a source_call_id answer tool_calls[1], "
        "the last of the calls they answer; what this one printed is unknown; no turn"
    ) in r.stderr.splitlines()
    [t] = stored(wt_env)
    # before: turn 0 `echo hi > hello.txt` -> "" (trained as "printed nothing")
    assert [(x.action.text, x.observation.text) for x in t.turns] == [
        (
            'bash_command({"duration": 0.1, "keystrokes": "cat hello.txt\\n"})',
            "\n$ echo hi > hello.txt\n$ cat hello.txt\nhi\n$ ",
        ),
        ('bash_command({"duration": 0.1, "keystrokes": "ls\\n"})', "\n$ ls\nhello.txt\n$ "),
    ]
    assert t.turns[0].reasoning == "think\n\nAnalysis: do it"  # the step's, on its turn


# -- 7. JSON that is no object under a format asked for -------------------------------------


@pytest.mark.parametrize(
    "fmt,what",
    [
        ("atif", "an object with a `steps` list"),
        ("swe-agent", "an object with a `trajectory` or `history` list"),
        ("sharegpt", "an object with a `conversations` list"),
        ("agentworldbench", "an object with `prompt` and `response` lists"),
        ("openai", "an object with a `messages` list, or a list of messages"),
    ],
)
def test_a_value_that_is_no_object_is_named_under_any_format(tmp_path, wt_env, fmt, what):
    f = tmp_path / "num.json"
    f.write_text("42\n")
    r = wt(wt_env, "import", "--format", fmt, f)
    assert r.returncode == 1
    # before: `AttributeError: 'int' object has no attribute 'get'` / `TypeError: ...`
    assert f"{f}: invalid: record: expected {what}, got 42" in r.stderr.splitlines(), r.stderr


# -- 8. Responses API items named as the file has them --------------------------------------


def items(output, call_id="call_1"):
    return [
        {
            "type": "message",
            "role": "user",
            "content": [{"type": "input_text", "text": "weather?"}],
        },
        {
            "type": "function_call",
            "id": "fc_1",
            "call_id": call_id,
            "name": "get_weather",
            "arguments": "{}",
        },
        {"type": "function_call_output", "call_id": "call_1", "output": output},
    ]


def test_responses_problems_name_the_items_fields(tmp_path, wt_env):
    request = {"id": "q", "input": items("sunny")[:2], "output": [items(None)[2]]}
    lines = [items(True), items([{"type": "input_text", "text": 5}]), items("x", call_id=[]), request]  # fmt: skip
    f = tmp_path / "resp.jsonl"
    f.write_text("".join(json.dumps(x) + "\n" for x in lines))
    r = wt(wt_env, "import", f)
    said = [x.split(": ", 1)[1] for x in r.stderr.splitlines() if x.startswith(f"{f}:line")]
    assert said == [
        "invalid: [2].output: expected a string or a list of content parts, got true",
        "invalid: [2].output[0].text: expected a string, got 5",
        "invalid: [1].call_id: expected a string or a number, got []",  # before: paired by `id`
        "empty: no (action, observation) pair found",
        "unpaired_call: output[0].output: null, the answer to call 'call_1' (get_weather) is unknown; no turn",
    ], r.stderr


def test_a_file_walked_and_named_is_one_file(tmp_path, wt_env):
    """The walk and a name given agree (`_once`): a file reached through a link to its
    directory and named by its real path is read once."""
    real = tmp_path / "real"
    real.mkdir()
    (real / "a.jsonl").write_text(json.dumps(chats()) + "\n")
    os.symlink(real, tmp_path / "link")
    r = wt(wt_env, "import", tmp_path / "link", real / "a.jsonl")
    assert r.returncode == 0 and "import: 1 file(s)" in r.stdout, r.stdout
