"""Bad input never stops good data: deep nesting, NaN, empty files, huge observations,
and a disk that fills up during the import."""

from __future__ import annotations

import json
import random
import resource
import signal
import subprocess
import sys

from worldtrace.collectors.importers import ImportConfig, import_paths
from worldtrace.schemas import read_records


def chat(rid, observation="ok"):
    return {
        "id": rid,
        "messages": [
            {"role": "user", "content": "go"},
            {"role": "assistant", "tool_calls": [{"id": "a", "function": {"name": "f", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "a", "content": observation},
        ],
    }  # fmt: skip


DEEP = 100_000


def test_deep_nan_and_empty_inputs_are_located_and_the_rest_imported(tmp_path):
    d = tmp_path / "in"
    d.mkdir()
    nan_line = json.dumps(chat("nan")).replace('"ok"', "NaN")
    deep_line = '{"id": "deep", "messages": ' + "[" * DEEP + "]" * DEEP + "}"
    (d / "a.jsonl").write_text(
        "\n".join([json.dumps(chat("good-1")), deep_line, nan_line, json.dumps(chat("good-2"))])
        + "\n"
    )
    (d / "b.json").write_text("[" * DEEP + "]" * DEEP)
    (d / "c.json").write_text('{"messages": [\n  {"role": "user", "content": -Infinity}\n]}')
    (d / "d.json").write_text("")
    (d / "e.jsonl").write_text("\n  \n")
    (d / "f.json").write_text(json.dumps(chat("good-3")))
    r = import_paths([d], tmp_path / "out")
    assert r.files == 6
    assert r.imported["openai"] == 3
    assert {t.source.origin_id for t in read_records(tmp_path / "out")} == {
        "good-1",
        "good-2",
        "good-3",
    }
    where = {(p.path.rsplit("/", 1)[1], p.where, p.kind) for p in r.problems}
    assert where == {
        ("a.jsonl", "line 2", "invalid_json"),
        ("a.jsonl", "line 3", "invalid_json"),
        ("b.json", "line 1", "invalid_json"),
        ("c.json", "line 2", "invalid_json"),
        ("d.json", "", "empty_file"),
        ("e.jsonl", "", "empty_file"),
    }
    msgs = {(p.path.rsplit("/", 1)[1], p.where): p.message for p in r.problems}
    assert f"nested {DEEP + 1} levels deep" in msgs["a.jsonl", "line 2"]
    assert "NaN is not valid JSON" in msgs["a.jsonl", "line 3"]
    assert "-Infinity is not valid JSON (column 31)" in msgs["c.json", "line 2"]


def test_observation_cap(tmp_path, wt_env):
    f = tmp_path / "big.jsonl"
    f.write_text(json.dumps(chat("big", "x" * 5000)) + "\n" + json.dumps(chat("small")) + "\n")
    r = import_paths([f], tmp_path / "out", ImportConfig(max_observation_chars=1000))
    assert r.warnings["truncated_observation"] == 1 and r.imported["openai"] == 2
    got = {t.source.origin_id: t.turns[0].observation for t in read_records(tmp_path / "out")}
    assert (len(got["big"].text), got["big"].truncated) == (1000, True)
    assert (got["small"].text, got["small"].truncated) == ("ok", False)
    cli = subprocess.run(
        ["worldtrace", "import", "--max-observation-chars", "100", str(f)],
        capture_output=True,
        text=True,
        env=wt_env,
    )
    assert cli.returncode == 0, cli.stderr
    assert "truncated_observation" in cli.stdout
    [t] = [t for t in read_records(wt_env["WORLDTRACE_STORE"]) if t.source.origin_id == "big"]
    assert len(t.turns[0].observation.text) == 100


FILE_LIMIT = 150_000


def _limit_file_size():
    """Writes past FILE_LIMIT bytes fail with EFBIG, as on a full disk."""
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (FILE_LIMIT, resource.RLIM_INFINITY))


def _incompressible(rng, n):
    return "".join(rng.choice("abcdefghijklmnopqrstuvwxyz0123456789") for _ in range(n))


def test_disk_full_one_line_error_no_temp_earlier_shards_kept(tmp_path, wt_env):
    rng = random.Random(0)
    small, big = tmp_path / "small.jsonl", tmp_path / "big.jsonl"
    small.write_text("".join(json.dumps(chat(f"s{i}")) + "\n" for i in range(3)))
    big.write_text(
        "".join(json.dumps(chat(f"b{i}", _incompressible(rng, 40_000))) + "\n" for i in range(8))
    )
    run = dict(capture_output=True, text=True, env=wt_env)
    assert subprocess.run(["worldtrace", "import", str(small)], **run).returncode == 0
    r = subprocess.run(["worldtrace", "import", str(big)], preexec_fn=_limit_file_size, **run)
    dest = f"{wt_env['WORLDTRACE_STORE']}/raw/import"
    assert r.returncode == 1
    [line] = r.stderr.strip().splitlines()
    assert line.startswith(f"error: cannot write shards under {dest}:") and "too large" in line
    files = sorted(p.name for p in (tmp_path / "store" / "raw" / "import").iterdir())
    assert len(files) == 1 and not files[0].startswith(".")
    assert sorted(t.source.origin_id for t in read_records(dest)) == ["s0", "s1", "s2"]


def test_disk_full_mid_run_keeps_the_shards_already_published(tmp_path):
    """Shards roll every 1024 rows here; the disk fills on the third."""
    rng = random.Random(1)
    f = tmp_path / "mixed.jsonl"
    lines = [json.dumps(chat(f"s{i}", f"out {i}")) for i in range(2048)]
    lines += [json.dumps(chat(f"b{i}", _incompressible(rng, 40_000))) for i in range(8)]
    f.write_text("\n".join(lines) + "\n")
    out = tmp_path / "out"
    script = (
        "import sys; from worldtrace.collectors.importers import ImportConfig, ImportWriteError, import_paths\n"
        "try:\n"
        f"    import_paths([{str(f)!r}], {str(out)!r}, ImportConfig(shard_bytes=1))\n"
        "except ImportWriteError as e:\n"
        "    print(len(e.kept)); sys.exit(3)\n"
    )
    r = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        preexec_fn=_limit_file_size,
    )
    assert r.returncode == 3, r.stderr
    assert r.stdout.strip() == "2"
    assert not [p for p in out.iterdir() if p.name.startswith(".")]
    assert sum(1 for _ in read_records(out)) == 2048


def test_validate_goes_on_past_a_file_nested_too_deep(tmp_path, wt_env):
    from worldtrace.collectors.synthetic import SyntheticConfig, generate
    from worldtrace.schemas.store import write_jsonl

    deep = tmp_path / "a-deep.jsonl"
    deep.write_text('{"turns": ' + "[" * DEEP + "]" * DEEP + "}\n")
    good = write_jsonl(tmp_path / "b-good.jsonl", generate(SyntheticConfig(n=3, seed=1)))
    r = subprocess.run(
        ["worldtrace", "validate", str(deep), str(good)], capture_output=True, text=True, env=wt_env
    )
    assert r.returncode == 1
    assert r.stdout.splitlines() == [
        f"{deep}:line 1: <json>: nested {DEEP + 1} levels deep, deeper than can be parsed (column {DEEP + 10})"
    ]
    assert "3 record(s), 1 problem(s)" in r.stderr


def cli_import(env, *args):
    r = subprocess.run(
        ["worldtrace", "import", *map(str, args)], capture_output=True, text=True, env=env
    )
    return r, r.stderr.splitlines()


def stored(env):
    return list(read_records(f"{env['WORLDTRACE_STORE']}/raw/import"))


def call_chat(rid, arguments, before=(), key="messages", **extra):
    """An OpenAI record whose one tool call (messages[2] unless `before` adds messages)
    has `arguments` as given."""
    msgs = [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "go"},
        *before,
        {"role": "assistant", "tool_calls": [{"id": "a", "function": {"name": "bash", "arguments": arguments}}]},
        {"role": "tool", "tool_call_id": "a", "content": "ok"},
    ]  # fmt: skip
    return {"id": rid, key: msgs, **extra}


