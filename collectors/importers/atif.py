"""Harbor ATIF `trajectory.json`: {schema_version: "ATIF-v1.x", session_id, agent, steps[]}.

Each agent step's tool_calls[{tool_call_id, function_name, arguments}] become turns in
their listed order (parallel calls keep the order the agent emitted them); each is
paired with observation.results[{source_call_id, content}] by id (a call with no result
makes no turn, `unpaired_call`: what it answered is unknown; a result for no call of its
step is not imported: `unpaired_result`). Results without a source_call_id answer their
own step's calls (those without a tool_call_id, if any): one each by position when there
are as many and no result has an id, else joined, the last of those calls (Terminus-2's
screen after all the step's keystrokes); the earlier calls have no output of their own:
what each printed is unknown, so each makes no turn (`unpaired_call`), as any call
without a result (before, each was a turn with an empty observation, trained as "printed
nothing"). A result with no content that refers to a subagent's trajectory
(subagent_trajectory_ref) has the refs' `extra.summary` as its text; that trajectory is
not imported (`subagent_not_imported`). The step's message and reasoning_content go to
the `reasoning` of the first of its calls that makes a turn (a first call left
unanswered leaves them to the next). Task <- first user step; the first system step's
message (the agent's system prompt) -> metadata `agent_system_prompt`. A step's
`timestamp` (ISO 8601) -> `started_at` of each turn it made; the trajectory's
`started_at` <- the earliest step timestamp (`ended_at` stays null: ATIF says when a
step happened, not when the run ended). Content parts (v1.6) that hold no text (images)
are left out and reported (`non_text_part`); a call whose results hold such parts only
makes no turn (`unpaired_call`, `common.no_text`). Domain from tool names. A field of the
wrong type (`arguments` neither an object nor a string holding one; `steps`,
`tool_calls` or `observation.results` no list, a call or `observation` no object, a
`timestamp` no ISO 8601 string) refuses the file (`invalid`, naming the field).

What the agent said to its user is a turn too: an agent step with no tool_calls but a
`message`, answered by one or more user steps before the next agent step, is a `text`
turn (the message its action, the user messages joined with "\n" its observation, the
step's reasoning_content its reasoning, its timestamp its `started_at`), in step order
among the tool-call turns. The first user step stays the task, not a turn. The agent's
last message, if no user answered it, -> metadata `final_message`. What is neither is
not imported and is reported (`message_not_imported`, naming the step): a user step that
answers no agent message, a system step after the first, an agent message no user
answered that is not the last.

Terminus-2 (harbor's reference agent; the agent's `name` says terminus) writes its own
text around the terminal's in each result (`_terminus`): the header of the screen
("New Terminal Output:\n" / "Current Terminal Screen:\n"), its warnings about the
agent's last response ("Previous response had warnings:\nWARNINGS: - ...\n\n" before
the screen: not the environment's, they go to metadata `format_warnings`, a list of
{turn, warnings}), the question after `mark_task_complete` ("Current terminal
state:\n<screen>\n\nAre you sure you want to mark the task as complete? ..."), its
timeout template ("Previous command:\n...\n\nThe previous command timed out after N
seconds ... Here is the current state of the terminal:\n\n<screen>": the screen +
`[timed out]`, an error, `timed_out` state) and the notice of its output limit ("\n[...
output limited to N bytes; M interior bytes omitted ...]\n" where it cut: the two ends
kept, `observation.truncated`). Only these exact templates, whole and in their place
(the limit notice exactly where Terminus-2's cut puts it), are removed; a screen that
shows text like them, and other agents' results, keep it.

Other agents' results, as harbor's converters keep them, are read as those agents'
importers read them (`_own_text`, keyed on the exact `agent.name`; a call answered by
one result): `mini-swe-agent` (each tool message's rendered content:
`mini_swe_agent.rendered`; a call it never ran is no turn, `not_run`); `swe-agent`
(`convert_swe_agent_to_atif`: a `swe_agent_action` call `{raw_action}` answered by the
step's `observation` as written: `swe_agent.harness_observation` reads its timeouts,
a 0.x failure notice (`swe_agent.harness_failure`) makes no turn, `harness_failure`; a
step with which SWE-agent ended the run itself (`exit_cost`..., 1.x's `exit` answered
"Exited") is no turn, its action metadata `exit_action`); `openhands`
(`OpenHands._convert_event_to_step`: the observation event's `content` alone, without
its type and `extras`: the controller's and runtime's messages for an action not run,
or failed, make no turn, `not_run` / `harness_failure`; by the function called, the
0.50+ cut of a command's output, an IPython cell's Jupyter lines and the browser's frame
are read as `openhands.observation` reads them; the step's `message`, OpenHands'
description of the action or of its observation, is not reasoning:
`_openhands_reasoning`). `opencode`, `qwen-code`, `openhands-sdk` and `goose` results
are read by `harbor_agents` (OpenCode's bash notices, timeouts, cuts and
`Truncate.output`'s notice; Qwen Code's shell framing as Gemini CLI's, with its own
timeout and long-run advisory; the SDK terminal's cut, refusals and failures; goose's
shell placeholder, cut notice, exit-code and timeout lines and own failures), and a call
harbor kept no result for (OpenCode's tool error; the SDK's own error event) is no turn;
their shell calls are `command`s (`harbor_agents.action`). Other agents' results (aider,
cline, cursor-cli, copilot-cli, kimi-cli, trae-agent, ...) are kept as they are.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from worldtrace.schemas import Action, Observation, Outcome

from . import claude_code, codex, gemini_cli, harbor_agents, mini_swe_agent, openhands, swe_agent
from .common import (
    AGENT,
    SYSTEM,
    USER,
    ImportProblem,
    InvalidField,
    MissingField,
    NonText,
    build,
    conversation,
    expected,
    guess_domain,
    iso_timestamp,
    join_reasoning,
    kept_ends,
    no_text,
    null_or_missing,
    origin_stem,
    record_id,
    textless,
    timed_out,
    tool_action,
    warning,
)
from .common import shown as shown_value

NAME = "atif"
KNOWN_MAJOR = "ATIF-v1."


def detect(path: Path, head: Any) -> bool:
    return isinstance(head, dict) and str(head.get("schema_version", "")).startswith("ATIF")


def parse(path: Path, data: Any, domain: str | None = None) -> Iterator[Any]:
    if not isinstance(data, dict):  # `--format atif` on a list, a number...
        raise expected("record", "an object with a `steps` list", data)
    version = str(data.get("schema_version", ""))
    if not version.startswith(KNOWN_MAJOR):
        yield ImportProblem(
            str(path),
            "",
            "unknown_version",
            f"{version!r} is not {KNOWN_MAJOR}x; importing best effort",
            fatal=False,
        )
    steps = data.get("steps")
    if not isinstance(steps, list):
        kind = "missing_field" if steps is None else "invalid"
        msg = "no `steps` list" if steps is None else str(expected("steps", "a list", steps))
        yield ImportProblem(str(path), "", kind, msg)
        return
    pairs = []
    starts: list[datetime | None] = []
    names = []
    times: list[datetime] = []
    task = system = None
    parts = NonText()
    agent = data.get("agent") or {}
    who = agent.get("name") if isinstance(agent, dict) else None
    who = who if isinstance(who, str) else None
    terminus = "terminus" in str(who or "").lower()
    ended: list[str] = []  # SWE-agent's own end of the run (`exit_cost`, ...): no turn
    format_warnings: list[dict[str, Any]] = []
    for n, step in enumerate(steps):
        if not isinstance(step, dict):
            raise expected(f"steps[{n}]", "an object", step)
        if step.get("source") not in ROLES:
            yield _unknown_source(path, n, step.get("source"))
    answered, last, unsaid = conversation(steps, lambda st: ROLES.get(st.get("source")), _speaks)
    said = {x.at: x for x in answered}
    for n, step in enumerate(steps):  # n: the step's index in the file, for problems
        try:
            at = iso_timestamp(step.get("timestamp"), f"steps[{n}].timestamp")
        except InvalidField as exc:  # the message names the field
            yield ImportProblem(str(path), "", "invalid", str(exc))
            return
        times += [at] if at else []
        src = step.get("source")
        if src == "system" and system is None:
            system = parts.text(step.get("message"), f"system prompt (steps[{n}].message)")
        if src == "user" and task is None:
            task = parts.text(step.get("message"), f"task (steps[{n}].message)")
        if n in said:  # what the agent said to its user, the user's replies
            reasoning = step.get("reasoning_content")
            pairs.append(
                said[n].turn(
                    lambda k: (steps[k].get("message"), f"steps[{k}].message"),
                    len(pairs),
                    parts,
                    join_reasoning(reasoning) if isinstance(reasoning, str) else None,
                )
            )
            starts.append(at)
            continue
        calls = step.get("tool_calls") or []
        if src != "agent" or not calls:
            continue
        bad = _call_shape(n, calls)
        if bad:
            yield ImportProblem(str(path), "", "invalid", bad)
            return
        try:
            found = _results(n, step.get("observation"))
        except InvalidField as exc:  # the message names the field
            yield ImportProblem(str(path), "", "invalid", str(exc))
            return
        answers, together, stray = _pair(calls, found)
        for j, cid in stray:
            yield ImportProblem(
                str(path),
                f"steps[{n}].observation.results[{j}]",
                "unpaired_result",
                f"result for {cid!r} answers no call of its step; not imported",
                fatal=False,
            )
        turn = len(pairs)
        message = parts.text(step.get("message"), f"turn {turn} reasoning (steps[{n}].message)")
        if who == openhands.NAME:
            said = [r.get("content") for _, r in answers[0]] if answers else []
            message = _openhands_reasoning(message, calls[0], said)
        reasoning = join_reasoning(step.get("reasoning_content"), message)  # its first turn's
        for k, call in enumerate(calls):
            name = call.get("function_name")
            if not name:
                yield ImportProblem(
                    str(path), f"steps[{n}].tool_calls[{k}]", "missing_field", "no function_name"
                )
                return
            end = _swe_agent_end(call, answers[k]) if who == swe_agent.NAME else None
            if end:
                ended.append(end)
                continue
            names.append(name)
            cid = call.get("tool_call_id")
            missing = not answers[k] and k not in together
            null = next((j for j, r in answers[k] if _unknown(r)), None)
            bare = _textless(n, answers[k])
            texts, cut, killed = [], False, False
            for j, r in [] if bare else answers[k]:
                place = f"steps[{n}].observation.results[{j}]"
                text = parts.text(
                    r.get("content"), f"turn {len(pairs)} observation ({place}.content)"
                )
                refs = r.get("subagent_trajectory_ref")
                if refs:  # the subagent's result is in its own file
                    summary, named = _subagents(refs)
                    note = "" if text or not summary else "; its summary is the observation"
                    text = text or summary
                    yield ImportProblem(
                        str(path),
                        place,
                        "subagent_not_imported",
                        f"the subagent's own trajectory ({named}) is not imported{note}",
                        fatal=False,
                    )
                if terminus:
                    shown = _terminus(text)
                    text = shown.text
                    cut, killed = cut or shown.truncated, killed or shown.timed_out
                    if shown.warnings is not None:
                        format_warnings.append({"turn": len(pairs), "warnings": shown.warnings})
                texts.append(text)
            try:
                action = _agent_action(
                    who, name, call.get("arguments"), f"steps[{n}].tool_calls[{k}].arguments"
                )
            except InvalidField as exc:  # the message names the field
                yield ImportProblem(str(path), "", "invalid", str(exc))
                return
            if not answers[k] and k in together:  # the step's screen is the last call's
                yield ImportProblem(
                    str(path),
                    f"steps[{n}].tool_calls[{k}]",
                    "unpaired_call",
                    f"no result of its own for call {cid!r} ({name}): the step's results"
                    f" without a source_call_id answer tool_calls[{max(together)}], the last"
                    " of the calls they answer; what this one printed is unknown; no turn",
                    fatal=False,
                )
                continue
            if bare:  # images only: what it answered in text is unknown, never ""
                yield ImportProblem(
                    str(path),
                    f"steps[{n}].tool_calls[{k}]",
                    "unpaired_call",
                    f"{no_text(bare, f'call {cid!r} ({name})')}; no turn",
                    fatal=False,
                )
                continue
            text = "\n".join(texts)
            obs = timed_out(text, truncated=cut) if killed else Observation(text, truncated=cut)
            read = _agent_answer(
                who, n, step, call, answers[k], None if missing else texts, len(pairs), parts
            )
            if isinstance(read, _NoTurn):
                yield warning(read.kind, f"steps[{n}].tool_calls[{k}]: {read.what(action.text)}")
                continue
            if null is not None and read is None:  # the agent's own reading knows no null
                unknown = f"steps[{n}].observation.results[{null}]"
                yield ImportProblem(
                    str(path),
                    f"steps[{n}].tool_calls[{k}]",
                    "unpaired_call",
                    f"{null_or_missing(dict(answers[k])[null], 'content', unknown)}, the answer to"
                    f" call {cid!r} is unknown; no turn",
                    fatal=False,
                )
                continue
            if missing:  # what it answered is unknown: an empty output would pose as it
                yield ImportProblem(
                    str(path),
                    f"steps[{n}].tool_calls[{k}]",
                    "unpaired_call",
                    f"no result for call {cid!r} ({name}); no turn",
                    fatal=False,
                )
                continue
            obs = read or obs
            pairs.append((action, obs, reasoning))
            reasoning = None
            starts.append(at)
    for n, what in unsaid:
        yield ImportProblem(
            str(path), f"steps[{n}]", "message_not_imported", f"{what}; not imported", fatal=False
        )
    final = last and parts.text(
        steps[last.at].get("message"), f"final message (steps[{last.at}].message)"
    )
    yield from parts.warnings()
    tools = agent.get("tool_definitions") if isinstance(agent, dict) else None
    try:
        t = build(
            NAME,
            record_id(data, "session_id") or origin_stem(path),
            domain or guess_domain(names, "terminal"),
            pairs,
            task_description=task,
            instruction=task,
            action_space=tools if isinstance(tools, list) else None,
            tools_field="agent.tool_definitions",
            agent={"name": agent.get("name"), "model": agent.get("model_name")}
            if isinstance(agent, dict)
            else None,
            outcome=Outcome(),
            metadata={
                "schema_version": version,
                "agent_version": agent.get("version") if isinstance(agent, dict) else None,
                "agent_system_prompt": system,
                "final_message": final,
                "format_warnings": format_warnings or None,
                "exit_action": ended[-1] if ended else None,
            },
        )
    except MissingField as exc:
        yield ImportProblem(str(path), "", "missing_field", str(exc))
        return
    for x, at in zip(t.turns, starts, strict=True):
        x.started_at = at
    t.started_at = min(times) if times else None
    yield t


ROLES = {"agent": AGENT, "user": USER, "system": SYSTEM}
"""A step's `source`; another source is passed over (ATIF has no tool-result steps)."""


