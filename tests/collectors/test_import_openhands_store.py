"""OpenHands' file store: a conversation persisted as one JSON file per event,
`<file_store>/sessions/<sid>/events/<id>.json` (EventStream.add_event writes
`event_to_dict(event)` there), with `metadata.json` beside it and, since the paged cache,
`event_cache/<start>-<start + 25>.json` holding a copy of 25 events. Fixtures built here
in that shape."""

from __future__ import annotations

import json
import subprocess

from worldtrace.collectors.importers import ImportConfig, import_paths
from worldtrace.schemas import read_records, validate_dict


def _ts(n):
    return f"2025-06-01T{9 + n // 3600:02d}:{n // 60 % 60:02d}:{n % 60:02d}.000000"


def _call(cid, name, args):
    """tool_call_metadata as OpenHands serializes it (the model's response)."""
    fn = {"name": name, "arguments": json.dumps(args)}
    return {
        "function_name": name,
        "tool_call_id": cid,
        "model_response": {
            "id": "resp",
            "model": "claude-sonnet-4",
            "choices": [
                {
                    "index": 0,
                    "message": {
                        "role": "assistant",
                        "content": "",
                        "tool_calls": [{"id": cid, "type": "function", "function": fn}],
                    },
                }
            ],
        },
        "total_calls_in_response": 1,
    }


def _run(i, command):
    return {
        "id": i,
        "timestamp": _ts(i),
        "source": "agent",
        "message": f"Running command: {command}",
        "action": "run",
        "tool_call_metadata": _call(f"toolu_{i}", "execute_bash", {"command": command}),
        "args": {
            "command": command,
            "is_input": False,
            "thought": f"step {i}",
            "blocking": False,
            "hidden": False,
            "confirmation_state": "confirmed",
        },
    }


def _ran(i, cause, output):
    return {
        "id": i,
        "timestamp": _ts(i),
        "source": "agent",
        "message": "Command executed.",
        "cause": cause,
        "observation": "run",
        "content": output,
        "extras": {
            "command": "",
            "metadata": {"exit_code": 0, "pid": -1, "working_dir": "/workspace", "suffix": ""},
            "hidden": False,
        },
        "success": True,
    }


def events(commands, task="Count the files"):
    """A conversation: the user's task, a state change, then each command and its output
    (the last two commands' outputs arrive in reverse order: paired by `cause`), then
    finish."""
    evs = [
        {
            "id": 0,
            "timestamp": _ts(0),
            "source": "user",
            "message": task,
            "action": "message",
            "args": {"content": task, "image_urls": None, "wait_for_response": False},
        },
        {
            "id": 1,
            "timestamp": _ts(1),
            "source": "environment",
            "message": "",
            "observation": "agent_state_changed",
            "content": "",
            "extras": {"agent_state": "running", "reason": ""},
        },
    ]
    *first, a, b = commands
    for cmd in first:
        n = len(evs)
        evs += [_run(n, cmd), _ran(n + 1, n, f"out of {cmd}")]
    n = len(evs)
    evs += [
        _run(n, a),
        _run(n + 1, b),
        _ran(n + 2, n + 1, f"out of {b}"),
        _ran(n + 3, n, f"out of {a}"),
    ]
    n = len(evs)
    evs.append(
        {
            "id": n,
            "timestamp": _ts(n),
            "source": "agent",
            "message": "All done.",
            "action": "finish",
            "args": {"outputs": {}, "thought": "", "final_thought": "All done."},
        }
    )
    return evs


def write_session(root, sid, evs, metadata=None):
    """`root/sessions/sid/events/<id>.json`, one file per event (as EventStream writes)."""
    d = root / "sessions" / sid
    (d / "events").mkdir(parents=True)
    for e in evs:
        (d / "events" / f"{e['id']}.json").write_text(json.dumps(e))
    if metadata is not None:
        (d / "metadata.json").write_text(json.dumps(metadata))
    return d


def imported(paths, out):
    r = import_paths(paths, out, ImportConfig(workers=1))
    return r, sorted(read_records(out), key=lambda t: t.source.origin_id) if r.shards else []


COMMANDS = [f"echo {i}" for i in range(7)]  # 2 + 2*7 + 1 = 17 event files, ids 0-16