WANT_ARGS = "expected a JSON object or a string holding one, got"


def test_tool_arguments_of_a_wrong_type_are_reported_never_wrapped(tmp_path, wt_env):
    """`"arguments": 42` was imported as `bash({"_value": 42})` without a word; now the
    record is refused as `invalid`, naming line and field, in every importer that reads
    tool-call arguments, and the other records of the file are imported."""
    d = tmp_path / "in"
    d.mkdir()
    sharegpt = {
        "id": "sg",
        "conversations": [
            {"from": "human", "value": "find Dune"},
            {"from": "function_call", "value": json.dumps({"name": "search", "arguments": True})},
            {"from": "observation", "value": "Herbert"},
        ],
    }
    lines = [
        call_chat("good", '{"command": "ls"}'),
        call_chat("number", 42),
        # indices count the message before (a string there was passed over: now `invalid`)
        call_chat("list", [1, 2], before=[{"role": "user", "content": "and the tests"}]),
        sharegpt,
        call_chat("run", 1.5, key="traj", task_id=7, reward=1.0),
        chat("good-2"),
    ]
    (d / "chat.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    atif = {
        "schema_version": "ATIF-v1.2",
        "session_id": "s1",
        "steps": [
            {"step_id": 1, "source": "user", "message": "go"},
            {"step_id": 2, "source": "agent", "message": "run",
             "tool_calls": [{"tool_call_id": "c1", "function_name": "bash", "arguments": 42}],
             "observation": {"results": [{"source_call_id": "c1", "content": "ok"}]}},
        ],
    }  # fmt: skip
    (d / "trajectory.json").write_text(json.dumps(atif))
    r, err = cli_import(wt_env, d)
    assert r.returncode == 0, r.stderr
    chat_f = d / "chat.jsonl"
    assert err == [
        f"{chat_f}:line 2: invalid: messages[2].tool_calls[0].function.arguments: {WANT_ARGS} 42",
        f"{chat_f}:line 3: invalid: messages[3].tool_calls[0].function.arguments: {WANT_ARGS} [1, 2]",
        f"{chat_f}:line 4: invalid: conversations[1].value.arguments: {WANT_ARGS} true",
        f"{chat_f}:line 5: invalid: traj[2].tool_calls[0].function.arguments: {WANT_ARGS} 1.5",
        f"{d / 'trajectory.json'}: invalid: steps[1].tool_calls[0].arguments: {WANT_ARGS} 42",
    ]
    trajs = stored(wt_env)
    assert sorted(t.source.origin_id for t in trajs) == ["good", "good-2"]
    assert not [x for t in trajs for x in t.turns if "_value" in x.action.text]
    r, _ = cli_import(wt_env, "--strict", d)
    assert r.returncode == 1