def _unknown_source(path: Path, n: int, source: Any) -> ImportProblem:
    """A step of a source ATIF does not have (`ROLES`; matched as written, lower case):
    not imported, named."""
    known = isinstance(source, str) and source.lower() in ROLES
    hint = " (sources are lower case)" if known else ""
    return ImportProblem(
        str(path),
        f"steps[{n}]",
        "message_not_imported",
        f"a step of the unknown source {shown_value(source)}{hint}; not imported",
        fatal=False,
    )


def _unknown(result: dict[str, Any]) -> bool:
    """A result whose `content` is null (or left out) and that names no subagent (whose
    summary would be its text): read as ATIF, what the tool answered is unknown, the call
    makes no turn (an empty output would pose as what it printed). Agents whose results
    harbor keeps in their own way (a goose or Gemini CLI error: no content) are read by
    their own rules (`_agent_answer`)."""
    return result.get("content") is None and not result.get("subagent_trajectory_ref")


def _textless(n: int, answers: list[tuple[int, dict[str, Any]]]) -> list[tuple[str, Any]] | None:
    """(field, parts) of each of a call's results (step `n`'s) when every one holds content
    parts but no text (v1.6 image parts: a screenshot), else None: what it answered in
    text is unknown, so the call makes no turn (`common.no_text`), whatever the agent."""
    found = []
    for j, r in answers:
        at = f"steps[{n}].observation.results[{j}].content"
        left = None if r.get("subagent_trajectory_ref") else textless(r.get("content"), at)
        if left is None:
            return None
        found.append((at, left))
    return found or None


