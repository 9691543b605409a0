"""Claude Code session transcripts: `~/.claude/projects/<project-dir>/<sessionId>.jsonl`,
one JSON event a line, read as one file (a session), not line by line.

An event is `{type, uuid, parentUuid, sessionId, timestamp, cwd, gitBranch, version,
isSidechain, isMeta, message: {role, content, model, id}, toolUseResult, requestId}`;
`type` user or assistant is a message, the rest (`summary`, `system`, `attachment`,
`progress`, `file-history-snapshot`, `queue-operation`, titles ...) is Claude Code's
bookkeeping and is skipped (an unknown type is reported, `message_not_imported`).
Claude Code writes each content block of a response as its own `assistant` event (one
`message.id`), and each tool result as a `user` event.

The conversation is the `parentUuid` chain that reaches the file's last message (after a
rewind or an edited prompt the new branch is the live one; the left branches are reported,
`message_not_imported`, never mixed in). Its order is the file's (the write order). A
`compact_boundary` continues its `logicalParentUuid`; an event whose parent is in no line
of the file (a line that could not be read) continues the event written before it.
Siblings the chain does not pass through but that belong to its steps are kept: the
other content blocks of a response on the chain (same `message.id`, parallel tool calls)
and the `tool_result` of a call on the chain (Claude Code records a result that lags
behind the next call as that call's sibling). One trajectory per conversation, origin id
its last message's `sessionId`: a resumed session's file holds the earlier session's
lines (copied, with their own `sessionId`) before its own, all on one chain; the earlier
ids go to metadata `resumed_from`. A session of the file no chain reaches (files joined
together) is a trajectory of its own (origin index: the line of its last message, 0-based;
the file's main conversation is 0). `isSidechain` events (a Task subagent's: in the
session file before 2.0.24, then in its own `agent-<id>.jsonl`) are not part of it: each
subagent (its events by `agentId`, else by the chain they are on) is a trajectory of its
own, its conversation read as the main one is (origin id `<sessionId>:<agentId>`, else
`<sessionId>:<uuid of its chain's root>`; origin index the line of its last message,
0-based; task <- its first user message, the Task prompt; metadata `parent_session`,
`agent_id`); one that makes no turn (no call, e.g. Claude Code's warmup) is reported,
`subagent_not_imported`.

A fork (a subagent started with its parent's conversation: 2.1.20 to 2.1.50 an agent
defined `forkContext: true`; the `fork` agent, 2.1.112 behind an experiment gate, 2.1.332
`subagent_type: "fork"`) opens its transcript with copies of the parent's messages (their
own uuids; insertMessageChain rewrites only isSidechain, agentId, sessionId, version and
the chain), a clone of the parent's call, then the message Claude Code starts it with
(`_fork`): a result of the call that is `FORK_NOTICE` (status `sub_agent_entered`; the
Task prompt follows), or a text block `<fork-boilerplate>...</fork-boilerplate>` + `Your
directive: <directive>` (2.1.332 writes a `fork-context-ref` line instead of the copies
when the parent is the main conversation). Its trajectory is
what follows that message: task <- the directive (or the prompt), metadata `forked`; the
copies are the parent's turns, in the parent's trajectory (nothing is lost: not reported).
Claude Code's own helper agents (`HELPERS`, id `a<label>-<16 hex>`: compaction, session
notes, /btw answers, prompt suggestions ...) work on its own state, not in the
environment (2.1.31 to 2.1.80 their transcript opens with a copy of the whole parent
conversation; session notes may edit only the session's `session-memory/summary.md`):
no trajectory, one warning each, `subagent_not_imported`.

Copies in another file: a session file that `/branch` (`/fork`) writes (each copied line
marked `forkedFrom: {sessionId, messageUuid}`), `--fork-session` (2.1.112: the copies
unmarked, the new `sessionId`) or 1.0.x `--resume` wrote (the copies keep their
`sessionId`) opens with copies of another session file's messages (same uuids). When the
new file holds the earlier one's whole conversation (it did not go on after the copy),
the earlier file imports nothing when both are in one import (`superseded`, wired in the
import run: files are parsed alone). When both went on, the copied turns are in both
trajectories. (2.1.x `--resume`/`--continue` append to the resumed session's own file: no
copies.)

Actions: each `tool_use` block {id, name, input} (`call_action`). `Bash` (and `PowerShell`)
is a `command` (its `command`; `description`, `timeout` are Claude Code's options), any
other tool a tool call `name(<input JSON>)`. The observation is the `tool_result` with its
`tool_use_id` (`_Reader.answer`): for Bash the `toolUseResult` Claude Code kept beside it
(`stdout`, `stderr`, as the shell printed them) when there is one, else the result's text;
`is_error` is honoured. Exit codes: a failed command's result starts `Exit code N` (a
failure without it has none); a command Claude Code did not call an error exited 0 (its
rule: a non-zero exit is an error, except grep/rg/find/diff/test exiting 1, recorded as
`returnCodeInterpretation`: 1). Without `toolUseResult` (older versions, one event
answering several calls) such a command's success has no exit code: 0 or 1
(`_may_exit_1`). Images are not imported (`non_text_part`); a result of images only (a
`Read` of a PNG) is no turn (`unpaired_call`, `common.no_text`). A call nothing answers is no
turn (`unpaired_call`): what the environment said is unknown.

Claude Code's own text is not the environment's answer (docs/importers.md, "Harness
text"): `<system-reminder>` blocks it appends to tool results and puts around user
messages are removed (whole blocks, at the end of a result, at either end of a user
message, or a text block of nothing else); `<tool_use_error>...</tool_use_error>` (it
refused the call before running it, or cancelled it with a failed parallel Bash call),
the user's rejection or cancel notice, a permission denial and a PreToolUse hook's block
mean the tool did not answer: no turn, `not_run`; its placeholder for a result it lost
(`[Tool result missing due to internal error]`: the tool may have run) is no turn,
`harness_failure`. A command it killed at its timeout (`Command timed out after
...`) is a timeout (`common.timed_out`); one the user interrupted while it ran
(`interrupted`, `<error>Command was aborted before completion</error>`) keeps its output
so far + `[interrupted]`, an error, no exit code, `state_json {"interrupted": true}`.
Its output cuts (`\\n\\n... [N lines truncated] ...` after the first 30,000 characters,
0.2.x: 15,000 + 15,000; a failed command's `... [N characters truncated] ...` between
5,000 + 5,000; `<persisted-output>` previews) are `observation.truncated` with the text
shown; `(Tool completed with no output)` is ""; the background notice (`Command running
in background with ID: X`) goes to `state_json {"background_task": X}`; `Shell cwd was
reset to <cwd>` and a Task result's `agentId: ... <usage>...</usage>` trailer are removed.
Only the exact templates, whole and in their place, are removed.

Text turns as OpenAI/ATIF (`common.conversation`): what the agent said to its user,
answered, is a `text` turn; its last unanswered word -> metadata `final_message`.
Thinking blocks are reasoning. Not the user's words, so neither turn nor reply: `isMeta`
lines and messages of system reminders only (skipped), interrupt markers (`[Request
interrupted by user...]`, skipped), slash-command echoes (`<command-name>`,
`<local-command-stdout>` ...), `!` shell commands (`<bash-input>`), task notifications,
hook output and compaction summaries (reported, `message_not_imported`), and assistant
messages Claude Code wrote itself (model `<synthetic>`: reported). Task <- the first user
message. Metadata: cwd, git_branch, claude_code_version, model (agent), title (a
`summary` line of the chain), resumed_from. Each turn's `started_at` <- the timestamp of
the event holding its call (or its text). The action space is unknown (Claude Code does
not record its tool definitions; the tools used are not all it offered): none. Domain
from the tools (an `mcp__server__` prefix left out), default swe.

Claude Code's stream-json output (`claude -p --output-format stream-json --verbose`, the
Agent SDK's messages) is read as a session (`_streamed`, `_stream_values`): its message
lines in order on their thread's chain (a subagent's, named by `parent_tool_use_id`, its
sidechain), `session_id`/`tool_use_result` as `sessionId`/`toolUseResult`; its own lines
(system init and hooks, `result`, partial messages, rate limits) bookkeeping.

A line that is not JSON, or an event of a shape Claude Code does not write (`message`
not an object, `input` not an object, a timestamp that is not ISO 8601 ...), is reported
naming the line and the field (`invalid_json`, `invalid`) and only that line is left out.

Beside the sessions (`~/.claude/projects/<project>/`; read in the npm package
@anthropic-ai/claude-code's cli.js 2.1.20 and 2.1.112 and its linux-x64 binary 2.1.332;
forks and helpers also in cli.js 2.1.31, 2.1.50 and 2.1.80):
`<sessionId>.jsonl` is the session and `<sessionId>/subagents/[<dir>/]agent-<id>.jsonl` a
subagent's transcript (2.1.x; flat `agent-<id>.jsonl` in 2.0.24+); the rest holds no
conversation.
- `agent-<id>.meta.json` beside a subagent's transcript (2.1.x sidecar, JSON.stringify of
  {agentType, worktreePath?, description?} in 2.1.112; 2.1.332 adds name, toolUseId,
  parentAgentId, spawnDepth, ...) is read with the transcript: `SIDECAR_FIELDS` go to that
  subagent's trajectory metadata; a field of the wrong type, or a sidecar that is not a JSON
  object, is a warning naming the sidecar (and the field) and only that is left out. A
  sidecar whose transcript is not beside it is reported once, `subagent_not_imported`.
- Any other file under a session's directory `<sessionId>/` (a UUID-named directory beside
  its `<sessionId>.jsonl`, or holding one of `SESSION_DIRS`): `tool-results/<tool_use_id>
  .txt|.json` (a result too long to keep inline: the conversation keeps the
  `<persisted-output>` preview the agent saw), `remote-agents/remote-agent-<id>.meta.json`
  (a cloud agent's task: its conversation is not on this machine), `workflows/<runId>.json`
  and `subagents/workflows/<runId>/journal.jsonl` (a workflow's state and its agents'
  results, which their transcripts hold), `mcp-tasks/*.json`, forked-skill records ...
  are Claude Code's own state, and `<project>/sessions-index.json` ({version: 1, entries},
  2.1.x until ~2.1.31) its index of the sessions: a directory walk passes them over
  silently (`passed_over`: nothing of them is a turn, nothing is lost). Named on its own,
  a sidecar stands for its transcript and a file of a session's directory for the
  session's `<sessionId>.jsonl` (`entry`, as an OpenHands file-store file stands for its
  session); one with nothing to stand for, and sessions-index.json, is reported (`empty`).
- A file of Claude Code bookkeeping lines only is Claude Code's (`sniff`): a 1.0.x summary
  file (`{type: summary, summary, leafUuid}` lines naming other sessions' branches) is
  passed over silently; a session that never got a message (only `queue-operation`,
  `last-prompt` ... lines) is `empty`.
"""

