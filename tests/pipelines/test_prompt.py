"""The world-model system prompt: five parts, per-domain instructions, readable action space."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from worldtrace.pipelines.export import ExportConfig, export
from worldtrace.pipelines.prompt import (
    SystemPrompt,
    action_space_text,
    builtin_instructions,
    conditions_text,
    load_instructions,
)
from worldtrace.pipelines.tokens import default_tokenizer, load_tokenizer
from worldtrace.schemas import fields as F
from worldtrace.schemas.arrow import to_batch
from worldtrace.schemas.records import Action, Observation, System, Trajectory, Turn

SCHEMA_TOOLS = [
    {
        "name": "read_file",
        "description": "Read a file of the repository.",
        "input_schema": {
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "Path from the repository root."},
                "limit": {"type": "integer", "default": 100},
                "mode": {"type": "string", "enum": ["text", "bytes"]},
                "lines": {"type": "array", "items": {"type": "integer"}},
            },
            "required": ["path"],
        },
    },
    {
        "name": "list",
        "description": "List the folder.",
        "input_schema": {"type": "object", "properties": {}},
    },
]


def test_action_space_from_json_schema_tools():
    text = action_space_text(json.dumps(SCHEMA_TOOLS))
    assert text.splitlines()[:7] == [
        "## read_file",
        "Read a file of the repository.",
        "Arguments:",
        "- path (string, required): Path from the repository root.",
        "- limit (integer): default 100",
        '- mode (string): one of "text", "bytes"',
        "- lines (array of integer)",
    ]
    assert "## list\nList the folder.\nArguments: none" in text
    assert "input_schema" not in text and "{" not in text


def test_action_space_from_older_and_openai_shapes():
    older = [{"name": "search", "description": "Web search.", "parameters": {
        "type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}}]  # fmt: skip
    assert action_space_text(json.dumps(older)) == (
        "## search\nWeb search.\nArguments:\n- query (string, required)"
    )
    openai = [{"type": "function", "function": older[0]}]
    assert action_space_text(openai) == action_space_text(json.dumps(older))
    assert action_space_text(json.dumps([{"name": "read"}])) == "## read"  # name only
    assert action_space_text("type keys into the terminal") == "type keys into the terminal"
    legacy_map = [{"name": "click", "parameters": {"bid": "element id"}}]
    assert "- bid (any): element id" in action_space_text(legacy_map)


def test_conditions_are_stated():
    text = conditions_text(
        json.dumps(["the disk is full", {"network": "offline", "latency_ms": 800}])
    )
    assert text.splitlines()[1:] == ["- the disk is full", "- network: offline, latency_ms: 800"]
    assert conditions_text(None) == conditions_text("[]") == ""


def record(domain="terminal", **system):
    return {
        F.DOMAIN: domain,
        F.SYSTEM: {
            "task_description": "Count the files.",
            "action_space": json.dumps(SCHEMA_TOOLS),
            "initial_state": "cwd /repo",
            "demonstrations": None,
            **system,
        },
    }


def test_five_parts_in_order_with_the_domain_instruction():
    rec = {**record(), "conditions": json.dumps(["the clock reads 2024-01-01"])}
    text = SystemPrompt().text(rec)
    heads = [
        "Count the files.",
        "# Action space",
        "# Initial state",
        "# Conditions",
        "# Simulation instruction",
    ]
    positions = [text.index(h) for h in heads]
    assert positions == sorted(positions)
    assert (
        builtin_instructions()["terminal"] in text
        and "prompt" in builtin_instructions()["terminal"]
    )
    own = SystemPrompt().text(record(simulation_instruction="Answer as a Z80 emulator."))
    assert own.endswith("# Simulation instruction\nAnswer as a Z80 emulator.")  # the record's wins
    assert (
        "bid" in builtin_instructions()["web"]
        and "view hierarchy" in builtin_instructions()["android"]
    )
    for domain, body in builtin_instructions().items():
        assert domain in F.DOMAINS and len(body.split()) > 100


def test_instructions_overridden_by_file_or_directory(tmp_path):
    f = tmp_path / "i.yaml"
    f.write_text("terminal: |\n  Predict the screen.\n")
    texts = load_instructions(str(f))
    assert (
        texts["terminal"] == "Predict the screen." and texts["web"] == builtin_instructions()["web"]
    )
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "web.md").write_text("Predict the tree.\n")
    assert load_instructions(str(tmp_path / "d"))["web"] == "Predict the tree."
    j = tmp_path / "i.json"
    j.write_text(json.dumps({"chess": "x"}))
    with pytest.raises(
        ValueError, match=r"i\.json: simulation_instructions\.chess: unknown domain"
    ):
        load_instructions(str(j))
    j.write_text(json.dumps({"web": 3}))
    with pytest.raises(ValueError, match=r"simulation_instructions\.web: expected non-empty text"):
        load_instructions(str(j))
    with pytest.raises(FileNotFoundError):
        load_instructions(str(tmp_path / "missing.yaml"))
    # found: a YAML error was PyYAML's five lines (a copy of the line, a caret)
    j.write_text('terminal: "abc\nweb: [\n')
    with pytest.raises(ValueError) as err:
        load_instructions(str(j))
    assert str(err.value) == (
        f"{j}: simulation_instructions: not YAML or JSON (line 3: found unexpected end of stream)"
    )


def test_export_renders_the_prompt_and_records_the_instructions(tmp_path):
    """An imported chat's system prompt was its first line only: now the export supplies
    the readable action space, the domain instruction and the record's conditions."""
    t = Trajectory(
        "mcp",
        turns=[
            Turn(0, Action("tool_call", 'read_file {"path": "a"}'), Observation("hello"), keep=1.0)
        ],
        system=System(task_description="Help the customer.", action_space=json.dumps(SCHEMA_TOOLS)),
    ).with_id()
    # a shard carrying the new nullable `conditions` column beside the record's fields
    table = pa.Table.from_batches([to_batch([t])])
    table = table.append_column("conditions", pa.array([json.dumps(["the server is read-only"])]))
    (tmp_path / "in").mkdir()
    pq.write_table(table, tmp_path / "in" / "part-0.parquet")
    over = tmp_path / "over.yaml"
    over.write_text("mcp: Reply with the MCP result only.\n")
    m = export(ExportConfig(input=str(tmp_path / "in"), output=str(tmp_path / "e"),
                            tokenizer=str(default_tokenizer()), simulation_instructions=str(over)))  # fmt: skip
    row = pq.read_table(next((tmp_path / "e").glob("*.parquet"))).to_pylist()[0]
    text = load_tokenizer(str(default_tokenizer())).decode(
        row["input_ids"], skip_special_tokens=False
    )
    assert "## read_file\nRead a file of the repository." in text
    assert "- the server is read-only" in text
    assert "# Simulation instruction\nReply with the MCP result only." in text
    assert m["simulation_instructions"]["source"] == str(over)
    assert len(m["simulation_instructions"]["sha256"]) == len(F.DOMAINS)


def test_terminal_records_of_commands_are_told_how_a_command_is_answered(tmp_path):
    """Found: an imported chat whose only tool is `bash` is a terminal record, and its
    prompt said every user message is keystrokes answered with the screen and the next
    shell prompt, while its turns are `bash({"command": ...})` answered by the output
    alone."""
    from worldtrace.collectors.importers import parse_file

    f = tmp_path / "chat.jsonl"
    call = {
        "id": "c",
        "type": "function",
        "function": {"name": "bash", "arguments": '{"command": "ls"}'},
    }
    msgs = [
        {"role": "user", "content": "List the files."},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c", "content": "a.txt\n"},
    ]
    f.write_text(json.dumps({"id": "r", "messages": msgs}) + "\n")
    [t] = [t for _, t in parse_file(f)]
    assert t.domain == "terminal" and t.turns[0].action.kind == "tool_call"
    text = SystemPrompt().text(t.to_dict())
    assert "tool call that runs one" in text and "without a prompt" in text