def _speaks(step: dict[str, Any]) -> bool:
    return not step.get("tool_calls") and bool(step.get("message"))


def _results(n: int, observation: Any) -> list[tuple[int, dict[str, Any]]]:
    """(position, result) of each result object of step `n`'s observation."""
    if observation is None:
        return []
    if not isinstance(observation, dict):
        raise expected(f"steps[{n}].observation", "an object", observation)
    results = observation.get("results")
    if results is None:
        return []
    if not isinstance(results, list):
        raise expected(f"steps[{n}].observation.results", "a list", results)
    found = [(j, r) for j, r in enumerate(results) if isinstance(r, dict)]
    for j, r in found:
        cid = r.get("source_call_id")
        if cid is not None and not isinstance(cid, str | int):
            raise expected(f"steps[{n}].observation.results[{j}].source_call_id", "a string", cid)
    return found


def _pair(
    calls: list[dict[str, Any]], found: list[tuple[int, dict[str, Any]]]
) -> tuple[list[list[tuple[int, dict[str, Any]]]], set[int], list[tuple[int, Any]]]:
    """Step results per call (position, result), in file order; the calls answered
    together by results without a `source_call_id`; (position, id) of each first result
    for an id no call has. A result with an id answers the calls with that id. Those
    without one answer the calls without one (none: every call): one each by position
    when there are as many and no result has an id, else all of them, joined, the last
    (Terminus-2: the screen after all the step's keystrokes)."""
    per: list[list[tuple[int, dict[str, Any]]]] = [[] for _ in calls]
    ids = [c.get("tool_call_id") for c in calls]
    stray: dict[Any, int] = {}
    idless = []
    for j, r in found:
        cid = r.get("source_call_id")
        if cid is None:
            idless.append((j, r))
        elif cid in ids:
            for k, x in enumerate(ids):
                per[k] += [(j, r)] if x == cid else []
        else:
            stray.setdefault(cid, j)
    targets = [k for k, x in enumerate(ids) if x is None] or list(range(len(calls)))
    if len(idless) == len(targets) == len(found):
        for k, x in zip(targets, idless, strict=True):
            per[k].append(x)
    elif idless and targets:
        per[targets[-1]] = sorted(per[targets[-1]] + idless, key=lambda x: x[0])
    together = set(targets) if idless else set()
    return per, together, [(j, cid) for cid, j in stray.items()]