from __future__ import annotations

import json
import mmap
import os
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from worldtrace.schemas import Action, Observation, Outcome

from .common import (
    AGENT,
    USER,
    ImportProblem,
    InvalidField,
    NonText,
    Said,
    build,
    conversation,
    expected,
    file_cached,
    file_warning,
    guess_domain,
    interrupted,
    iso_timestamp,
    join_reasoning,
    kept_ends,
    line_list,
    no_text,
    origin_stem,
    plural,
    shell_or_tool,
    shown,
    textless,
    timed_out,
)
from .reading import document_lines, json_head, jsonl_values, read_json

NAME = "claude-code"
NOT_A_SESSION = "not a Claude Code session (JSONL, one event a line)"
"""What a file that is one JSON document over several lines is, said once (`parse`)."""

MESSAGES = ("user", "assistant")
BOOKKEEPING = frozenset(
    {
        "summary",
        "system",
        "attachment",
        "progress",
        "file-history-snapshot",
        "queue-operation",
        "custom-title",
        "ai-title",
        "pr-link",
        "agent-setting",
        "agent-name",
        "last-prompt",
        "tag",
        "content-replacement",
        # 2.1.112 and 2.1.332 (the transcript writer's entry types)
        "mode",
        "permission-mode",
        "worktree-state",
        "attribution-snapshot",
        "speculation-accept",
        "marble-origami-commit",
        "marble-origami-snapshot",
        "agent-color",
        "ended-by-model",
        "continued-in",
        "relocated",
        "frame-link",
        "artifact-comment-monitor",
        "artifact-autoreact-ledger",
        "bridge-session",
        "history-suppression",
        "file-history-delta",
        "isolation-latch",
        "session-owner",
        "dev-mods",
        "memory-mode",
        "repl-mode",
        "atis-latch",
        "tools-used",
        "data-flow-records",
        "data-flow-incomplete",
        "derived-from",
        "cost-state",
        "api-request-shape",
        "api-request-blob",
        "api-request",
        "api-request-resumed",
        "fork-context-ref",
        "observer-ref",
        "resume-head-vouch",
    }
)
"""Line types of Claude Code's own bookkeeping (titles, snapshots, hook callbacks,
queued input, compaction markers, progress, modes, API request records): no
conversation, skipped."""
SHELLS = ("Bash", "PowerShell")
"""Tools whose input `command` is run by a shell: `command` actions."""
SPAWNS = ("Task", "Agent")
"""Tools that start a subagent (its events are `isSidechain`)."""
SNIFF_LINES = 64

SIDECAR = re.compile(r"agent-(?P<id>.+)\.meta\.json")
"""A subagent's sidecar, beside its transcript `agent-<id>.jsonl`."""
TRANSCRIPT = re.compile(r"agent-(?P<id>.+)\.jsonl")
SESSION_ID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", re.I)
"""A session id (crypto.randomUUID): the name of `<sessionId>.jsonl` and of its directory."""
SUBAGENTS = "subagents"
SESSION_DIRS = frozenset(
    {SUBAGENTS, "tool-results", "remote-agents", "workflows", "mcp-tasks", "session-memory"}
)
"""Directories Claude Code makes in a session's directory (2.1.20 to 2.1.332)."""
SESSIONS_INDEX = "sessions-index.json"
SIDECAR_FIELDS = (
    ("agentType", "agent_type", str),
    ("description", "description", str),
    ("name", "agent_name", str),
    ("toolUseId", "tool_use_id", str),
    ("parentAgentId", "parent_agent_id", str),
    ("spawnDepth", "spawn_depth", int),
    ("worktreePath", "worktree_path", str),
)
"""(sidecar field, metadata key, type) of what a sidecar says of its subagent: its type
(Explore, general-purpose ...), the Task/Agent call's description and the call itself
(`toolUseId`), its name, the agent that spawned it and how deep, and the git worktree it
worked in (kept while the worktree is). Its other fields are Claude Code's UI state."""
FORK_NOTICE = (
    "### FORKING CONVERSATION CONTEXT ###\n### ENTERING SUB-AGENT ROUTINE ###\nEntered sub-agent"
    " context\n\nPLEASE NOTE: \n- The messages above this point are from the main thread prior"
    " to sub-agent execution. They are provided as context only.\n- Context messages may"
    " include tool_use blocks for tools that are not available in the sub-agent context. You"
    " should only use the tools specifically provided to you in the system prompt.\n- Only"
    " complete the specific sub-agent task you have been assigned below."
)
"""The result Claude Code (2.1.20 to 2.1.50) gives the Task call in the transcript of a
subagent whose definition says `forkContext: true` (`toolUseResult.status`
`sub_agent_entered`): the messages before it are the parent's, the prompt follows it."""
FORK_ENTERED = "sub_agent_entered"
_FORK_DIRECTIVE = re.compile(
    r"<fork-boilerplate>\n(?:(?!</fork-boilerplate>).)*\n</fork-boilerplate>\n\n?"
    r"Your directive: (?P<directive>.*)",
    re.S,
)
"""The text block that starts a fork (2.1.112, 2.1.332: the `fork` subagent) after the
parent's messages: Claude Code's framing, then its directive (how Claude Code itself finds
it: `</fork-boilerplate>` then `Your directive: `)."""
HELPERS = {
    "compact": "compaction (it summarizes the conversation; no tools)",
    "reactive-compact": "compaction (it summarizes the conversation; no tools)",
    "session_memory": "session notes (it may edit only its session-memory notes file)",
    "side_question": "/btw side question (it answers from the conversation; no tools)",
    "prompt_suggestion": "prompt suggestion (it guesses the user's next prompt; no tools)",
    "speculation": "speculation (it runs a guessed next prompt; its edits go to an overlay copy)",
    "agent_summary": "subagent progress summary (no tools)",
    "away_summary": "away summary (no tools)",
    "extract_memories": "memory extraction (it may write only Claude Code's memory directory)",
    "auto_dream": "memory consolidation (it may edit only Claude Code's memory directory)",
    "rename": "session naming (no tools)",
    "comparison_fork": "request comparison (no tools)",
    "resume_cache_warm": "cache warm-up (no tools)",
    "plugin_model_fork": "plugin hook's model question",
}
"""Claude Code's own helper agents (runForkedAgent's `forkLabel`, 2.1.20 to 2.1.332): what
each is for. Their transcript is `agent-a<label>-<16 hex>.jsonl` (2.1.31 to 2.1.80:
compact, side_question, session_memory, holding a copy of the whole parent conversation
first; 2.1.112: session_memory, its prompt only)."""
HELPER_ID = re.compile(rf"a(?P<label>{'|'.join(map(re.escape, HELPERS))})-[0-9a-f]{{16}}")

# -- detection ----------------------------------------------------------------------


