"""Found (a new user's import session, 2026-12-04 evening): an AgentWorldBench export
imported again made its generated records real: the lines carried nothing of where they
came from, the import said `source.kind = import`, and a second export no longer
warned. Each line now says its trajectory and whether it was generated (a key the
evaluation does not read), and the importer keeps a generated one synthetic.
Real parts: Parquet stores, the real CLI in process (CliRunner), the real importer."""

from __future__ import annotations

import json

from worldtrace.collectors.importers import import_paths
from worldtrace.schemas import Store, read_records

from .test_export_review_1203c import _mixed_store, export, run


def test_an_exported_generated_record_stays_synthetic_when_imported_again(tmp_path):
    s, synthetic = _mixed_store(tmp_path)
    awb = tmp_path / "awb"
    r = export(s, "--format", "agentworldbench", "-o", str(awb))
    assert r.exit_code == 0, r.output
    lines = [json.loads(x) for f in awb.glob("*.jsonl") for x in f.read_text().splitlines()]
    for line in lines:
        tid = line["id"].split("/")[0]
        ours = line["worldtrace"]
        assert (ours["trajectory_id"], ours["synthetic"]) == (tid, tid in synthetic)
        assert len(ours["kinds"]) == len(line["prompt"]) and isinstance(ours["system"], dict)

    again = Store.at(tmp_path / "again")
    report = import_paths([awb], again.raw / "import")
    generated = sum(line["worldtrace"]["synthetic"] for line in lines)
    assert 0 < generated < len(lines) and report.warnings["synthetic_source"] == generated
    got = list(read_records(again.raw / "import"))
    assert len(got) == len(lines)
    kinds = {t.metadata["exported_from"]: t.source.kind for t in got}
    assert kinds == {tid: "synthetic" if tid in synthetic else "collector" for tid in kinds}

    assert run(again, "process").exit_code == 0
    r = export(again, "--format", "agentworldbench", "-o", str(tmp_path / "awb2"))
    assert r.exit_code == 0, r.output
    m = json.loads((tmp_path / "awb2" / "manifest.json").read_text())
    assert m["counts"]["synthetic_samples"] > 0  # still said, a round trip later
    assert "come from synthetic records" in r.stderr


def test_a_provenance_of_the_wrong_shape_is_invalid_naming_it(tmp_path):
    line = {"id": "x/1", "task": "worldtrace/terminal", "system_str": "", "prompt": ["ls\n"],
            "response": ["a\n"], "turn_idx": 1, "worldtrace": {"synthetic": "yes"}}  # fmt: skip
    src = tmp_path / "terminal_test.jsonl"
    src.write_text(json.dumps(line) + "\n")
    report = import_paths([src], tmp_path / "out")
    [p] = [p for p in report.problems if p.kind == "invalid"]
    assert p.message.startswith(
        'worldtrace: expected an object {"trajectory_id", "synthetic": bool}'
    )


def test_a_record_part_of_the_wrong_shape_is_invalid_naming_it(tmp_path):
    """The record's parts a line's `worldtrace` key holds (12-06), checked as any field."""
    base = {"id": "x/1", "task": "worldtrace/terminal", "system_str": "", "prompt": ["ls\n", "pwd\n"],
            "response": ["a\n", "/\n"], "turn_idx": 1}  # fmt: skip
    ours = {"trajectory_id": "x", "synthetic": False, "kinds": ["keystrokes"] * 2, "system": {}}
    cases = {
        "kinds": ({**ours, "kinds": ["keystrokes"]}, "worldtrace.kinds: expected a list of 2"),
        "kind": ({**ours, "kinds": ["keystrokes", "mouse"]}, "worldtrace.kinds[1]: expected an action kind"),
        "part": ({**ours, "system": {"task": "x"}}, "worldtrace.system: expected parts of"),
        "value": ({**ours, "system": {"initial_state": 3}}, "worldtrace.system.initial_state: expected a string"),
    }  # fmt: skip
    for case, (value, said) in cases.items():
        src = tmp_path / case / "terminal_test.jsonl"
        src.parent.mkdir()
        src.write_text(json.dumps({**base, "worldtrace": value}) + "\n")
        report = import_paths([src], tmp_path / case / "out")
        [p] = [p for p in report.problems if p.kind == "invalid"]
        assert p.message.startswith(said), (case, p.message)
    src = tmp_path / "good" / "terminal_test.jsonl"  # the same line, well made: imported
    src.parent.mkdir()
    src.write_text(json.dumps({**base, "worldtrace": ours}) + "\n")
    assert not import_paths([src], tmp_path / "good" / "out").problems