def _subagents(refs: Any) -> tuple[str, str]:
    """(the summaries, joined, of `subagent_trajectory_ref`'s entries that have one in
    `extra.summary`; the trajectory paths, else session ids, they name)."""
    refs = [r for r in (refs if isinstance(refs, list) else [refs]) if isinstance(r, dict)]
    extras = [r.get("extra") for r in refs]
    summary = "\n".join(
        x["summary"] for x in extras if isinstance(x, dict) and isinstance(x.get("summary"), str)
    )
    names = [r.get("trajectory_path") or r.get("session_id") for r in refs]
    return summary, ", ".join(str(x) for x in names if x) or "unnamed"


def _call_shape(n: int, calls: Any) -> str | None:
    """What is wrong with step `n`'s `tool_calls` if it is no list of objects."""
    if not isinstance(calls, list):
        return str(expected(f"steps[{n}].tool_calls", "a list", calls))
    bad = next((k for k, c in enumerate(calls) if not isinstance(c, dict)), None)
    return (
        None
        if bad is None
        else str(expected(f"steps[{n}].tool_calls[{bad}]", "an object", calls[bad]))
    )


# ------------------------------------------------------------------ other agents' own text

OWN_TEXT = frozenset({mini_swe_agent.NAME, swe_agent.NAME, openhands.NAME})
"""Agents (`agent.name`) whose results harbor keeps as the agent wrote or recorded them,
read as the agent's own importer reads them (`_own_text`)."""
CLAUDE_CODE = "claude-code"
"""harbor's `ClaudeCode` ATIF: a result's `content` joins the tool_result's content, harbor's
rendering of `toolUseResult` (`[stdout]`, `[stderr]`, `[exit_code] N`, `[metadata] ...`)
and `[error] tool reported failure`; the block and `toolUseResult` themselves are in
`extra.tool_result_metadata` (`raw_tool_result`, `tool_use_result`), read as a Claude Code
session's results are (`claude_code.tool_answer`)."""
SWE_AGENT_CALL = "swe_agent_action"
"""harbor's `convert_swe_agent_to_atif`: each step's action is a call of this function,
`{raw_action: <the step's action>}`, answered by the step's `observation` as it is."""
OPENHANDS_RESULTS = {
    "execute_bash": "run",
    "execute_powershell": "run",
    "execute_ipython_cell": "run_ipython",
    "browser": "browse",
    "web_read": "browse",
}
"""The function an OpenHands (V0, CodeAct) agent called -> the type of the observation
answering it. harbor's `OpenHands._convert_event_to_step` keeps only the observation's
`content` (not its type, nor `extras`: exit code, metadata prefix and suffix)."""
OPENHANDS_THINKING = "I am thinking...: "
OPENHANDS_DONE = "All done! What's next on the agenda?"