@file_cached
def sniff(path: Path) -> bool:
    """Whether `path` holds Claude Code events: its first lines are Claude Code's (a
    message event - `type` user/assistant/system with `uuid`, `parentUuid` and
    `sessionId` - after nothing but its bookkeeping lines; or bookkeeping lines only, one
    of them marked as Claude Code's: a `sessionId`, or a summary's `leafUuid`), or its
    stream-json output (`_streamed`). Lines that are not JSON are passed over (they are
    reported when the file is read); anything else decides no."""
    if _streamed(path):
        return True
    marked = False
    for d in json_head(path, SNIFF_LINES):
        if not isinstance(d, dict) or not isinstance(d.get("type"), str):
            return False
        if (
            d["type"] in (*MESSAGES, "system")
            and isinstance(d.get("sessionId"), str)
            and isinstance(d.get("uuid"), str)
            and "parentUuid" in d
        ):
            return True
        if d["type"] not in BOOKKEEPING and not (
            isinstance(d.get("sessionId"), str) and ("uuid" in d or "leafUuid" in d)
        ):
            return False
        marked = marked or isinstance(d.get("sessionId"), str) or _summary(d)
    return marked


STREAM_OWN = ("system", "result", "stream_event", "rate_limit_event")
"""Lines of Claude Code's stream-json output that are no message of the conversation: its
`system` events (init: the session's tools, model, cwd; hooks; status), the run's `result`
(its last answer again, costs), partial messages (`--include-partial-messages`) and rate
limit notices."""


def _streamed(path: Path) -> bool:
    """Whether `path` is Claude Code's stream-json output (`claude -p --output-format
    stream-json --verbose`, the Agent SDK's messages; harbor keeps it as the agent's log):
    its first JSON line carries a `session_id` (not a session file's `sessionId`) and is a
    `system` event with a `subtype` (init, a hook's) or a message line with the SDK's
    `parent_tool_use_id` key."""
    d = next(json_head(path, SNIFF_LINES), None)
    return (
        isinstance(d, dict)
        and isinstance(d.get("session_id"), str)
        and "sessionId" not in d
        and (
            (d.get("type") == "system" and isinstance(d.get("subtype"), str))
            or (d.get("type") in MESSAGES and "parent_tool_use_id" in d)
        )
    )


def _stream_values(path: Path) -> Iterator[tuple[int, Any]]:
    """The lines of stream-json output as the session events they stand for: each message
    line an event on a chain of its thread (the main one, or the subagent its
    `parent_tool_use_id` names: a sidechain with that `agentId`), its `uuid` (else one made
    of its line), `session_id` and `tool_use_result` read as a session's `sessionId` and
    `toolUseResult`, the init's `cwd` and version beside it; the output's own lines
    (`STREAM_OWN`) bookkeeping. Anything else is passed on as it is (and reported)."""
    last: dict[Any, str] = {}
    init: dict[str, Any] = {}
    for n, d in jsonl_values(path):
        kind = d.get("type") if isinstance(d, dict) else None
        if kind in MESSAGES and isinstance(d.get("message"), dict):
            thread = d.get("parent_tool_use_id")
            uuid = d["uuid"] if isinstance(d.get("uuid"), str) else f"line-{n}"
            e = {
                **d,
                "uuid": uuid,
                "parentUuid": last.get(thread),
                "isSidechain": thread is not None,
            }
            e.setdefault("sessionId", d.get("session_id"))
            if "tool_use_result" in d:
                e.setdefault("toolUseResult", d["tool_use_result"])
            if isinstance(thread, str):
                e.setdefault("agentId", thread)
            for key, there in (("cwd", "cwd"), ("version", "claude_code_version")):
                if isinstance(init.get(there), str):
                    e.setdefault(key, init[there])
            last[thread] = uuid
            yield n, e
        elif kind in STREAM_OWN:
            if kind == "system" and d.get("subtype") == "init":
                init = d
            yield n, {"type": "system"}
        else:
            yield n, d


def _summary(d: dict[str, Any]) -> bool:
    """A summary line: a title Claude Code gave the branch ending at `leafUuid`."""
    return (
        d.get("type") == "summary"
        and isinstance(d.get("summary"), str)
        and isinstance(d.get("leafUuid"), str)
    )


# -- beside the sessions -------------------------------------------------------------


@dataclass(frozen=True)
class _Kept:
    """A file Claude Code keeps beside its sessions that is no transcript (module doc)."""

    kind: str
    """"sidecar", "session" (another file of a session's directory) or "index"."""
    of: Path | None = None
    """What it belongs to, when that is there: a sidecar's transcript, a session file's
    `<sessionId>.jsonl`."""
    what: str = ""
    """The subagent's id (a sidecar), the session's id (a session file)."""
    rel: str = ""
    """A session file's path in the session's directory."""


def _kept(path: Path) -> _Kept | None:
    name = path.name
    if name == SESSIONS_INDEX:
        return _Kept("index") if _is_index(path) else None
    if (m := SIDECAR.fullmatch(name)) is not None:
        transcript = path.with_name(f"agent-{m['id']}.jsonl")
        there = transcript.is_file()
        if SUBAGENTS in path.parent.parts or (there and sniff(transcript)):
            return _Kept("sidecar", transcript if there else None, m["id"])
    found = _session_dir(path)
    if found is None:
        return None
    d, rel = found
    if rel[0] == SUBAGENTS and TRANSCRIPT.fullmatch(name):
        return None  # a subagent's transcript
    transcript = d.with_name(f"{d.name}.jsonl")
    of = transcript if transcript.is_file() else None
    return _Kept("session", of, d.name, "/".join(rel))


def _session_dir(path: Path) -> tuple[Path, tuple[str, ...]] | None:
    """(the session's directory, the path in it) of a file under a session's directory:
    one named by a session id, beside its `<sessionId>.jsonl` or holding the file in one
    of `SESSION_DIRS`."""
    parts = path.parts
    for i in range(len(parts) - 2, -1, -1):
        if SESSION_ID.fullmatch(parts[i]):
            d, rel = Path(*parts[: i + 1]), parts[i + 1 :]
            if rel[0] in SESSION_DIRS or d.with_name(f"{d.name}.jsonl").is_file():
                return d, rel
    return None


def _is_index(path: Path) -> bool:
    """Claude Code's sessions-index.json: `{version, entries: [...], originalPath}`."""
    data = read_json(path)
    return isinstance(data, dict) and isinstance(data.get("entries"), list)


def entry(path: Path) -> Path | None:
    """The file `path` stands for when named on its own: a subagent's sidecar its
    transcript, another file of a session's directory the session's `<sessionId>.jsonl`,
    when that is there; None for any other file (read as itself)."""
    kept = _kept(path)
    return None if kept is None else kept.of


def passed_over(path: Path) -> bool:
    """Whether a directory walk leaves `path` out: a file Claude Code keeps beside its
    sessions that holds no conversation (a sidecar whose transcript is there, read with
    it; any other file of a session's directory; sessions-index.json). A sidecar without
    its transcript is read, to be reported."""
    kept = _kept(path)
    return kept is not None and (kept.kind != "sidecar" or kept.of is not None)


def owns(path: Path) -> bool:
    """Whether `path`, whatever its name, is read as Claude Code's (`--format auto`): a
    sidecar, a file of a session's directory or sessions-index.json (`parse` passes it
    over, or reports why it imports nothing)."""
    return _kept(path) is not None


# -- copies in other session files ----------------------------------------------------


def superseded(files: list[Path]) -> dict[Path, Path]:
    """Session files among `files` whose whole conversation another of them holds: file ->
    that file. 1.0.x `--resume`, `--fork-session` and `/branch` write a new session file
    that opens with copies of the earlier file's messages (same uuids): when the earlier
    conversation did not go on after it, the new file holds all of it, and importing both
    would import those turns twice. Only files whose first message is the same (in their
    first lines: a cheap read of each) are compared; one holds another when the other's
    last message is in it. The larger keeps it (by size, then name: of two equal copies
    one is kept), and a file another holds holds none. Only files of one import run
    count: named alone, a file is imported."""
    groups: dict[tuple[Path, str], list[Path]] = {}
    for f in files:
        session = f.name.endswith(".jsonl") and SESSION_ID.fullmatch(f.stem) and sniff(f)
        if session and (root := _message_uuids(json_head(f, SNIFF_LINES))) is not None:
            groups.setdefault((f.parent, root[0]), []).append(f)
    out: dict[Path, Path] = {}
    for group in groups.values():
        if len(group) < 2:
            continue
        group.sort(key=lambda f: (-f.stat().st_size, f.name))
        holders: list[Path] = []
        for f in group:
            ends = _message_uuids(d for _, d in jsonl_values(f))
            holder = next((h for h in holders if ends and _holds(h, ends[1])), None)
            if holder is None:
                holders.append(f)
            else:
                out[f] = holder
    return out


def _holds(path: Path, uuid: str) -> bool:
    """Whether the file's bytes hold `uuid` (searched in place, not read into memory)."""
    with open(path, "rb") as fh:
        if not os.fstat(fh.fileno()).st_size:
            return False
        with mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as m:
            return m.find(uuid.encode()) >= 0


def _message_uuids(values: Iterable[Any]) -> tuple[str, str] | None:
    """The uuids of the first and the last message event among `values` (a session file's
    lines: its own conversation's, not a sidechain's), None without one."""
    first = last = None
    for d in values:
        if (
            isinstance(d, dict)
            and d.get("type") in MESSAGES
            and not d.get("isSidechain")
            and isinstance(d.get("uuid"), str)
        ):
            first = first or d["uuid"]
            last = d["uuid"]
    return None if first is None else (first, last)


