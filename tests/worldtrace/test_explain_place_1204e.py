"""Found (user hunt 1204d, left then): `explain` said where a record came from as
`FILE:N` with N its 0-based `origin_index`, which every reader (and editor) takes for a
line: the record on line 4 of a JSONL file was `from chats.jsonl:3`, and a JSON list's
fourth record `from list.json:3`, while `import` names them `line 4` and `record 3`."""

from __future__ import annotations

import json

from worldtrace.pipelines.process import ProcessConfig, run
from worldtrace.schemas import Store

from .test_explain_hunt_1204d import chat
from .test_query import run_cli


def explained(store: Store, origin: str) -> str:
    r = run_cli(store, "explain", origin)
    assert r.exit_code == 0, r.output
    return r.output


def test_explain_names_a_records_place_as_import_does(tmp_path):
    lines, listed = tmp_path / "chats.jsonl", tmp_path / "list.json"
    records = [chat(f"j{i}", 3) for i in range(5)] + [chat("d5", 1)]  # min_turns drops d5
    lines.write_text("".join(json.dumps(r) + "\n" for r in records))
    listed.write_text(json.dumps([chat(f"l{i}", 3) for i in range(5)]))
    store = Store.at(tmp_path / "store")
    r = run_cli(store, "import", "--create", str(lines), str(listed))
    assert r.exit_code == 0, r.output
    run(ProcessConfig(inputs=[str(store.raw)], output=str(store.processed), workers=1))
    assert f"from {lines}:line 4\n" in explained(store, "j3")
    assert f"from {listed}:record 3\n" in explained(store, "l3")
    assert f"({lines}:line 6, " in explained(store, "d5")  # a dropped record alike
    # the JSON document keeps the index as stored, and says how to read it
    doc = json.loads(run_cli(store, "explain", "j3", "--json").stdout)
    assert doc["files"] == [{"path": str(lines), "index": 3, "place": f"{lines}:line 4"}]