def _openhands_described(name: Any, args: Any) -> set[str]:
    """What OpenHands (V0) writes as the `message` of the events of a call of `name`:
    the action's description (the `message` property of its Action class), or, for an
    action without one (a file edit), the observation's. harbor's ATIF copies it into the
    step's `message`; the model's thought (the action's `thought`) is not in it.
    Templates read in openhands-ai 0.22.0-0.62.0 (`events/action/*.py`,
    `events/observation/files.py`, `codeact_agent/function_calling.py`)."""
    a = args if isinstance(args, dict) else {}

    def get(key: str) -> str | None:
        return a[key] if isinstance(a.get(key), str) else None

    if name in ("execute_bash", "execute_powershell") and get("command") is not None:
        return {f"Running command: {get('command')}"}
    if name == "execute_ipython_cell" and get("code") is not None:
        return {f"Running Python code interactively: {get('code')}"}
    if name == "browser" and get("code") is not None:
        return {f"I am interacting with the browser:\n```\n{get('code')}\n```"}
    if name == "web_read" and get("url") is not None:
        return {f"I am browsing the URL: {get('url')}"}
    if name in ("str_replace_editor", "edit_file") and get("path") is not None:
        if get("command") == "view":
            return {f"Reading file: {get('path')}"}
        return {f"I edited the file {get('path')}.", f"I wrote to the file {get('path')}."}
    if name == "delegate_to_browsing_agent":
        return {"I'm asking BrowsingAgent for help with this task."}
    if name == "request_condensation":
        return {"Requesting a condensation of the conversation history."}
    if name == "task_tracker":
        tasks = a.get("task_list") or []
        n = len(tasks) if isinstance(tasks, list) else -1
        return {"Clearing the task list." if n == 0 else f"Managing {n} task item{'s' * (n != 1)}."}
    if name == "finish":
        return {OPENHANDS_DONE}
    if a:  # an MCP tool (`MCPAction`)
        return {f"I am interacting with the MCP server with name:\n```\n{name}\n```\nand arguments:\n```\n{a}\n```"}  # fmt: skip
    return set()