def superseded_problem(path: Path, holder: Path) -> ImportProblem:
    """Why a session file another one holds (`superseded`) imports nothing."""
    return file_warning(
        path,
        "",
        "message_not_imported",
        f"its conversation is in {holder.name} too, which goes on from it (Claude Code copied"
        " it there: 1.0.x --resume, --fork-session or /branch); imported from there, not"
        " twice",
    )


def _kept_problems(path: Path, kept: _Kept) -> list[ImportProblem]:
    if kept.of is not None:
        return []  # read with what it belongs to
    if kept.kind == "sidecar":
        data = read_json(path)
        said = [data.get(k) for k in ("agentType", "description")] if isinstance(data, dict) else []
        named = ": ".join(x for x in said if isinstance(x, str) and x)
        return [
            file_warning(
                path,
                "",
                "subagent_not_imported",
                f"the metadata of subagent {kept.what}{f' ({named})' if named else ''}, whose"
                f" transcript agent-{kept.what}.jsonl is not beside it; nothing to import",
            )
        ]
    if kept.kind == "session":
        why = (
            f"{kept.rel}: a file Claude Code keeps in session {kept.what}'s directory, not a"
            f" conversation, and the session's transcript {kept.what}.jsonl is not beside it"
        )
    else:
        why = (
            "Claude Code's index of the project's sessions, not a conversation (each session"
            " is its <sessionId>.jsonl beside it)"
        )
    return [ImportProblem(str(path), "", "empty", f"{why}; nothing to import")]


def _described(path: Path) -> tuple[str, dict[str, Any], list[ImportProblem]] | None:
    """(the subagent's id, its metadata, the problems reading it) from the sidecar beside
    a subagent's transcript `path`; None when there is none. A sidecar that cannot be read
    costs its metadata, a field of the wrong type that field: warnings naming it."""
    m = TRANSCRIPT.fullmatch(path.name)
    side = path.with_name(f"agent-{m['id']}.meta.json") if m is not None else None
    if side is None or not side.is_file():
        return None
    lost = "the subagent's metadata is not imported"
    data = read_json(side)
    if isinstance(data, ImportProblem):
        return m["id"], {}, [file_warning(side, data.where, data.kind, f"{data.message}; {lost}")]
    if not isinstance(data, dict):
        bad = expected("the file", "a JSON object", data)
        return m["id"], {}, [file_warning(side, "", "invalid", f"{bad}; {lost}")]
    meta: dict[str, Any] = {}
    problems = []
    for key, name, kind in SIDECAR_FIELDS:
        value = data.get(key)
        if value is None:
            continue
        if isinstance(value, kind) and not isinstance(value, bool):
            meta[name] = value
            continue
        bad = expected(key, "a string" if kind is str else "an integer", value)
        problems.append(file_warning(side, "", "invalid", f"{bad}; not imported"))
    return m["id"], meta, problems


# -- reading -------------------------------------------------------------------------


@dataclass
class _Event:
    n: int
    """Line number (1-based)."""
    d: dict[str, Any]
    kind: str
    uuid: str | None
    parent: str | None
    session: str | None
    sidechain: bool
    at: datetime | None

    @property
    def content(self) -> list[Any]:
        """The message's content as a list of blocks (a string is one text block)."""
        c = self.d["message"].get("content")
        if c is None:
            return []
        if isinstance(c, str):
            return [{"type": "text", "text": c}]
        return c

    @property
    def key(self) -> str | None:
        """The response an assistant event is a block of (`message.id`, else requestId)."""
        m = self.d.get("message")
        mid = m.get("id") if isinstance(m, dict) else None
        rid = self.d.get("requestId")
        return mid if isinstance(mid, str) else rid if isinstance(rid, str) else None


def _blocks(e: _Event, kind: str) -> list[tuple[int, dict[str, Any]]]:
    return [
        (k, b) for k, b in enumerate(e.content) if isinstance(b, dict) and b.get("type") == kind
    ]


def _event(n: int, d: Any) -> _Event | None:
    """Line `n` as an event (None: a line of no known type, `_read` reports it); a field
    of a shape Claude Code does not write is InvalidField naming it."""
    if not isinstance(d, dict):
        raise expected("the line", "a Claude Code event (a JSON object)", d)
    kind = d.get("type")
    if not isinstance(kind, str):
        raise expected("type", "a string", kind)
    for key in ("uuid", "parentUuid", "sessionId", "logicalParentUuid"):
        if d.get(key) is not None and not isinstance(d[key], str):
            raise expected(key, "a string", d[key])
    side = d.get("isSidechain", False)
    if not isinstance(side, bool):
        raise expected("isSidechain", "true or false", side)
    at = iso_timestamp(d.get("timestamp"), "timestamp")
    if kind in MESSAGES:
        if not isinstance(d.get("uuid"), str):
            raise expected("uuid", "a string", d.get("uuid"))
        m = d.get("message")
        if not isinstance(m, dict):
            raise expected("message", "an object", m)
        c = m.get("content")
        if isinstance(c, int | float) and not isinstance(c, bool):
            m["content"] = str(c)  # taken as its text, as the other importers do
        elif c is not None and not isinstance(c, str | list):
            raise expected("message.content", "a string or a list of content blocks", c)
        for k, b in enumerate(c if isinstance(c, list) else []):
            _check_block(b, f"message.content[{k}]")
    elif kind not in BOOKKEEPING:
        return None
    return _Event(n, d, kind, d.get("uuid"), d.get("parentUuid"), d.get("sessionId"), side, at)


def _check_block(b: Any, at: str) -> None:
    if not isinstance(b, dict):
        return  # content_text reads a string part as text, reports anything else
    if b.get("type") == "tool_use":
        if not isinstance(b.get("id"), str):
            raise expected(f"{at}.id", "a string", b.get("id"))
        if not isinstance(b.get("name"), str) or not b["name"]:
            raise expected(f"{at}.name", "a tool name", b.get("name"))
        if b.get("input") is not None and not isinstance(b["input"], dict):
            raise expected(f"{at}.input", "an object", b["input"])
    elif b.get("type") == "tool_result" and not isinstance(b.get("tool_use_id"), str):
        raise expected(f"{at}.tool_use_id", "a string", b.get("tool_use_id"))


def _read(path: Path) -> tuple[list[_Event], list[ImportProblem]]:
    events: list[_Event] = []
    problems: list[ImportProblem] = []
    unknown: dict[str, list[int]] = {}
    for n, d in _stream_values(path) if _streamed(path) else jsonl_values(path):
        if isinstance(d, ImportProblem):
            problems.append(d)
            continue
        try:
            e = _event(n, d)
        except InvalidField as exc:  # the message names the field; only this line is lost
            problems.append(ImportProblem(str(path), f"line {n}", "invalid", str(exc)))
            continue
        if e is None:
            unknown.setdefault(d["type"], []).append(n)
        else:
            events.append(e)
    for kind, lines in unknown.items():
        problems.append(
            file_warning(
                path,
                f"line {lines[0]}",
                "message_not_imported",
                f"{plural(len(lines), 'event')} of type {shown(kind)} ({line_list(lines)}): "
                "not a Claude Code message; not imported",
            )
        )
    return events, problems


# -- the conversation ------------------------------------------------------------------


class _Graph:
    """One thread's events by uuid, and each one's parent: the main (non-sidechain)
    events, or one subagent's."""

    def __init__(self, events: list[_Event]):
        self.by_uuid: dict[str, _Event] = {}
        self.previous: dict[int, _Event | None] = {}
        last: _Event | None = None
        for e in events:
            if e.uuid is None or e.uuid in self.by_uuid:
                continue  # a repeated uuid adds nothing: the first one stands
            self.by_uuid[e.uuid] = e
            self.previous[e.n] = last
            last = e

    def parent(self, e: _Event) -> _Event | None:
        p = e.parent or e.d.get("logicalParentUuid")
        if p is None:
            return None
        found = self.by_uuid.get(p)
        if found is None:  # its line could not be read (or lives in another file)
            return self.previous.get(e.n)
        return found

    def chain(self, leaf: _Event) -> list[_Event]:
        """The events from the root to `leaf`, in chain order."""
        out: list[_Event] = []
        seen: set[int] = set()
        e: _Event | None = leaf
        while e is not None and e.n not in seen:
            seen.add(e.n)
            out.append(e)
            e = self.parent(e)
        return out[::-1]


def _conversations(
    events: list[_Event],
) -> tuple[list[tuple[int, list[_Event]]], set[int]]:
    """(origin index, the conversation's messages in file order) of each conversation of
    `events` (the main ones, or one subagent's), the one reaching their last message
    first; and the line numbers of every event they take."""
    g = _Graph(events)
    messages = [e for e in events if e.kind in MESSAGES]
    if not messages:
        return [], set()
    last_of: dict[str | None, _Event] = {}
    for e in messages:
        last_of[e.session] = e
    out: list[tuple[int, list[_Event]]] = []
    taken: set[int] = set()
    covered: set[str | None] = set()
    leaves = [messages[-1], *sorted(last_of.values(), key=lambda e: -e.n)]
    for leaf in leaves:
        if leaf.session in covered or leaf.n in taken:
            continue
        chain = g.chain(leaf)
        kept = _with_siblings(chain, messages, g)
        taken |= {e.n for e in chain} | {e.n for e in kept}
        covered |= {e.session for e in chain}
        out.append((0 if not out else leaf.n - 1, kept))
    return out, taken


