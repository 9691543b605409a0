"""Found (a new user's import session, 2026-12-04 evening): a timestamp that leaves the
years 1-9999 once in UTC was imported (and `report` then failed on it); a declared tool's
schema or a call's id of the wrong type was refused as Python's own error text, or
silently became an empty schema; two imports side by side stored every record twice."""

from __future__ import annotations

import json

import pytest
from worldtrace.collectors.importers import import_paths
from worldtrace.schemas import read_records
from worldtrace.schemas.tempfiles import try_lock

from .conftest import found, import_written
from .test_import_value_types import CALL, USER_STEP, atif, atif_call, chat


@pytest.mark.parametrize(
    "stamp", ["9999-12-31T23:59:59-14:00", "0001-01-01T00:00:00+14:00"], ids=["10000", "0"]
)
def test_a_timestamp_outside_years_1_9999_in_utc_is_invalid_naming_it(tmp_path, stamp):
    step = {**atif_call(2, "out"), "timestamp": stamp}
    r, got = import_written(tmp_path, "trajectory.json", atif([USER_STEP, step]))
    assert not got
    assert found(r, "invalid") == [
        ("", f'steps[1].timestamp: expected a timestamp between years 1 and 9999 in UTC, '
             f'got "{stamp}"')
    ]  # fmt: skip
    ok = {**atif_call(2, "out"), "timestamp": "9999-12-31T09:59:59-14:00"}  # 23:59:59 UTC
    r, got = import_written(tmp_path / "ok", "trajectory.json", atif([USER_STEP, ok]))
    assert len(got) == 1 and not found(r, "invalid")


def tool(parameters, **fields):
    return {"type": "function", "function": {"name": "bash", "parameters": parameters, **fields}}


def test_a_tool_schema_of_the_wrong_type_is_invalid_naming_the_field(tmp_path):
    records = [
        chat("str", tools=[tool("x")]),
        chat("int", tools=[tool(5)]),
        chat("list", tools=[tool([1, 2])]),
        chat("blank", tools=[tool("")]),  # was an empty schema, silently
        chat("empty-list", tools=[tool([])]),  # the same
        chat("second", tools=[tool({}), {"name": "grep", "inputSchema": "nope"}]),
        chat("description", tools=[tool({}, description=["a"])]),
        chat("json", tools=[tool('{"type": "object", "properties": {"command": {}}}')]),
        chat("empty-json", tools=[tool("{}")]),
    ]
    r, got = import_written(tmp_path, "tools.jsonl", records, lines=True)
    field = "tools[0].function.parameters: expected an object (or a JSON string holding one)"
    assert found(r, "invalid") == [
        ("line 1", f'{field}, got "x"'),
        ("line 2", f"{field}, got 5"),
        ("line 3", f"{field}, got [1, 2]"),
        ("line 4", f'{field}, got ""'),
        ("line 5", f"{field}, got []"),
        ("line 6", 'tools[1].inputSchema: expected an object (or a JSON string holding one), '
                   'got "nope"'),
        ("line 7", 'tools[0].function.description: expected a string, got ["a"]'),
    ]  # fmt: skip
    assert set(got) == {"json", "empty-json"}  # a JSON string holding the schema, as datasets
    [spec] = json.loads(got["json"].system.action_space)
    assert spec["input_schema"] == {"type": "object", "properties": {"command": {}}}


def test_a_call_or_result_id_of_the_wrong_type_is_invalid_naming_the_field(tmp_path):
    def with_id(rid, value, result=False):
        rec = chat(rid)
        if result:
            rec["messages"][2]["tool_call_id"] = value
        else:
            rec["messages"][1]["tool_calls"] = [{**CALL, "id": value}]
        return rec

    records = [
        with_id("list", []),
        with_id("object", {}),
        with_id("bool", True),
        with_id("result", ["c0"], result=True),
        with_id("number", 7),  # documented: a number is an id
    ]
    r, got = import_written(tmp_path, "ids.jsonl", records, lines=True)
    at = "messages[1].tool_calls[0].id: expected a string or a number, got"
    assert found(r, "invalid") == [
        ("line 1", f"{at} []"),
        ("line 2", f"{at} {{}}"),
        ("line 3", f"{at} true"),
        ("line 4", 'messages[2].tool_call_id: expected a string or a number, got ["c0"]'),
    ]
    assert set(got) == {"number"}