def _openhands_reasoning(
    message: str | None, call: dict[str, Any], results: list[str]
) -> str | None:
    """The model's own words in the `message` of an OpenHands step as harbor writes it:
    a think's thought and a finish's thought; OpenHands' description of the action
    (`_openhands_described`) and an error observation's text (its `message` is its
    content, `results`) are not reasoning."""
    if not message:
        return message
    name = call.get("function_name")
    if name == "think" and message.startswith(OPENHANDS_THINKING):
        return message[len(OPENHANDS_THINKING) :] or None
    if message in results or message in _openhands_described(name, call.get("arguments")):
        return None
    return message


CODEX_SHELLS = frozenset({"shell", "container.exec", "shell_command", "local_shell"})
"""Codex's shell functions: harbor's Codex ATIF keeps a structured output's `output` field
(its exit code in the step's `extra.tool_metadata`, or per call in
`extra.tool_call_details[id].metadata`), any other output as Codex wrote it (its framing,
its refusals): read by `codex.output_answer`."""


def _codex_exit(step: dict[str, Any], cid: Any, calls: int) -> int | None:
    """The exit code harbor's Codex ATIF keeps beside the step for call `cid`."""
    extra = step.get("extra") if isinstance(step.get("extra"), dict) else {}
    details = extra.get("tool_call_details")
    meta = details.get(cid, {}).get("metadata") if isinstance(details, dict) else None
    if meta is None and calls == 1:
        meta = extra.get("tool_metadata")
    code = meta.get("exit_code") if isinstance(meta, dict) else None
    return code if type(code) is int else None


def _claude_code_raw(answers: list[tuple[int, dict[str, Any]]]) -> tuple[dict, Any] | None:
    """(tool_result block, toolUseResult) harbor kept beside a call's one result."""
    if len(answers) != 1:
        return None
    extra = answers[0][1].get("extra")
    meta = extra.get("tool_result_metadata") if isinstance(extra, dict) else None
    raw = meta.get("raw_tool_result") if isinstance(meta, dict) else None
    if not isinstance(raw, dict) or raw.get("type") != "tool_result":
        return None
    return raw, meta.get("tool_use_result")