def _with_siblings(chain: list[_Event], messages: list[_Event], g: _Graph) -> list[_Event]:
    """The chain's messages and the siblings that belong to its steps, in file order:
    another content block of a response on it (same `message.id`, not one already there)
    and a result of a call on it that nothing on it answers."""
    on = {e.n for e in chain}
    keys = {e.key for e in chain if e.kind == "assistant" and e.key}
    seen = {(e.key, _dump(e.content)) for e in chain if e.kind == "assistant"}
    calls = {b["id"] for e in chain if e.kind == "assistant" for _, b in _blocks(e, "tool_use")}
    answered = {
        b["tool_use_id"] for e in chain if e.kind == "user" for _, b in _blocks(e, "tool_result")
    }
    kept = set(on)
    for e in messages:
        if e.n in kept:
            continue
        p = g.parent(e)
        if p is None or p.n not in kept:
            continue
        if e.kind == "assistant" and e.key in keys and (e.key, _dump(e.content)) not in seen:
            seen.add((e.key, _dump(e.content)))
            calls |= {b["id"] for _, b in _blocks(e, "tool_use")}
            kept.add(e.n)
        elif e.kind == "user":
            ids = [b["tool_use_id"] for _, b in _blocks(e, "tool_result")]
            only = ids and len(ids) == len(e.content)
            if only and all(i in calls and i not in answered for i in ids):
                answered |= set(ids)
                kept.add(e.n)
    return [e for e in messages if e.n in kept]


def _dump(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)


@dataclass
class _Subagent:
    """A Task subagent's events (`isSidechain`), in file order."""

    key: str
    """What names it in origin ids: its `agentId`, else the uuid of its chain's root."""
    agent_id: str | None
    events: list[_Event] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)
    """What its sidecar says of it (`SIDECAR_FIELDS`)."""


def _subagents(events: list[_Event]) -> list[_Subagent]:
    """The file's subagents, in the order they start: the sidechain events by `agentId`,
    else (older files) by the chain they are on (a root whose parent is no sidechain
    event: null, or the main chain's)."""
    side = {e.uuid: e for e in events if e.sidechain and e.uuid is not None}
    out: dict[tuple[bool, str], _Subagent] = {}
    for e in events:
        if not e.sidechain or e.uuid is None:
            continue
        agent = e.d.get("agentId")
        if isinstance(agent, str) and agent:
            key = agent
        else:
            agent, root, seen = None, e, {e.n}
            while root.parent in side and side[root.parent].n not in seen:
                root = side[root.parent]
                seen.add(root.n)
            key = root.uuid or ""
        out.setdefault((agent is None, key), _Subagent(key, agent)).events.append(e)
    return list(out.values())


@dataclass(frozen=True)
class _Fork:
    """Where a forked subagent's own conversation starts: after the message Claude Code
    started it with."""

    at: int
    """That message's index in the conversation's messages."""
    directive: str | None
    """What the fork was asked, when that message says it (2.1.112+); else the user
    message after it is the prompt (2.1.20 to 2.1.50)."""


def _fork(messages: list[_Event]) -> _Fork | None:
    """Where a subagent's conversation `messages` starts as a fork, if it does: its last
    user message that holds Claude Code's fork directive (`_FORK_DIRECTIVE`), or answers
    the parent's call with `FORK_NOTICE`. Claude Code wrote the parent's messages (their
    own uuids) and a clone of the parent's call before it: they are the parent's turns."""
    for i in range(len(messages) - 1, -1, -1):
        e = messages[i]
        if e.kind != "user":
            continue
        for _, b in _blocks(e, "text"):
            if isinstance(b.get("text"), str) and (m := _FORK_DIRECTIVE.fullmatch(b["text"])):
                return _Fork(i, _user_text(m["directive"]))
        tur = e.d.get("toolUseResult")
        if isinstance(tur, dict) and tur.get("status") == FORK_ENTERED:
            notices = [r.get("content") for _, r in _blocks(e, "tool_result")]
            if FORK_NOTICE in notices or [{"type": "text", "text": FORK_NOTICE}] in notices:
                return _Fork(i, None)
    return None


def _not_imported(path: Path, sub: _Subagent, lines: list[int]) -> ImportProblem:
    named = f" {sub.agent_id}" if sub.agent_id else ""
    return file_warning(
        path,
        f"line {lines[0]}",
        "subagent_not_imported",
        f"{line_list(lines)}: {plural(len(lines), 'message')} of subagent{named}"
        " (isSidechain): no (action, observation) pair; not imported",
    )


def _branches(path: Path, events: list[_Event], taken: set[int]) -> list[ImportProblem]:
    """The messages of `events` (the main ones, or a subagent's) no conversation takes:
    branches the conversation left (one warning per branch, named by where it leaves)."""
    out: list[ImportProblem] = []
    g = _Graph(events)
    branches: dict[int, list[int]] = {}
    fork: dict[int, int | None] = {}
    for e in events:
        if e.kind not in MESSAGES or e.n in taken or e.uuid not in g.by_uuid:
            continue
        root, p = e, g.parent(e)
        seen = {e.n}
        while p is not None and p.n not in taken and p.n not in seen:
            seen.add(p.n)
            root, p = p, g.parent(p)
        branches.setdefault(root.n, []).append(e.n)
        fork[root.n] = p.n if p is not None and p.n in taken else None
    for root, lines in branches.items():
        where = f"after line {fork[root]}" if fork[root] else "with no message before it"
        out.append(
            file_warning(
                path,
                f"line {min(lines)}",
                "message_not_imported",
                f"{line_list(lines)}: {plural(len(lines), 'message')} of a branch the conversation"
                f" left (it starts {where}: an edited prompt, a rewind or a retry); not imported",
            )
        )
    return out


# -- harness text --------------------------------------------------------------------

_REMINDER = r"<system-reminder>(?:(?!</system-reminder>).)*</system-reminder>"
_TRAILING_REMINDER = re.compile(rf"(?:\n\n|\n|\A){_REMINDER}\n?\Z", re.S)
_LEADING_REMINDER = re.compile(rf"\A{_REMINDER}\n*", re.S)
_ONLY_REMINDERS = re.compile(rf"\s*(?:{_REMINDER}\s*)+", re.S)
_TRAILING_HOOK = re.compile(
    r"(?:\n\n|\n)<user-prompt-submit-hook>(?:(?!</user-prompt-submit-hook>).)*"
    r"</user-prompt-submit-hook>\n?\Z",
    re.S,
)
"""UserPromptSubmit hook output Claude Code adds after a prompt."""


def _strip_end(text: str) -> str:
    """`text` without the system-reminder blocks Claude Code appended to it."""
    while (m := _TRAILING_REMINDER.search(text)) is not None:
        text = text[: m.start()]
    return text


def _user_text(text: str) -> str:
    """A user message without Claude Code's system reminders (and hook output) around it."""
    while (m := _LEADING_REMINDER.match(text)) is not None:
        text = text[m.end() :]
    before = None
    while before != text:
        before = text
        text = _strip_end(text)
        text = _TRAILING_HOOK.sub("", text, count=1)
    return text


def _cleaned(content: list[Any], clean) -> list[Any]:
    """Content blocks with text blocks of system reminders only left out and the others'
    text cleaned by `clean`."""
    out = []
    for b in content:
        if isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str):
            if _ONLY_REMINDERS.fullmatch(b["text"]):
                continue
            b = {**b, "text": clean(b["text"])}
        out.append(b)
    return out


HARNESS_USER = (
    ("<command-name>", "a slash command the user ran"),
    ("<command-message>", "a slash command the user ran"),
    ("<command-args>", "a slash command the user ran"),
    ("<local-command-stdout>", "a local command's output"),
    ("<local-command-stderr>", "a local command's output"),
    ("<local-command-caveat>", "Claude Code's caveat about local commands"),
    ("<bash-input>", "a shell command the user ran (! mode)"),
    ("<bash-stdout>", "the output of a shell command the user ran"),
    ("<bash-stderr>", "the output of a shell command the user ran"),
    ("<task-notification>", "a background task notification"),
    ("<bash-notification>", "a background task notification"),
    ("<user-prompt-submit-hook>", "a UserPromptSubmit hook's output"),
    ("Stop hook feedback:\n", "a Stop hook's feedback"),
    (
        "This session is being continued from a previous conversation that ran out of context.",
        "the summary Claude Code wrote when it compacted the conversation",
    ),
)
"""User messages Claude Code writes (its tags open the message): not the user's words."""
INTERRUPTS = ("[Request interrupted by user]", "[Request interrupted by user for tool use]")
NO_CONTENT = "(no content)"
"""Claude Code's placeholder for an empty response text block."""