def test_a_field_of_the_wrong_type_is_named(tmp_path, wt_env):
    """`"messages": "not a list"` was `unrecognized: not a record of any known format`.
    A record that carries a format's own key is reported on that key's field; a record
    without one stays unrecognized, and none of them is imported on that evidence."""
    f = tmp_path / "chat.jsonl"
    lines = [
        chat("ok"),
        {"id": "s", "messages": "not a list"},
        {"id": "r", "task_id": 3, "reward": 0.0, "traj": {"role": "user"}},
        {"id": "c", "conversations": 5},
        {"id": "m", "messages": [{"from": "human", "value": "hi"}]},
        {"hello": 1},
        {"id": "t", "traj": "a bare traj key is no evidence"},
        {"id": "w", "task": "agentworld/terminal", "prompt": "ls", "response": ["a b"]},
    ]
    f.write_text("".join(json.dumps(x) + "\n" for x in lines))
    r, err = cli_import(wt_env, f)
    assert r.returncode == 0, r.stderr
    assert err == [
        f'{f}:line 2: invalid: messages: expected a list, got "not a list"'
        " (taken for openai by its `messages` key)",
        f'{f}:line 3: invalid: traj: expected a list, got {{"role": "user"}}'
        " (taken for openai by its `traj` key in a benchmark run)",
        f"{f}:line 4: invalid: conversations: expected a list, got 5"
        " (taken for sharegpt by its `conversations` key)",
        f'{f}:line 5: invalid: messages: no message has a "role" (messages[0] is'
        ' {"from": "human", "value": "hi"}) (taken for openai by its `messages` key)',
        f"{f}:line 6: unrecognized: not a record of any known format",
        f"{f}:line 7: unrecognized: not a record of any known format",
        f'{f}:line 8: invalid: prompt: expected a list, got "ls"',
    ]
    assert [t.source.origin_id for t in stored(wt_env)] == ["ok"]
    one = tmp_path / "one.jsonl"  # the format given: no evidence needed; a secret is shown redacted
    secret = "AKIA" + "Q" * 16
    one.write_text(json.dumps({"messages": "not a list"}) + "\n" + json.dumps({"traj": secret}))
    r, err = cli_import(wt_env, "--format", "openai", one)
    assert err == [
        f'{one}:line 1: invalid: messages: expected a list, got "not a list"',
        f'{one}:line 2: invalid: traj: expected a list, got "<secret:aws_access_key>"',
    ]