@dataclass
class _NoTurn:
    """A call the agent's harness did not run (`not_run`) or failed to run
    (`harness_failure`), by its own text in the result."""

    kind: str
    harness: str
    why: str = ""

    def what(self, action: str) -> str:
        if not self.harness:  # the agent's importer said why
            return f"{self.why}; no turn"
        did = "did not run" if self.kind == "not_run" else "failed to run"
        return f"{self.harness} {did} {action!r}{self.why}; no turn"


def _agent_answer(
    who: str | None,
    n: int,
    step: dict[str, Any],
    call: dict[str, Any],
    answers: list[tuple[int, dict[str, Any]]],
    texts: list[str] | None,
    turn: int,
    parts: NonText,
) -> Observation | _NoTurn | None:
    """Call `call` of step `n`: its result read as the agent's own importer reads it, for
    the agents harbor keeps in their own text (module doc); None: read as ATIF (no such
    agent, or not one result). `texts` None: the call has no result."""
    name = call.get("function_name")
    if who in harbor_agents.AGENTS and (texts is None or len(texts) == 1):
        read = harbor_agents.answer(who, name, call.get("arguments"), texts and texts[0])
        if read is None:
            return None
    elif texts is None:
        return None
    elif who == CLAUDE_CODE and (raw := _claude_code_raw(answers)) is not None:
        read = claude_code.tool_answer(name, call.get("arguments"), *raw, parts, turn)
    elif who == gemini_cli.NAME and len(texts) == 1:
        read = gemini_cli.tool_answer(name, call.get("arguments"), texts[0])
    elif who == codex.NAME and name in CODEX_SHELLS and len(texts) == 1:
        cid = call.get("tool_call_id")
        read = codex.output_answer(texts[0], _codex_exit(step, cid, len(step["tool_calls"])))
    elif who in OWN_TEXT and len(texts) == 1:
        place = f"steps[{n}].observation.results[{answers[0][0]}]"
        return _own_text(who, texts[0], name, place, turn, parts)
    else:
        return None
    return _NoTurn(read[0], "", read[1]) if isinstance(read, tuple) else read


AGENT_ACTIONS: dict[str, Callable[[str, Any, str], Action]] = {
    CLAUDE_CODE: claude_code.call_action,
    gemini_cli.NAME: gemini_cli.call_action,
    codex.NAME: codex.call_action,
    **{a: functools.partial(harbor_agents.action, a) for a in harbor_agents.AGENTS},
}
"""Agents whose calls are the actions their own importers make of them (a shell call is a
`command`): `call_action(name, args, place)`; every other agent's call is the ATIF tool
call."""


def _agent_action(who: str | None, name: str, args: Any, place: str) -> Action:
    """Call `name(args)` as the action the agent's own importer makes of it
    (`AGENT_ACTIONS`), else the ATIF tool call."""
    return AGENT_ACTIONS.get(who or "", tool_action)(name, args, place)


def _own_text(
    agent: str, text: str, tool: str, place: str, turn: int, parts: NonText
) -> Observation | _NoTurn:
    """A result harbor kept in the agent's own text (module doc), read as the agent's
    importer reads it: mini-swe-agent's rendered message; a SWE-agent step's
    `observation` (its timeouts, its 0.x failure notices); an OpenHands observation's
    `content` (the controller's and runtime's not-run and failure messages, whatever the
    tool; for the tool's observation type its cut, a cell's Jupyter lines, the browser's
    frame). `tool`: the function called; `place`: the result, `turn`: the turn it would
    be (for what `parts` reports)."""
    if agent == mini_swe_agent.NAME:
        obs = mini_swe_agent.rendered(text)
        return _NoTurn("not_run", agent) if obs is None else obs
    if agent == swe_agent.NAME:
        failed = swe_agent.harness_failure(text)
        if failed:
            return _NoTurn("harness_failure", "SWE-agent", f" ({failed})")
        return swe_agent.harness_observation(text, None)
    said = openhands.observation({"observation": "error", "content": text}, place, turn, NonText())
    if not isinstance(said, openhands.NoTurn):
        typ = OPENHANDS_RESULTS.get(tool)
        framed = {"metadata": {}} if typ == "run" else {}  # 0.19+: `content` is the output
        said = openhands.observation(
            {"observation": typ, "content": text, "extras": framed}, place, turn, parts
        )
    if isinstance(said, openhands.NoTurn):
        return _NoTurn(said.kind, "OpenHands", f": {said.why}")
    return said