REJECT = (
    "The user doesn't want to proceed with this tool use. The tool use was rejected (eg. if "
    "it was a file edit, the new_string was NOT written to the file). "
)
MEMORY_HINT = (
    "\n\nNote: The user's next message may contain a correction or preference. Pay close "
    "attention — if they explain what went wrong or how they'd prefer you to work, consider "
    "saving that to memory for future sessions."
)
SUBAGENT_REJECT = (
    "Permission for this tool use was denied. The tool use was rejected (eg. if it was a "
    "file edit, the new_string was NOT written to the file). "
)
_REFUSALS = (
    (re.compile(re.escape(REJECT) + r"STOP what you are doing and wait for the user to tell"
                r" you how to proceed\.\Z"),
     "the user rejected it, or interrupted it before it answered"),
    (re.compile(re.escape(REJECT) + r"To tell you how to proceed, the user said:\n", re.S),
     "the user rejected it (the reason they gave is not imported)"),
    (re.compile(r"The user doesn't want to take this action right now\. STOP what you are "
                r"doing and wait for the user to tell you how to proceed\.\Z"),
     "the user cancelled it"),
    (re.compile(re.escape(SUBAGENT_REJECT)), "permission was denied"),
    (re.compile(r"Permission for this action has been denied\. Reason: "),
     "permission was denied"),
    (re.compile(r"The agent proposed a plan that was rejected by the user\."),
     "the user rejected the plan"),
)  # fmt: skip
"""Claude Code's answers (utils/messages.ts) when the tool did not run or did not answer."""
LOST = "[Tool result missing due to internal error]"
"""What Claude Code puts where it lost a call's result (the tool may have run)."""
_TOOL_USE_ERROR = re.compile(r"<tool_use_error>(?P<error>.*)</tool_use_error>", re.S)
FOUND_STATE = re.compile(
    r"File does not exist\.|String to replace not found in file\.|Found \d+ matches of the"
    r" string to replace, but replace_all is false\.|Cannot create new file - file already"
    r" exists\."
)
"""How the file tools' input checks (FileEditTool/FileWriteTool/FileReadTool validateInput)
begin an answer that tells the file's state: the check read the file system, so it is the
environment's answer (an error turn with the text inside the tags), unlike the checks of
Claude Code's own rules (the file not read first, modified since read, no change to make,
an invalid input, an unknown tool), which ran nothing."""


def _refusal(text: str, name: str) -> str | None:
    """Why Claude Code answered the call itself, if its error text `text` says the tool
    did not run (or did not answer); None for an answer of the tool."""
    if (m := _TOOL_USE_ERROR.fullmatch(text)) is not None:
        return f"Claude Code refused it before running it ({shown(m['error'].strip(), 80)})"
    text = text.removesuffix(MEMORY_HINT)
    for pattern, why in _REFUSALS:
        if pattern.match(text):
            return why
    n = re.escape(name)
    if re.match(rf"Permission to use {n}(?: with command .*?)? has been denied", text, re.S):
        return "permission was denied"
    if re.match(rf"(?:PreToolUse:{n} hook error: |Execution stopped by PreToolUse hook)", text):
        return "a PreToolUse hook blocked it"
    return None


# Bash's own notices (tools/BashTool: BashTool.tsx, utils.ts; utils/toolErrors.ts,
# ShellCommand.ts, toolResultStorage.ts)
MAX_OUTPUT = 30_000
"""BASH_MAX_OUTPUT_LENGTH's default: the head Claude Code keeps of a long output."""
_LINES_CUT = re.compile(r"\n\n\.\.\. \[\d+ lines truncated\] \.\.\.")
_CHARS_CUT = re.compile(r"\n\n\.\.\. \[\d+ characters truncated\] \.\.\.\n\n")
_EXIT = re.compile(r"Exit code (-?\d+)(?:\n|\Z)")
_TIMEOUT = re.compile(r"Command timed out after (?:\d+h )?(?:\d+m )?\d+(?:\.\d+)?s(?: |\n|\Z)")
ABORTED = "<error>Command was aborted before completion</error>"
_BACKGROUND = re.compile(
    r"(?:\A|\n)(?:Command running in background with ID: (?P<id>\S+?)"
    r"|Command was manually backgrounded by user with ID: (?P<user>\S+?))"
    r"(?:\. Output is being written to: [^\n]*)?\Z"
)
_PERSISTED = re.compile(
    r"<persisted-output>\nOutput too large \([^)\n]*\)\. Full output saved to: [^\n]*\n\n"
    r"Preview \(first [^)\n]*\):\n(?P<preview>.*?)(?:\n\.\.\.\n|\n)</persisted-output>",
    re.S,
)
_TASK_TRAILER = re.compile(
    r"(?:\A|\n)agentId: [0-9a-f]+ \(for resuming to continue this agent's work if needed\)"
    r"(?:\n<usage>total_tokens: \d+\ntool_uses: \d+\nduration_ms: \d+</usage>)?\Z"
)
NONZERO_OK = {
    "No matches found",
    "Some directories were inaccessible",
    "Files differ",
    "Condition is false",
}
"""`returnCodeInterpretation` of a command that exited 1 without an error (grep, rg, find,
diff, test)."""


EXIT_1_OK = frozenset({"grep", "rg", "find", "diff", "test", "["})
"""Programs Claude Code calls a success when they exit 1 (NONZERO_OK)."""
_SEGMENTS = re.compile(r"\|\|?|&&?|;|\n")


def _may_exit_1(command: str) -> bool:
    """Whether a success of `command` may have exited 1, which only its `toolUseResult`
    says (`returnCodeInterpretation`). Claude Code judges the first word of the command's
    last segment; every segment is looked at here, so that splitting it otherwise (at a
    quoted `|`) errs toward an unknown exit code, never toward a false 0."""
    firsts = (seg.lstrip(" \t({!").split()[:1] for seg in _SEGMENTS.split(command))
    return any(first and first[0] in EXIT_1_OK for first in firsts)


def _u16(text: str) -> int:
    """Length in UTF-16 code units, as Claude Code (JavaScript) counts and cuts."""
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def _lines_cut(text: str) -> tuple[str, bool]:
    """`text` without Bash's long-output notice, and whether it had one: the first 30,000
    characters then `\\n\\n... [N lines truncated] ...` (1.x, 2.x), or 15,000 on each side
    of it (0.2.x); only where the cut puts it."""
    for m in _LINES_CUT.finditer(text):
        head, tail = text[: m.start()], text[m.end() :]
        if not tail and _u16(head) == MAX_OUTPUT:
            return head, True
        half = MAX_OUTPUT // 2
        if tail.startswith("\n\n") and _u16(head) == half and _u16(tail) - 2 <= half:
            return kept_ends(head, tail[2:]), True
    return text, False


def _chars_cut(text: str) -> tuple[str, bool]:
    """A failed command's message without the notice of its middle cut (5,000 characters
    on each side), and whether it had one."""
    for m in _CHARS_CUT.finditer(text):
        head, tail = text[: m.start()], text[m.end() :]
        if _u16(head) == _u16(tail) == 5_000:
            return kept_ends(head, tail), True
    return text, False


def _joined(stdout: str, stderr: str) -> str:
    if stdout and stderr and not stdout.endswith("\n"):
        return f"{stdout}\n{stderr}"
    return stdout + stderr


def _reset(text: str, cwd: str | None) -> str:
    """`text` without Claude Code's `Shell cwd was reset to <cwd>` line at its end."""
    if cwd:
        for notice in (f"\nShell cwd was reset to {cwd}", f"Shell cwd was reset to {cwd}"):
            if text.endswith(notice) and (notice[0] == "\n" or text == notice):
                return text[: -len(notice)]
    return text


# -- observations --------------------------------------------------------------------


@dataclass
class _Call:
    item: int
    event: _Event
    k: int
    block: dict[str, Any]
    results: list[tuple[_Event, int, dict[str, Any]]] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.block["name"]

    @property
    def input(self) -> dict[str, Any]:
        return self.block.get("input") or {}