def test_a_truncated_line_is_called_truncated(tmp_path, wt_env):
    """`invalid_json: Invalid control character at at column 151` (json's message ends
    in "at", and ours added another) for a line cut inside a string."""
    f = tmp_path / "cut.jsonl"
    whole = json.dumps({"id": "cut", "messages": [{"role": "user", "content": "x" * 300}]})
    tab = '{"id": "tab", "content": "a\tb"}'
    lines = [
        json.dumps(chat("good-1")),
        whole[:150],  # cut inside a string, the line's newline follows
        '{"id": "open", "messages": [',
        tab,  # a raw tab inside a string, not at the end: not a truncation
        '{"a": }',
        json.dumps(chat("good-2")),
        whole[:90],  # the last line, cut with no newline after it
    ]
    f.write_text("\n".join(lines))
    g = tmp_path / "cut.json"
    g.write_text('{"messages": [\n  {"role": "user", "content": "abc')
    r, err = cli_import(wt_env, f, g)
    assert r.returncode == 0, r.stderr
    assert err == [
        f"{f}:line 2: invalid_json: unterminated string at column 151 (the line may be truncated)",
        f"{f}:line 3: invalid_json: unexpected end at column 29 (the line may be truncated)",
        f"{f}:line 4: invalid_json: invalid control character '\\t' at column {tab.index(chr(9)) + 1}",
        f"{f}:line 5: invalid_json: expecting value at column 7",
        f"{f}:line 7: invalid_json: unterminated string at column 91 (the line may be truncated)",
        f"{g}:line 2: invalid_json: unterminated string at column 35 (the file may be truncated)",
    ]
    assert sorted(t.source.origin_id for t in stored(wt_env)) == ["good-1", "good-2"]


def test_every_cut_of_a_line_is_reported_as_truncated(tmp_path):
    """Whatever token a line is cut in (a string, an escape, a number's fraction or
    exponent, null/true/false, between tokens), it is called truncated, and the lines
    around it are imported."""
    rec = chat("tokens", 'say "hi"\t\\ \u00e9\U0001f600')
    rec["messages"][0].update(weight=-1.5e-30, seen=True, hidden=False, note=None)
    line = json.dumps(rec, ensure_ascii=True)
    assert "\\ud83d\\ude00" in line and "-1.5e-30" in line
    f = tmp_path / "cuts.jsonl"
    f.write_text("".join(line[:cut] + "\n" for cut in range(1, len(line))) + line + "\n")
    r = import_paths([f], tmp_path / "out")
    assert r.imported["openai"] == 1 and r.errors["invalid_json"] == len(line) - 1
    off = [p.message for p in r.problems if not p.message.endswith("(the line may be truncated)")]
    assert off == []
    # the line ends `\ude00"}]}`: cut in the escape, then after the string closed
    assert [p.message for p in r.problems[-4:]] == [
        f"{what} at column {len(line) - k + 1} (the line may be truncated)"
        for k, what in zip(
            (4, 3, 2, 1), ["unterminated string"] + ["unexpected end"] * 3, strict=True
        )
    ]


def test_whole_file_formats_name_a_field_of_the_wrong_type(tmp_path, wt_env):
    """A file's `steps` or `messages` that is no list was `missing_field: no ... list` as
    if absent, and ATIF tool calls that are no list broke the parser with an
    AttributeError; each is now `invalid` on its field."""
    d = tmp_path / "in"
    d.mkdir()
    atif = {"schema_version": "ATIF-v1.2", "session_id": "s"}
    step = {"step_id": 1, "source": "agent", "message": "run", "tool_calls": {"a": 1}}
    (d / "a-steps.json").write_text(json.dumps({**atif, "steps": "none"}))
    (d / "b-calls.json").write_text(json.dumps({**atif, "steps": [{"source": "user"}, step]}))
    mini = {"trajectory_format": "mini-swe-agent-1", "messages": {"role": "user"}}
    (d / "c.traj.json").write_text(json.dumps(mini))
    r, err = cli_import(wt_env, d)
    assert r.returncode == 1  # nothing imported
    assert err == [
        f'{d / "a-steps.json"}: invalid: steps: expected a list, got "none"',
        f'{d / "b-calls.json"}: invalid: steps[1].tool_calls: expected a list, got {{"a": 1}}',
        f'{d / "c.traj.json"}: invalid: messages: expected a list, got {{"role": "user"}}',
    ]


def test_a_secret_in_what_a_problem_quotes_is_redacted(tmp_path, wt_env):
    """Every problem's message is redacted where it is made: a warning quoting an
    unpaired call's id and name printed an AWS key that the record itself (imported,
    and redacted) no longer held."""
    secret = "AKIA" + "Q" * 16
    f = tmp_path / "leak.jsonl"
    call = {"id": secret, "function": {"name": secret, "arguments": "{}"}}
    ok = {"id": "c0", "function": {"name": "ls", "arguments": "{}"}}  # a turn: imported
    msgs = [{"role": "user", "content": "x"}, {"role": "assistant", "tool_calls": [ok]},
            {"role": "tool", "tool_call_id": "c0", "content": "a"},
            {"role": "assistant", "tool_calls": [call]}]  # fmt: skip
    f.write_text(json.dumps({"messages": msgs}) + "\n")
    r, err = cli_import(wt_env, f)
    assert r.returncode == 0, r.stderr
    assert err == [
        f"{f}:line 1: unpaired_call: no result for call '<secret:aws_access_key>'"
        " (<secret:aws_access_key>); no turn",
    ]
    assert secret not in r.stdout + r.stderr