def _swe_agent_end(call: dict[str, Any], answers: list[tuple[int, dict[str, Any]]]) -> str | None:
    """The action of a harbor SWE-agent call with which SWE-agent ended the run itself
    (`swe_agent.EXIT_ACTIONS`, answered "Exited (autosubmitted)"; 1.x's `exit`, answered
    exactly "Exited"), else None: no command ran (metadata `exit_action`, as the
    SWE-agent importer keeps it)."""
    args = call.get("arguments")
    raw = args.get("raw_action") if isinstance(args, dict) else None
    if call.get("function_name") != SWE_AGENT_CALL or not isinstance(raw, str):
        return None
    cmd = raw.strip()
    if cmd in swe_agent.EXIT_ACTIONS:
        return cmd
    said = [r.get("content") for _, r in answers]
    return "exit" if cmd == "exit" and said == ["Exited"] else None


@dataclass
class _Shown:
    """What a Terminus-2 result holds of the terminal, and what its own text said."""

    text: str
    truncated: bool = False
    timed_out: bool = False
    warnings: str | None = None


SCREEN_HEADERS = ("New Terminal Output:\n", "Current Terminal Screen:\n")
"""TmuxSession.get_incremental_output: the new output since the last capture, else the
visible screen."""
_WARNINGS = re.compile(
    r"Previous response had warnings:\nWARNINGS: (?P<warnings>.*?)\n\n"
    r"(?=New Terminal Output:\n|Current Terminal Screen:\n|Previous command:\n)",
    re.S,
)
"""Terminus2's observation when its parser warned about the agent's response (the
response was run): `f"Previous response had warnings:\\n{feedback}\\n\\n{output}"`."""
_CONFIRM = re.compile(
    r"Current terminal state:\n(?P<screen>.*)\n\nAre you sure you want to mark the task as"
    r" complete\? This will trigger your solution to be graded and you won't be able to make"
    r" any further corrections\. If so, include (?:\"task_complete\": true in your JSON"
    r" response|<task_complete>true</task_complete>) again\.",
    re.S,
)
"""Terminus2._get_completion_confirmation_message (JSON and XML parsers)."""
_TIMEOUT = re.compile(
    r"Previous command:\n.*?\n\nThe previous command timed out after [\d.]+ seconds\n\n"
    r"It is possible that the command is not yet finished executing\. If that is the case,"
    r" then do nothing\. It is also possible that you have entered an interactive shell and"
    r" should continue sending keystrokes as normal\.\n\nHere is the current state of the"
    r" terminal:\n\n(?P<screen>.*)",
    re.S,
)
"""terminus_2/templates/timeout.txt, filled by Terminus2._execute_commands."""
_LIMIT = re.compile(
    r"\n\[\.\.\. output limited to (?P<max>\d+) bytes; \d+ interior bytes omitted \.\.\.\]\n"
)
"""Terminus2._limit_output_length's notice between the first and last max/2 bytes."""


def _terminus(text: str) -> _Shown:
    """The terminal's text in a Terminus-2 result and what Terminus-2's own text around it
    said (module doc): its warnings, its output limit, its completion question or timeout
    template, the screen's header; anything else is kept."""
    shown = _Shown(text)
    warned = _WARNINGS.match(text)
    if warned:
        shown.warnings, text = warned["warnings"], text[warned.end() :]
    text, shown.truncated = _unlimited(text)
    framed = _CONFIRM.fullmatch(text) or _TIMEOUT.fullmatch(text)
    if framed:
        shown.timed_out = framed.re is _TIMEOUT
        text, cut = _unlimited(framed["screen"])
        shown.truncated = shown.truncated or cut
    for header in SCREEN_HEADERS:
        if text.startswith(header):
            text = text[len(header) :]
            break
    shown.text = text
    return shown


def _unlimited(text: str) -> tuple[str, bool]:
    """`text` without Terminus-2's output-limit notice, and whether it had one: the notice
    only where the limit puts it, between the first and the last max/2 bytes (fewer by
    at most 3 where a character was split)."""
    for m in _LIMIT.finditer(text):
        head, tail = text[: m.start()], text[m.end() :]
        half = int(m["max"]) // 2
        if all(0 <= half - len(x.encode("utf-8", "surrogatepass")) <= 3 for x in (head, tail)):
            return kept_ends(head, tail), True
    return text, False