class _Reader:
    """What one conversation's tool results answered."""

    def __init__(self, parts: NonText, cwd: str | None):
        self.parts, self.cwd = parts, cwd

    def text(self, content: Any, place: str, clean=_strip_end) -> str:
        if isinstance(content, str):
            return clean(content)
        if isinstance(content, list):
            content = _cleaned(content, lambda t: t)
        return clean(self.parts.text(content, place))

    def answer(
        self, c: _Call, turn: int
    ) -> tuple[Observation, None] | tuple[None, tuple[str, str]]:
        """(the observation of call `c` (its first result), None), or (None, (the warning
        kind, why it is no turn)) when the tool did not answer."""
        e, k, r = c.results[0]
        place = f"turn {turn} observation (line {e.n}: message.content[{k}].content)"
        content, field_ = r.get("content"), f"message.content[{k}].content"
        if isinstance(content, list):  # reminders are Claude Code's text, not the tool's
            content = _cleaned(content, lambda t: t)
        if (left := textless(content, field_)) is not None:  # a `Read` of an image
            return None, ("unpaired_call", no_text([(field_, left)]))
        error = bool(r.get("is_error"))
        text = self.text(r.get("content"), place)
        if text == LOST:
            return None, (
                "harness_failure",
                "Claude Code lost its result: what it answered is unknown",
            )
        found = _TOOL_USE_ERROR.fullmatch(text) if error else None
        if found is not None and FOUND_STATE.match(found["error"]):
            return Observation(found["error"], is_error=True), None
        if error and (why := _refusal(text, c.name)) is not None:
            return None, ("not_run", why)
        if c.name in SHELLS and isinstance(c.input.get("command"), str):
            return self._shell(c, e, text, error), None
        if c.name in SPAWNS:
            text = _TASK_TRAILER.sub("", text)
        if text == f"({c.name} completed with no output)":
            text = ""
        if (m := _PERSISTED.fullmatch(text)) is not None:
            return Observation(m["preview"], is_error=error, truncated=True), None
        return Observation(text, is_error=error), None

    def _shell(self, c: _Call, e: _Event, text: str, error: bool) -> Observation:
        """A command's observation: what the shell printed (`toolUseResult` when Claude
        Code kept it, else the result text without Claude Code's own notices)."""
        tur = e.d.get("toolUseResult") if len(_blocks(e, "tool_result")) == 1 else None
        if (
            isinstance(tur, dict)
            and isinstance(tur.get("stdout"), str)
            and isinstance(tur.get("stderr"), str)
            and not tur.get("isImage")
        ):
            out, cut = _lines_cut(tur["stdout"])
            err, cut_err = _lines_cut(tur["stderr"])
            output = _joined(out, _reset(err, self.cwd))
            cut = cut or cut_err or isinstance(tur.get("persistedOutputPath"), str)
            if tur.get("interrupted") is True:
                return interrupted(output, cut)
            bg = tur.get("backgroundTaskId")
            if isinstance(bg, str) and bg:
                state = json.dumps({"background_task": bg})
                return Observation(output, truncated=cut, state_json=state)
            meaning = tur.get("returnCodeInterpretation")
            code = None if error else 1 if meaning in NONZERO_OK else 0 if not meaning else None
            return Observation(output, is_error=error, exit_code=code, truncated=cut)
        if error:
            return self._failed(text)
        state = None
        if (m := _BACKGROUND.search(text)) is not None:
            text, state = text[: m.start()], json.dumps({"background_task": m["id"] or m["user"]})
        if text == f"({c.name} completed with no output)":
            text = ""
        cut = False
        if (m := _PERSISTED.match(text)) is not None:
            text, cut = m["preview"] + text[m.end() :], True
        text, lines_cut = _lines_cut(text)
        code = None if state is not None or _may_exit_1(c.input["command"]) else 0
        return Observation(
            _reset(text, self.cwd), exit_code=code, truncated=cut or lines_cut, state_json=state
        )

    def _failed(self, text: str) -> Observation:
        """A failed command's result: `Exit code N`, Claude Code's interrupt, timeout and
        abort notices, then what it printed (cut in the middle past 10,000 characters)."""
        text, cut = _chars_cut(text)
        code = None
        if (m := _EXIT.match(text)) is not None:
            code, text = int(m[1]), text[m.end() :]
        stopped = False
        for marker in (INTERRUPTS[1] + "\n", INTERRUPTS[1]):
            if text.startswith(marker) and (marker.endswith("\n") or text == marker):
                stopped, text = True, text[len(marker) :]
                break
        killed = (m := _TIMEOUT.match(text)) is not None
        if killed:
            text = text[m.end() :]
        if text.endswith(ABORTED):
            stopped, text = True, text[: -len(ABORTED)].removesuffix("\n")
        text = _reset(text, self.cwd)
        if killed:
            return timed_out(text, truncated=cut)
        if stopped:
            return interrupted(text, cut)
        return Observation(text, is_error=True, exit_code=code, truncated=cut)


# -- items -----------------------------------------------------------------------------


def tool_answer(
    name: str, args: Any, result: dict[str, Any], tool_use_result: Any, parts: NonText, turn: int
) -> Observation | tuple[str, str]:
    """What a Claude Code tool call `name(args)` was answered, from its `tool_result` block
    and the `toolUseResult` beside it, for files other tools wrote from a session (harbor's
    ATIF keeps both in `extra.tool_result_metadata`): the observation, or (warning kind,
    why) when it is no turn. Read as a session's results are (`_Reader.answer`)."""
    event = _Event(0, {"message": {"content": [result]}, "toolUseResult": tool_use_result},
                   "user", None, None, None, False, None)  # fmt: skip
    block = {"type": "tool_use", "name": name, "input": args if isinstance(args, dict) else {}}
    call = _Call(0, event, 0, block, [(event, 0, result)])
    obs, no_turn = _Reader(parts, None).answer(call, turn)
    return obs if obs is not None else no_turn


@dataclass
class _Item:
    """One message of the conversation: an assistant response (its events joined by
    `message.id`) or one user event."""

    kind: str
    events: list[_Event]
    role: str | None = None
    said: list[Any] = field(default_factory=list)
    """What it says: an agent's text blocks; a user's text (reminders removed) and images."""
    why: str | None = None
    """Why a message that is neither the agent's nor the user's words is not imported."""

    @property
    def n(self) -> int:
        return self.events[0].n

    def blocks(self, kind: str) -> list[tuple[_Event, int, dict[str, Any]]]:
        return [(e, k, b) for e in self.events for k, b in _blocks(e, kind)]


def _items(messages: list[_Event]) -> list[_Item]:
    items: list[_Item] = []
    for e in messages:
        last = items[-1] if items else None
        if (
            e.kind == "assistant"
            and last is not None
            and last.kind == "assistant"
            and e.key is not None
            and last.events[-1].key == e.key
        ):
            last.events.append(e)
        else:
            items.append(_Item(e.kind, [e]))
    for it in items:
        _classify(it)
    return items


def _classify(it: _Item) -> None:
    """Who wrote the item (AGENT, USER, "tool" for tool results only, None to pass it
    over) and what it says."""
    first = it.events[0]
    if it.kind == "assistant":
        m = first.d["message"]
        if m.get("model") == "<synthetic>" or first.d.get("isApiErrorMessage"):
            it.why = "a message Claude Code wrote itself (model <synthetic>)"
            return
        it.role = AGENT
        it.said = [
            b
            for _, _, b in it.blocks("text")
            if isinstance(b.get("text"), str) and b["text"] != NO_CONTENT
        ]
        return
    if first.d.get("isCompactSummary"):
        it.why = "the summary Claude Code wrote when it compacted the conversation"
        return
    if first.d.get("isMeta") or first.d.get("isVisibleInTranscriptOnly"):
        return  # context Claude Code gave the model (a caveat, a skill, a reminder)
    content = [
        b for b in first.content if not (isinstance(b, dict) and b.get("type") == "tool_result")
    ]
    said = _cleaned(content, _user_text)
    text = "\n".join(b["text"] if isinstance(b, dict) else str(b) for b in said if _is_text(b))
    results = bool(_blocks(first, "tool_result"))
    if text.strip() in INTERRUPTS and not any(not _is_text(b) for b in said):
        it.role = "tool" if results else None
        return
    for prefix, why in HARNESS_USER:
        if text.lstrip().startswith(prefix):
            it.why, it.role = why, "tool" if results else None
            return
    if not said or (not text.strip() and all(_is_text(b) for b in said)):
        it.role = "tool" if results else None  # results only, or reminders only
        return
    it.role, it.said = USER, said


def _is_text(b: Any) -> bool:
    return isinstance(b, str) or (
        isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str)
    )


# -- the trajectory ------------------------------------------------------------------


def parse(path: Path, domain: str | None = None) -> Iterator[tuple[int, Any]]:
    """(origin index, Trajectory | ImportProblem) of everything in a session file (or in
    a file Claude Code keeps beside its sessions: nothing, or why it imports nothing)."""
    if (kept := _kept(path)) is not None:
        yield from ((0, p) for p in _kept_problems(path, kept))
        return
    if (lines := document_lines(path)) is not None:  # `--format claude-code` on a document:
        why = f"{NOT_A_SESSION}: one JSON document over {lines} lines"  # not a problem a line
        yield 0, ImportProblem(str(path), "", "unrecognized", why)
        return
    described = _described(path)
    events, problems = _read(path)
    yield from ((0, p) for p in problems)
    if described is not None:
        yield from ((0, p) for p in described[2])
    main = [e for e in events if not e.sidechain]
    convs, taken = _conversations(main)
    yield from ((0, p) for p in _branches(path, main, taken))
    if not convs and not any(e.kind in MESSAGES for e in events):
        # a summary file (1.0.x) only names other files' branches: passed over
        if not problems and not all(e.kind == "summary" for e in events):
            yield 0, ImportProblem(str(path), "", "empty", "no Claude Code message in the file")
        return
    summaries = {
        e.d["leafUuid"]: e.d["summary"]
        for e in events
        if e.kind == "summary"
        and isinstance(e.d.get("leafUuid"), str)
        and isinstance(e.d.get("summary"), str)
    }
    for index, messages in convs:
        yield from ((index, x) for x in _trajectory(path, messages, summaries, domain))
    for sub in _subagents(events):
        if (helper := _helper(path, sub)) is not None:
            yield 0, helper
            continue
        if described is not None and sub.agent_id == described[0]:
            sub.meta = described[1]
        yield from _subagent(path, sub, summaries, domain)


