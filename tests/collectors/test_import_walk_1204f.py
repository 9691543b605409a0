"""Found (a new user's walk through the docs, 2026-12-04 night): importing an export
directory back (an AgentWorldBench export: JSONL the importer reads) named each of the
export's manifests an error, `unrecognized: not a record of any known format`, and
`--strict` then failed the import. Worldtrace's own manifests are passed over, said.

Real parts: a processed Parquet store, the real CLI in process (CliRunner), the real
exporter and importer."""

from __future__ import annotations

import json

from worldtrace.collectors.importers import input_files, our_manifest
from worldtrace.schemas import Store, read_records

from ..pipelines.test_export_review_1203c import _mixed_store, export, run


def test_an_export_directory_imports_its_records_and_passes_over_its_manifests(tmp_path):
    s, _ = _mixed_store(tmp_path)
    awb = tmp_path / "awb"
    r = export(s, "--format", "agentworldbench", "--split", "test=0.5", "-o", str(awb))
    assert r.exit_code == 0, r.output
    manifests = sorted(awb.rglob("manifest.json"))
    assert len(manifests) == 3  # the export's, and each part's
    lines = [x for f in awb.rglob("*.jsonl") for x in f.read_text().splitlines()]

    again = Store.at(tmp_path / "again")
    r = run(again, "import", "--create", "--strict", str(awb))
    assert r.exit_code == 0, r.output
    assert "unrecognized" not in r.output
    said = [x for x in r.stderr.splitlines() if "manifest" in x]
    assert said == [
        f"import: passed over 3 manifest(s) worldtrace wrote (an export's or a processing "
        f"run's; they hold no trajectories): {', '.join(map(str, manifests))}"
    ]
    assert len(list(read_records(again.raw / "import"))) == len(lines)


def test_a_manifest_is_ours_by_its_content_not_by_its_name(tmp_path):
    """A foreign format's file may be called manifest.json: it is read as before."""
    foreign = tmp_path / "d" / "manifest.json"
    foreign.parent.mkdir()
    foreign.write_text(json.dumps([{"role": "user", "content": "hi"}]))
    ours = tmp_path / "d" / "sub" / "manifest.json"
    ours.parent.mkdir()
    ours.write_text(json.dumps({"schema_version": "1", "format": "parquet", "counts": {}}))
    assert not our_manifest(foreign) and our_manifest(ours)
    skipped: list = []
    assert input_files([tmp_path / "d"], skipped) == [foreign]
    assert skipped == [ours]