def test_an_import_refuses_a_directory_another_import_is_writing(tmp_path):
    from worldtrace.collectors.importers import IMPORT_LOCK, ImportBusy

    src = tmp_path / "chats.jsonl"
    src.write_text("".join(json.dumps(chat(f"r{i}")) + "\n" for i in range(3)))
    out = tmp_path / "out"
    out.mkdir()
    held = try_lock(out / IMPORT_LOCK)  # another import's hold, as `_held` takes it
    held.write("pid 4242 on elsewhere\n")
    held.flush()
    try:
        with pytest.raises(ImportBusy, match=r"another `worldtrace import` is writing here "
                                             r"\(pid 4242 on elsewhere\)"):  # fmt: skip
            import_paths([src], out)
        assert not list(read_records(out))  # nothing written beside the other import
    finally:
        held.close()
    seen: list[bool] = []

    def progress(files, records):  # the import holds the lock while it runs
        fh = try_lock(out / IMPORT_LOCK)
        seen.append(fh is None)
        if fh is not None:
            fh.close()

    r = import_paths([src], out, progress=progress)
    assert sum(r.imported.values()) == 3 and seen and all(seen)
    assert not (out / IMPORT_LOCK).exists()  # released and removed: nothing left behind


def test_a_record_changed_since_its_import_is_said_and_a_cut_is_listed(tmp_path):
    from worldtrace.collectors.importers import ImportConfig

    src, out = tmp_path / "chats.jsonl", tmp_path / "out"
    records = [chat("a"), chat("b")]
    src.write_text("".join(json.dumps(r) + "\n" for r in records))
    import_paths([src], out)
    records[1]["messages"][2]["content"] = "a.txt\nb.txt"  # the same record, edited
    src.write_text("".join(json.dumps(r) + "\n" for r in records))
    r = import_paths([src], out)
    assert r.imported["openai"] == 1 and r.present["openai"] == 1
    [(where, message)] = found(r, "record_changed")
    assert where == "line 2" and message.startswith("changed since it was imported (as ")
    assert sum(t.source.origin_id == "b" for t in read_records(out)) == 2  # as documented

    big = tmp_path / "big.jsonl"
    big.write_text(json.dumps(chat("big", {"content": "x" * 5000})) + "\n")
    r = import_paths([big], tmp_path / "out2", ImportConfig(max_observation_chars=1000))
    assert r.warnings["truncated_observation"] == 1
    assert found(r, "truncated_observation") == [
        ("line 1", "1 observation(s) longer than 1000 characters cut to it "
                   "(observation.truncated; --max-observation-chars)")
    ]  # fmt: skip


def test_a_blank_id_names_the_record_by_its_file_and_line(tmp_path):
    _, got = import_written(tmp_path, "blank.jsonl", [chat(""), chat("  ")], lines=True)
    assert "" not in got and "  " not in got
    assert sorted(got) == ["blank:1", "blank:2"]


def test_a_number_too_large_inside_an_arguments_string_is_kept_as_written(tmp_path):
    """Found: `NaN` in a call's arguments string was kept as the model's text (`_raw`,
    documented) while `1e400` there refused the whole record (`invalid`): both are text
    that is no JSON, the model's own output."""
    records = []
    for rid, text in (("nan", '{"x": NaN}'), ("big", '{"x": 1e400}'), ("fine", '{"x": 1.5}')):
        rec = chat(rid)
        rec["messages"][1]["tool_calls"] = [{**CALL, "function": {"name": "bash",
                                                                   "arguments": text}}]  # fmt: skip
        records.append(rec)
    r, got = import_written(tmp_path, "args.jsonl", records, lines=True)
    assert not found(r, "invalid") and set(got) == {"nan", "big", "fine"}
    args = {rid: json.loads(t.turns[0].action.arguments_json) for rid, t in got.items()}
    assert args == {"nan": {"_raw": '{"x": NaN}'}, "big": {"_raw": '{"x": 1e400}'},
                    "fine": {"x": 1.5}}  # fmt: skip