def _helper(path: Path, sub: _Subagent) -> ImportProblem | None:
    """One warning for the transcript of one of Claude Code's own helper agents
    (`HELPERS`, by its id): Claude Code working on its own state (the conversation it
    summarizes, its notes and memory files), not an agent acting in the environment."""
    m = HELPER_ID.fullmatch(sub.agent_id or "")
    lines = [e.n for e in sub.events if e.kind in MESSAGES]
    if m is None or not lines:
        return None
    return file_warning(
        path,
        f"line {lines[0]}",
        "subagent_not_imported",
        f"{line_list(lines)}: {plural(len(lines), 'message')} of Claude Code's own helper agent"
        f" {sub.agent_id}, its {HELPERS[m['label']]}: Claude Code working on its own state, not"
        " an agent acting in the environment; not imported",
    )


def _subagent(
    path: Path, sub: _Subagent, summaries: dict[str, str], domain: str | None
) -> Iterator[tuple[int, Any]]:
    """A subagent's conversation as a trajectory of its own (origin index: the line of
    its last message, 0-based), read as the main conversation is; a fork's from where it
    starts (`_fork`: the parent's messages before are the parent's trajectory's); one that
    makes no turn is reported, `subagent_not_imported`."""
    convs, taken = _conversations(sub.events)
    kept, lost = [], []
    inherited: set[int] = set()
    for _, messages in convs:
        fork = _fork(messages)
        own = messages
        if fork is not None:
            inherited |= {e.n for e in messages[: fork.at]}
            own = messages[fork.at + 1 :]
        out = list(_trajectory(path, own, summaries, domain, sub, fork)) if own else []
        if out and out[-1].turns:
            kept += [(messages[-1].n - 1, x) for x in out]
        else:
            lost += [e.n for e in own] or [messages[-1].n]
    if not kept:
        lines = [e.n for e in sub.events if e.kind in MESSAGES and e.n not in inherited]
        if lines:
            yield 0, _not_imported(path, sub, lines)
        return
    if lost:
        yield 0, _not_imported(path, sub, lost)
    yield from ((0, p) for p in _branches(path, sub.events, taken))
    yield from kept


def _trajectory(
    path: Path,
    messages: list[_Event],
    summaries: dict[str, str],
    domain: str | None,
    sub: _Subagent | None = None,
    fork: _Fork | None = None,
) -> Iterator[Any]:
    first = messages[0]
    cwd = next((e.d["cwd"] for e in messages if isinstance(e.d.get("cwd"), str)), None)
    parts = NonText()
    reader = _Reader(parts, cwd)
    items = _items(messages)
    calls: list[_Call] = []
    by_id: dict[str, _Call] = {}
    for i, it in enumerate(items):
        if it.role == AGENT:
            for e, k, b in it.blocks("tool_use"):
                c = _Call(i, e, k, b)
                calls.append(c)
                by_id.setdefault(b["id"], c)
    for it in items:
        if it.kind != "user":
            continue
        for e, k, r in it.blocks("tool_result"):
            c = by_id.get(r["tool_use_id"])
            if c is None or c.results:
                why = (
                    "answers no call of the conversation"
                    if c is None
                    else "answers a call already answered"
                )
                yield file_warning(
                    path,
                    f"line {e.n}",
                    "unpaired_result",
                    f"message.content[{k}]: result for {r['tool_use_id']!r} {why}; not imported",
                )
                continue
            c.results.append((e, k, r))
    for it in items:
        if it.why:
            yield file_warning(
                path, f"line {it.n}", "message_not_imported", f"{it.why}; not imported"
            )

    said, last, unsaid = conversation(  # it reads dicts: one per item, by index
        [{"i": i} for i in range(len(items))],
        lambda m: items[m["i"]].role,
        lambda m: _speaks(items[m["i"]]),
    )
    for n, what in unsaid:
        yield file_warning(
            path, f"line {items[n].n}", "message_not_imported", f"{what}; not imported"
        )
    # in message order; a response's calls in the order it made them
    turns: list[tuple[int, int, Any]] = [(c.item, j, c) for j, c in enumerate(calls)]
    turns = sorted([*turns, *((x.at, -1, x) for x in said)], key=lambda t: (t[0], t[1]))
    pairs: list[tuple[Action, Observation, str | None]] = []
    starts: list[datetime | None] = []
    reasoned: set[int] = set()
    names: list[str] = []
    for i, _, x in turns:
        if isinstance(x, Said):
            it = items[i]
            pairs.append(
                x.turn(
                    lambda n: (items[n].said, f"line {items[n].n}: message.content"),
                    len(pairs),
                    parts,
                    _thinking(it),
                )
            )
            starts.append(it.events[0].at)
            continue
        c = x
        names.append(c.name)
        if not c.results:
            yield file_warning(
                path,
                f"line {c.event.n}",
                "unpaired_call",
                f"{c.name} call {c.block['id']!r}: no result; no turn (what the environment"
                " answered is unknown)",
            )
            continue
        obs, no_turn = reader.answer(c, len(pairs))
        if obs is None:
            kind, why = no_turn
            yield file_warning(
                path,
                f"line {c.results[0][0].n}",
                kind,
                f"{c.name} call {c.block['id']!r} (line {c.event.n}): {why}; no turn",
            )
            continue
        reasoning = None
        if i not in reasoned:
            reasoned.add(i)
            it = items[i]
            text = parts.text(
                it.said, f"turn {len(pairs)} reasoning (line {it.n}: message.content)"
            )
            reasoning = join_reasoning(_thinking(it), text)
        pairs.append((_action(c), obs, reasoning))
        starts.append(c.event.at)

    task = next(
        (
            parts.text(it.said, f"task (line {it.n}: message.content)")
            for it in items
            if it.role == USER
        ),
        None,
    )
    if fork is not None and fork.directive is not None:
        task = fork.directive
    final = last and parts.text(
        items[last.at].said, f"final message (line {items[last.at].n}: message.content)"
    )
    yield from parts.warnings()
    models = list(
        dict.fromkeys(
            e.d["message"]["model"]
            for e in messages
            if e.kind == "assistant"
            and isinstance(e.d["message"].get("model"), str)
            and e.d["message"]["model"] != "<synthetic>"
        )
    )
    versions = list(
        dict.fromkeys(e.d["version"] for e in messages if isinstance(e.d.get("version"), str))
    )
    sessions = list(dict.fromkeys(e.session for e in messages if e.session))
    leaf = messages[-1]
    session = leaf.session or (sessions[-1] if sessions else None)
    origin = session or origin_stem(path)
    lineage: dict[str, Any] = {"resumed_from": [s for s in sessions if s != origin] or None}
    if sub is not None:  # a subagent of session `session`
        origin = f"{origin}:{sub.key}"
        lineage = {"parent_session": session, "agent_id": sub.agent_id, **sub.meta}
        if fork is not None:
            lineage["forked"] = True
    title = next((summaries[e.uuid] for e in reversed(messages) if e.uuid in summaries), None)
    branch = next(
        (
            e.d["gitBranch"]
            for e in messages
            if isinstance(e.d.get("gitBranch"), str) and e.d["gitBranch"]
        ),
        None,
    )
    t = build(
        NAME,
        origin,
        domain or guess_domain(names, "swe"),
        pairs,
        task_description=task,
        instruction=task,
        agent={"name": "claude-code", "model": models[0] if models else None},
        outcome=Outcome(),
        metadata={
            "cwd": cwd,
            "git_branch": branch,
            "claude_code_version": ", ".join(versions) or None,
            "models": models if len(models) > 1 else None,
            "title": title,
            **lineage,
            "final_message": final,
        },
    )
    for turn, at in zip(t.turns, starts, strict=True):
        turn.started_at = at
    times = [e.at for e in messages if e.at is not None]
    t.started_at = min(times) if times else first.at
    yield t


def _speaks(it: _Item) -> bool:
    return not it.blocks("tool_use") and any(
        isinstance(b, dict) and b.get("text", "").strip() for b in it.said
    )


def _thinking(it: _Item) -> str | None:
    thoughts = (b.get("thinking") for _, _, b in it.blocks("thinking"))
    return join_reasoning(*(t for t in thoughts if isinstance(t, str)))


def _action(c: _Call) -> Action:
    return call_action(c.name, c.input, f"line {c.event.n}: message.content[{c.k}].input")


def call_action(name: str, args: Any, place: str = "input") -> Action:
    """The action a Claude Code tool call `name(args)` is, as in a session: a shell tool
    (`SHELLS`) with a `command` string is a `command` (Claude Code's options `description`,
    `timeout`, `run_in_background` are not the command), any other call a tool call
    (`common.shell_or_tool`); also for files other tools wrote from a session (harbor's
    ATIF keeps a call's `function_name` and `arguments`)."""
    return shell_or_tool(name, args, place, SHELLS)