def test_session_dir_imports_as_one_trajectory_in_numeric_order(tmp_path, wt_env):
    evs = events(COMMANDS)
    assert len(evs) > 12  # 10.json .. 18.json sort before 2.json lexically
    meta = {
        "conversation_id": "abc123",
        "selected_repository": "acme/calc",
        "title": "Count the files",
        "created_at": "2025-06-01T09:00:00Z",
        "llm_model": "anthropic/claude-sonnet-4",
    }
    session = write_session(tmp_path / "store-files", "abc123", evs, meta)
    r = subprocess.run(
        ["worldtrace", "import", str(session)], capture_output=True, text=True, env=wt_env
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert "unrecognized" not in r.stdout + r.stderr
    [t] = list(read_records(f"{wt_env['WORLDTRACE_STORE']}/raw/import"))
    assert validate_dict(t.to_dict()) == []
    assert (t.source.origin_format, t.source.origin_id) == ("openhands", "abc123")
    assert t.source.origin_path.startswith(str(session.resolve()))
    assert [x.action.text for x in t.turns] == COMMANDS  # numeric order, not 10.json < 2.json
    assert [x.observation.text for x in t.turns] == [f"out of {c}" for c in COMMANDS]
    assert [x.reasoning for x in t.turns] == [f"step {n}" for n in (2, 4, 6, 8, 10, 12, 13)]
    assert t.task.instruction == "Count the files"
    assert t.metadata["final_thought"] == "All done."
    assert t.metadata["conversation_title"] == "Count the files"
    assert t.metadata["selected_repository"] == "acme/calc"
    # its events directory names the same session: the same record, already present
    r = subprocess.run(
        ["worldtrace", "import", str(session / "events")],
        capture_output=True,
        text=True,
        env=wt_env,
    )
    assert r.returncode == 0 and "already present" in r.stdout, r.stdout + r.stderr


def test_parent_dir_with_two_sessions_gives_two_trajectories(tmp_path):
    root = tmp_path / "file_store"
    write_session(root, "s-one", events(["ls", "pwd", "whoami"], task="one"))
    write_session(root, "s-two", events(["date", "uptime"], task="two"), {"title": "second"})
    r, ts = imported([root], tmp_path / "out")
    assert r.imported["openhands"] == 2 and not r.errors and not r.warnings, r.problems
    assert [(t.source.origin_id, t.task.instruction) for t in ts] == [
        ("s-one", "one"),
        ("s-two", "two"),
    ]
    assert [[x.action.text for x in t.turns] for t in ts] == [["ls", "pwd", "whoami"], ["date", "uptime"]]  # fmt: skip
    assert all(validate_dict(t.to_dict()) == [] for t in ts)


def test_malformed_event_file_is_named_and_costs_only_itself(tmp_path):
    evs = events(COMMANDS)
    session = write_session(tmp_path / "fs", "bad", evs)
    ev = session / "events"
    bad = dict(evs[4], args="echo 1")  # the run of `echo 1`: args not an object
    (ev / "4.json").write_text(json.dumps(bad))
    (ev / "9.json").write_text(json.dumps(evs[9])[:40])  # cut short: not JSON
    r, [t] = imported([session], tmp_path / "out")
    assert r.imported["openhands"] == 1
    problems = {(p.path, p.kind): p.message for p in r.problems}
    assert problems[(str(ev / "4.json"), "invalid")] == 'args: expected an object, got "echo 1"'
    assert "unterminated string" in problems[(str(ev / "9.json"), "invalid_json")]
    assert problems[(str(ev), "missing_event")].startswith("event 9 of 0-16 is missing")
    assert "unrecognized" not in r.errors
    # echo 1's action is lost, its output stays unclaimed (reported); 9.json held the
    # output of `echo 3` (event 8): nothing answers it, no turn; nothing else is lost
    assert [x.action.text for x in t.turns] == [
        c for c in COMMANDS if c not in ("echo 1", "echo 3")
    ]
    assert [x.observation.text for x in t.turns] == [f"out of {x.action.text}" for x in t.turns]


def test_cache_pages_do_not_double_events(tmp_path):
    commands = [f"echo {i}" for i in range(14)]  # 2 + 2*14 + 1 = 31 events: one full page
    evs = events(commands)
    session = write_session(tmp_path / "fs", "cached", evs)
    (session / "event_cache").mkdir()
    (session / "event_cache" / "0-25.json").write_text(json.dumps(evs[:25]))
    (session / "events" / "7.json").unlink()  # the page still holds event 7
    r, ts = imported([session], tmp_path / "out")
    assert r.imported["openhands"] == 1 and not r.errors and not r.warnings, r.problems
    [t] = ts
    assert [x.action.text for x in t.turns] == commands
    assert [x.observation.text for x in t.turns] == [f"out of {c}" for c in commands]


def test_gap_in_event_ids_is_reported(tmp_path):
    evs = events(COMMANDS)
    session = write_session(tmp_path / "fs", "gap", evs)
    (session / "events" / "9.json").unlink()  # the output of `echo 3` (event 8)
    (session / "events" / "10.json").unlink()  # `echo 4`; its output (11) is still there
    r, [t] = imported([session / "events"], tmp_path / "out")
    got = [(p.path, p.kind, p.fatal, p.message) for p in r.problems]
    assert got == [
        (
            str(session / "events"),
            "missing_event",
            False,
            "events 9-10 of 0-16 are missing (no event file the import reads, no event_cache "
            "page holds them); the session is imported without them",
        ),
        (
            str(session),
            "unpaired_call",
            False,
            "events/8.json: no observation for the agent's 'run' action (id 8); no turn",
        ),
        (
            str(session),
            "message_not_imported",
            False,
            "events/11.json: a 'run' observation that answers no agent action; not imported",
        ),
    ]
    # `echo 3` is not answered by the output of the lost `echo 4`: no turn
    assert [x.action.text for x in t.turns] == [
        c for c in COMMANDS if c not in ("echo 3", "echo 4")
    ]
    assert [x.observation.text for x in t.turns] == [f"out of {x.action.text}" for x in t.turns]


def test_one_event_file_named_alone_imports_its_session(tmp_path):
    """A file of a session named on its own (a later event file, metadata.json) stands for
    the session: it imported nothing and said nothing."""
    session = write_session(tmp_path / "fs", "abc", events(COMMANDS), {"title": "t"})
    r, [t] = imported([session / "events" / "7.json"], tmp_path / "out")
    assert r.imported["openhands"] == 1 and not r.errors and not r.warnings, r.problems
    assert [x.action.text for x in t.turns] == COMMANDS
    # two files of one session named together: still one trajectory
    r, ts = imported([session / "metadata.json", session / "events" / "3.json"], tmp_path / "o2")
    assert r.imported["openhands"] == 1 and len(ts) == 1
