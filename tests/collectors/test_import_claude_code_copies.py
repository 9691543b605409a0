"""Claude Code session files that hold copies of another's conversation
(collectors/importers/claude_code.py `superseded`): 1.0.x `claude --resume` (the copies
keep the earlier `sessionId`), `--fork-session` (2.1.112: the new `sessionId`) and
`/branch` (`forkedFrom` on each copy) write a new file that opens with the earlier
file's messages, uuids and all. Our own fixtures, in those shapes."""

from __future__ import annotations

import copy
import json
from pathlib import Path

from worldtrace.collectors.importers import ImportConfig, import_paths
from worldtrace.schemas import read_records

from .test_import_claude_code import SID, Session, shell, text, use

OLD = "0a0b0c0d-1111-4222-8333-444455556666"
BRANCH = "5e5e5e5e-7777-4888-9999-aaaabbbbcccc"


def earlier():
    """The earlier session: list the files, one answer."""
    s = Session(sid=OLD)
    s.user("List the files")
    s.say("msg_01", use("toolu_01", "Bash", command="ls"))
    s.result("toolu_01", "calc.py", tur=shell("calc.py\n"))
    s.say("msg_02", text("One file."))
    return s


def went_on(s, sid=SID):
    """`s` continued in a new session: count the lines."""
    s.sid = sid
    s.user("Count its lines")
    s.say("msg_03", use("toolu_03", "Bash", command="wc -l calc.py"))
    s.result("toolu_03", "2 calc.py", tur=shell("2 calc.py\n"))
    return s


def project(tmp_path, *sessions):
    d = tmp_path / "projects" / "-home-dev-calc"
    for sid, s in sessions:
        s.write(d / f"{sid}.jsonl")
    return d


def imported(tmp_path, *paths):
    report = import_paths(paths, tmp_path / "raw", ImportConfig(workers=1))
    trajs = [t for f in sorted((tmp_path / "raw").rglob("*.parquet")) for t in read_records(f)]
    return trajs, report.problems


def test_a_resumed_sessions_earlier_file_is_imported_once(tmp_path):
    """Found: `claude --resume` (1.0.x) copied the earlier session's lines into the new
    session's file; imported together, the earlier file was a trajectory of its own and
    its turns came again in the new one's. Now the earlier file, whose whole conversation
    the new one holds, imports nothing and says where its turns are."""
    a = earlier()
    first = copy.deepcopy(a)
    d = project(tmp_path, (OLD, first), (SID, went_on(a)))
    trajs, problems = imported(tmp_path, d)
    [t] = trajs
    assert (t.source.origin_id, t.metadata["resumed_from"]) == (SID, json.dumps([OLD]))
    assert [x.action.text for x in t.turns] == ["ls", "One file.", "wc -l calc.py"]
    [p] = problems
    assert (p.kind, Path(p.path).name) == ("message_not_imported", f"{OLD}.jsonl")
    assert f"{SID}.jsonl" in p.message


def test_each_file_named_alone_is_imported(tmp_path):
    """Only the files of one run count: the earlier file named alone is imported, and so
    is the new one."""
    a = earlier()
    d = project(tmp_path, (OLD, copy.deepcopy(a)), (SID, went_on(a)))
    trajs, problems = imported(tmp_path, d / f"{OLD}.jsonl")
    assert [t.source.origin_id for t in trajs] == [OLD] and problems == []
    trajs, problems = imported(tmp_path / "again", d / f"{SID}.jsonl")
    assert [t.source.origin_id for t in trajs] == [SID] and problems == []


def test_a_conversation_that_went_on_after_the_copy_is_kept(tmp_path):
    """A branch (`/branch`: each copy marked `forkedFrom`) taken before the earlier
    conversation's end does not hold all of it: both files are imported."""
    a = earlier()
    branch = copy.deepcopy(a)
    branch.lines = [dict(x, forkedFrom={"sessionId": OLD, "messageUuid": x["uuid"]})
                    for x in branch.lines[:3]]  # fmt: skip
    branch.last = branch.lines[-1]["uuid"]
    branch.sid = BRANCH
    branch.say("msg_09", use("toolu_09", "Bash", command="ls -la"))
    branch.result("toolu_09", "calc.py", tur=shell("-rw-r--r-- 1 dev dev 40 calc.py\n"))
    d = project(tmp_path, (OLD, a), (BRANCH, branch))
    trajs, problems = imported(tmp_path, d)
    assert sorted(t.source.origin_id for t in trajs) == sorted([OLD, BRANCH])
    assert [p.kind for p in problems if p.kind == "message_not_imported"] == []


def test_two_equal_copies_keep_one(tmp_path):
    """Two files holding the same conversation (a session copied with --fork-session and
    not continued): one of them is imported, never neither."""
    a = earlier()
    b = copy.deepcopy(a)
    for x in b.lines:
        x["sessionId"] = BRANCH  # 2.1.112 --fork-session: the copies carry the new id
    d = project(tmp_path, (OLD, a), (BRANCH, b))
    trajs, problems = imported(tmp_path, d)
    assert len(trajs) == 1 and [p.kind for p in problems] == ["message_not_imported"]
