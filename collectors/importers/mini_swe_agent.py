"""mini-swe-agent `.traj.json`: {info, messages[], trajectory_format} or a bare message list,
told by its content whatever its name (`detect`); v2's Responses API layout (response
objects and `function_call_output` items) read as its chat tool-call layout (`_chat`).

action <- the command of the assistant message's one ```bash block (v2:
```mswea_bash_command; a file with neither: any fenced block), closed as its
`action_regex` closes one (at a line starting with ```), never its prose; a
message with none or several was rejected by mini-swe-agent (a format error): no step
happened, no turn. v2 (`mini-swe-agent-1.1`) tool calls: each `bash` call's `command` is
an action, and a message with a call to another tool or without `command` is rejected
likewise. reasoning <- the prose around the block (with tool calls: the whole content,
on the first call); observation <- the message right after it (a call's: the `tool`
message with its `tool_call_id`, else the next one), `<returncode>` -> exit_code and
`<output>` -> text, all of it up to the template's (last) `</output>` with its own last
newline (`_OUT`) (none: no turn, an `unpaired_call` warning: what it printed is
unknown); a timeout notice -> the output so far + `[timed out]`, an error, state
`{"timed_out": true}`; task <- first user message; the (first) system message -> metadata
`agent_system_prompt` (a null one is unknown, not the empty prompt: reported,
`message_not_imported`); the action space is one `bash` tool; domain swe. A message is an
object and its `role` a string, as in the OpenAI importer: anything else is `invalid`,
naming it (a message passed over would leave the command before it unanswered).

The submission is not a turn: when the last command prints a finish marker
(`echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT`, or MINI_SWE_AGENT_FINAL_OUTPUT) and what
follows it is no command output (no `<returncode>`, no timeout notice), mini-swe-agent
saw the marker as the output's first line, ended the episode and wrote the rest of the
output as the last message (v2: an `exit` message): the agent's end-of-episode signal,
not an answer from the environment. The command -> metadata `submit_command`, that
message -> metadata `submission` (else `info.submission`). A marker the environment
answered with a `<returncode>` (not on the output's first line, or the command failed)
is an ordinary turn.

mini-swe-agent's own text is not the environment's answer. Besides its observation
template (`<returncode>`/`<output>`, read above), the branch of that template for an
output of 10,000 characters or more (`<warning>The output of your last command was too
long. ...</warning>` then `<output_head>`, `<elided_chars>N characters elided`,
`<output_tail>`) is the head and the tail it showed, each on its own lines, with
`observation.truncated`; its timeout template ("The last command <command>...</command>
timed out and has been killed. The output of the command was: ... Please try another
command ...", its long branch `<warning>Output was too long and has been
truncated.</warning>` likewise) is the output so far + `[timed out]`, as is v2's
timeout, an `<exception>An error occurred while executing the command: Command '...'
timed out after N seconds</exception>` before `<returncode>-1</returncode>`; an answer
that starts with its format error ("Please always provide EXACTLY ONE action in triple
backticks") means the message was rejected and nothing ran: no turn. Only these
templates, whole and in their layout (the whitespace between tags may differ), are read
so; an output that holds their words is the environment's and stays.
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from worldtrace.schemas import Action, Observation, Outcome
from worldtrace.schemas.validate import parse_json

from .common import (
    ImportProblem,
    MissingField,
    NonText,
    build,
    expected,
    join_reasoning,
    kept_ends,
    no_text,
    null_or_missing,
    origin_stem,
    shown,
    textless,
    timed_out,
    warning,
)

NAME = "mini-swe-agent"
_RC = re.compile(r"<returncode>\s*(-?\d+)\s*</returncode>")
_OUT = re.compile(r"<output>\n?(.*)</output>", re.S)
"""The output in v1's `<output>\n{{ output.output -}}\n</output>` and v2's
`<output>\n{{output.output}}</output>`: both render `<output>\n` + output + `</output>` (the
dash strips the template's newline, not the output's), so only the newline after `<output>`
is the template's, and the output runs to the last `</output>` (it may print the tag)."""
ACTION_TAGS = ("bash", "mswea_bash_command")
"""The fenced blocks mini-swe-agent reads as actions: v1's ```bash, v2's
```mswea_bash_command (a file with neither: any block, as its `action_regex` may say)."""
_ACTION = re.compile(r"```(?:" + "|".join(ACTION_TAGS) + r")\s*\n(.*?)\n```", re.S)
"""mini-swe-agent's `action_regex` (v1 "```bash\\s*\\n(.*?)\\n```", v2 the same with
mswea_bash_command; re.DOTALL): a block closes only at a line starting with ```, so
backticks inside the command are the command's."""
_ANY_BLOCK = re.compile(r"```[a-zA-Z0-9_\-]*\s*\n(.*?)\n```", re.S)
"""Any fenced block, closed as `_ACTION` is (a file with neither tag)."""
_TIMEOUT = re.compile(
    r"\s*The last command <command>.*?</command> timed out and has been killed\.", re.S
)
"""The first line of mini-swe-agent v1's `timeout_template` (agents/default.py AgentConfig,
config/*.yaml): a timeout, whatever follows."""
_ENDS = (
    r"<output_head>\n(?P<head>.*?)\n</output_head>\s*<elided_chars>\s*(?P<elided>\d+)"
    r" characters elided\s*</elided_chars>\s*<output_tail>\n(?P<tail>.*)\n</output_tail>"
)
"""The head and tail of a long output in mini-swe-agent's templates (`output[:5000]`,
`output[-5000:]` in its configs)."""
_LONG = re.compile(
    r"<returncode>(?P<rc>-?\d+)</returncode>\s*<warning>\s*The output of your last command"
    r" was too long\.(?:(?!</warning>).)*</warning>\s*" + _ENDS + r"\s*",
    re.S,
)
"""`action_observation_template` (v2: `observation_template`) for an output of 10,000
characters or more; the warning's later lines differ between versions and configs."""
_KILLED = re.compile(
    r"\s*The last command <command>.*?</command> timed out and has been killed\.\n"
    r"The output of the command was:\n ?(?:<output>\n(?P<out>.*)\n</output>|<warning>Output"
    r" was too long and has been truncated\.</warning>\s*" + _ENDS + r")\nPlease try another"
    r" command and make sure to avoid those requiring interactive input\.\s*",
    re.S,
)
"""The whole `timeout_template`, both branches (the Python default puts a space before
`<output>`)."""
_EXCEPTION = re.compile(r"<exception>(?P<info>.*?)</exception>\n", re.S)
"""v2's observation template starts with the execution's exception, if any."""
_EXCEPTION_RC = re.compile(r"<exception>(?P<info>.*?)</exception>\n(?=<returncode>)", re.S)
"""The same, ended by the `</exception>` the template's `<returncode>` follows (the
exception may quote a command that holds the tag)."""
_TIMED_OUT = re.compile(
    r"An error occurred while executing the command: Command '.*' timed out after [\d.]+"
    r" seconds",
    re.S,
)
"""v2 `exception_info` of a timeout (environments/local.py: `subprocess.TimeoutExpired`)."""
FORMAT_ERROR = "Please always provide EXACTLY ONE action in triple backticks"
"""How every `format_error_template` of mini-swe-agent's text mode starts: the answer to
a message it rejected (no command ran)."""
KNOWN_FORMATS = ("mini-swe-agent-1", "mini-swe-agent-1.1")
FINISH_MARKERS = ("COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT", "MINI_SWE_AGENT_FINAL_OUTPUT")
"""A command output whose first line is one of these ends the episode (mini-swe-agent's
`has_finished`)."""
BASH_TOOL = {
    "name": "bash",
    "description": "run one bash command (each in a new subshell)",
    "input_schema": {
        "type": "object",
        "properties": {"command": {"type": "string"}},
        "required": ["command"],
    },
}


RESPONSE = "response"
"""The `object` of a Responses API response: v2's Responses models
(`LitellmResponseToolcallModel`) keep each model turn as the response itself (`output`
items, no `role`), with `extra.actions`."""
RESULT_ITEM = "function_call_output"
"""The `type` of their results (`call_id`, `output`: the rendered template, `extra`)."""
MESSAGE_ITEM = "message"
"""The `type` of the messages they write themselves (a format error, a human's command):
a `role` and `input_text` parts."""
SNIFF_MESSAGES = 64
"""The messages `detect` looks at for mini-swe-agent's own hand (its first answer is
the fourth message, after format errors at most a few more)."""
_TEMPLATE = re.compile(
    r"\s*(?:<exception>.*?</exception>\s*)?<returncode>-?\d+</returncode>\s*<(?:output|warning)>",
    re.S,
)
"""How mini-swe-agent's observation templates (v1 `action_observation_template`, v2
`observation_template`) start an answer."""
TYPE_KEYS = ("agent_type", "model_type", "environment_type")
"""`info.config` keys naming mini-swe-agent's classes (`minisweagent.agents.default...`)."""


def detect(path: Path, head: Any) -> bool:
    """A mini-swe-agent trajectory, told by its content whatever its name: its
    `trajectory_format`, its `info` (`mini_version`, the `minisweagent.` classes of
    `info.config`) or its own hand in the messages (`_written`); a `.traj.json` file of
    messages on its name (its default name)."""
    if isinstance(head, dict):
        if str(head.get("trajectory_format", "")).startswith("mini-swe-agent"):
            return True
        messages = head.get("messages")
        return isinstance(messages, list) and (
            path.name.endswith(".traj.json") or _marked(head.get("info")) or _written(messages)
        )
    return (
        isinstance(head, list)
        and bool(head)
        and all(isinstance(m, dict) and "role" in m for m in head[:3])
        and (path.name.endswith(".traj.json") or _written(head))
    )


def _marked(info: Any) -> bool:
    """Whether `info` is mini-swe-agent's: its `mini_version`, or a class of its own in
    `info.config` (`agent_type`, `model_type`, `environment_type`)."""
    if not isinstance(info, dict):
        return False
    config = info.get("config")
    types = [config.get(k) for k in TYPE_KEYS] if isinstance(config, dict) else []
    return isinstance(info.get("mini_version"), str) or any(
        isinstance(t, str) and t.startswith("minisweagent.") for t in types
    )


def _written(messages: list[Any]) -> bool:
    """Whether the first messages show mini-swe-agent's own hand: an answer in one of its
    templates (observation, timeout, format error), v2's `extra` (`actions` beside a model
    message, `raw_output` beside a result), or a Responses API response among messages."""
    for m in messages[:SNIFF_MESSAGES]:
        if not isinstance(m, dict):
            return False
        extra = m.get("extra")
        if m.get("object") == RESPONSE or (
            isinstance(extra, dict) and ("actions" in extra or "raw_output" in extra)
        ):
            return True
        text = m.get("content")
        if m.get("role") in ("user", "tool") and isinstance(text, str) and _template(text):
            return True
    return False


def _template(text: str) -> bool:
    return bool(_TEMPLATE.match(text) or _TIMEOUT.match(text)) or text.startswith(FORMAT_ERROR)


def _is_message(m: Any) -> bool:
    """A message in a shape mini-swe-agent writes: a `role`, a Responses API response or
    a result item."""
    return isinstance(m, dict) and (
        "role" in m or m.get("object") == RESPONSE or m.get("type") == RESULT_ITEM
    )


def _chat(n: int, m: dict[str, Any]) -> tuple[dict[str, Any], str]:
    """Message `n` in the chat layout the importer reads, and the key its text is under in
    the file. A Responses API response is the assistant message of its `function_call`
    items (`id` <- `call_id`, as `parse_toolcall_actions_response` takes it) with the text
    of its reasoning summaries and messages as content; a `function_call_output` is the
    `tool` message of its `call_id` (content <- `output`). Chat messages are as they are."""
    if m.get("object") == RESPONSE:
        output = m.get("output")
        if not isinstance(output, list):
            raise expected(f"messages[{n}].output", "a list of output items", output)
        calls, said = [], []
        for k, item in enumerate(output):
            if not isinstance(item, dict):
                raise expected(f"messages[{n}].output[{k}]", "an object", item)
            kind = item.get("type")
            if kind == "function_call":
                cid = item.get("call_id") or item.get("id")
                fn = {"name": item.get("name"), "arguments": item.get("arguments")}
                calls.append({"id": cid, "function": fn})
            elif kind == "reasoning" and isinstance(item.get("summary"), list):
                said += item["summary"]
            elif kind == MESSAGE_ITEM and isinstance(item.get("content"), list):
                said += item["content"]
        chat = {"role": "assistant", "content": said or None, "tool_calls": calls}
        return {**chat, "extra": m.get("extra")}, "output"
    if m.get("type") == RESULT_ITEM and "role" not in m:
        chat = {"role": "tool", "tool_call_id": m.get("call_id"), "extra": m.get("extra")}
        return {**chat, "content": m["output"]} if "output" in m else chat, "output"
    if "role" not in m:  # passed over, it could be the answer to the command before it
        raise expected(
            f"messages[{n}]",
            "a message (a `role`), a Responses API response or a `function_call_output`",
            m,
        )
    if not isinstance(m["role"], str | None):
        raise expected(f"messages[{n}].role", "a string", m["role"])
    return m, "content"


def _not_a_trajectory(data: Any, messages: Any) -> str | None:
    """Why `data` is no mini-swe-agent trajectory at all (`--format mini-swe-agent` on
    another file), else None: no `messages` in an object without mini-swe-agent's
    `trajectory_format`, or messages whose first is no message."""
    if isinstance(data, dict) and messages is None and "trajectory_format" not in data:
        return f"an object without `messages` (keys: {', '.join(map(str, list(data)[:8]))})"
    if not isinstance(messages, list) or not messages or _is_message(messages[0]):
        return None
    first = messages[0]
    what = (
        f"an object with keys {', '.join(map(str, list(first)[:8]))}"
        if isinstance(first, dict)
        else shown(first)
    )
    return f"messages[0] is no message (a `role`, a Responses API item): {what}"


def _command(message: str) -> tuple[str | None, str]:
    """(the command of the message's one action block, the prose around it); (None, the
    message) for none or several: mini-swe-agent answered a format error, ran nothing."""
    actions = list(_ACTION.finditer(message)) or list(_ANY_BLOCK.finditer(message))
    if len(actions) != 1:
        return None, message
    [b] = actions
    return b.group(1).strip(), join_reasoning(message[: b.start()], message[b.end() :]) or ""


def _calls(calls: list[Any]) -> list[tuple[str | None, str]] | None:
    """(id, command) of each `bash` tool call; None when mini-swe-agent rejected the
    message (a call to another tool, arguments without `command`): it ran none of them."""
    out = []
    for c in calls:
        fn = c.get("function") if isinstance(c, dict) else None
        if not isinstance(fn, dict) or fn.get("name") != "bash":
            return None
        args = fn.get("arguments")
        try:
            args = parse_json(args) if isinstance(args, str) else args
        except ValueError:  # TooDeep too: a tool call, which `tool_action` refuses
            return None
        if not isinstance(args, dict) or not isinstance(args.get("command"), str):
            return None
        cid = c.get("id")
        out.append((cid if isinstance(cid, str) else None, args["command"]))
    return out


def _exception(text: str) -> re.Match[str] | None:
    """v2's `<exception>` at the start of a result message (`_EXCEPTION_RC`, else the
    first `</exception>`)."""
    return _EXCEPTION_RC.match(text) or _EXCEPTION.match(text)


def _observation(text: str) -> Observation:
    """The environment's answer in a result message (module doc): mini-swe-agent's
    templates read for what they stand for, anything else kept as it is."""
    if _TIMEOUT.match(text):
        # mini-swe-agent killed it: no return code; the output so far
        killed = _KILLED.fullmatch(text)
        if killed and killed["out"] is not None:
            return timed_out(killed["out"])
        if killed:
            return timed_out(kept_ends(killed["head"], killed["tail"]), truncated=True)
        out = _OUT.search(text)  # another layout: its output, else the whole notice
        if out:  # `<output>\n{{output}}\n</output>`: the newline before the tag is its own
            return timed_out(out.group(1).removesuffix("\n"))
        return Observation(text, is_error=True, state_json=json.dumps({"timed_out": True}))
    exception = _exception(text)
    rest = text[exception.end() :] if exception else text
    long = _LONG.fullmatch(rest)
    if long:
        code: int | None = int(long["rc"])
        body, cut = kept_ends(long["head"], long["tail"]), True
    else:
        out = _OUT.search(rest)
        if out:  # the template's return code is outside the output (which may print one)
            rc = _RC.search(rest, 0, out.start()) or _RC.search(rest, out.end())
        else:
            rc = _RC.search(rest)
        code, body, cut = int(rc.group(1)) if rc else None, out.group(1) if out else text, False
    if exception and code == -1 and _TIMED_OUT.fullmatch(exception["info"]):
        return timed_out(body, truncated=cut)
    return Observation(body, exit_code=code, is_error=bool(code), truncated=cut)


NOT_EXECUTED = "action was not executed"
"""v2's `exception_info` of a call it never ran (the calls after one that ended the run)."""


def rendered(text: str) -> Observation | None:
    """A result message's text as mini-swe-agent rendered it (its templates, module doc),
    for files other tools wrote from its messages (harbor's ATIF): None for a call it
    never ran (v2's `<exception>action was not executed</exception>`)."""
    exception = _exception(text)
    if exception and exception["info"] == NOT_EXECUTED:
        return None
    return _observation(text)


def _raw(msg: dict[str, Any] | None) -> Observation | str | None:
    """The environment's answer as v2 keeps it beside the rendered message (`extra`:
    `raw_output`, `returncode`, `exception_info`): the output whole, as printed, where
    the template cut a long one. NOT_EXECUTED for a call v2
    did not run; None where there is no such `extra` (v1, or another writer) or its
    exception is not a timeout (the message is read as before)."""
    extra = msg.get("extra") if isinstance(msg, dict) else None
    if not isinstance(extra, dict) or not isinstance(extra.get("raw_output"), str):
        return None
    out, rc, info = extra["raw_output"], extra.get("returncode"), extra.get("exception_info")
    if info == NOT_EXECUTED:
        return NOT_EXECUTED
    if info:
        return timed_out(out) if isinstance(info, str) and _TIMED_OUT.fullmatch(info) else None
    if not (type(rc) is int or rc is None):
        return None
    return Observation(out, exit_code=rc, is_error=bool(rc))


def _is_submit(cmd: str, reply: str | None) -> bool:
    """Whether `cmd`, the last command, is the agent's submission: it prints a finish
    marker, and what answered it is no command output (mini-swe-agent ends the episode
    when the output's first line is the marker, with the rest of the output as the
    submission message, no `<returncode>`); nothing answered it at all in a cut file."""
    return any(marker in cmd for marker in FINISH_MARKERS) and (
        reply is None or (_RC.search(reply) is None and not _TIMEOUT.match(reply))
    )


def parse(path: Path, data: Any) -> Iterator[Any]:
    messages = data.get("messages") if isinstance(data, dict) else data
    info = data.get("info", {}) if isinstance(data, dict) else {}
    fmt = data.get("trajectory_format") if isinstance(data, dict) else None
    if fmt and fmt not in KNOWN_FORMATS:
        yield ImportProblem(
            str(path),
            "",
            "unknown_version",
            f"trajectory_format {fmt!r} is not one of {KNOWN_FORMATS}; importing best effort",
            fatal=False,
        )
    if (why := _not_a_trajectory(data, messages)) is not None:
        yield ImportProblem(
            str(path), "", "unrecognized", f"not a mini-swe-agent trajectory: {why}"
        )
        return
    if not isinstance(messages, list):
        if messages is None:
            yield ImportProblem(str(path), "", "missing_field", "no `messages` list")
        else:
            bad = expected("messages", "a list", messages)
            yield ImportProblem(str(path), "", "invalid", str(bad))
        return
    # (index in the file, message in the chat layout): problems name the file's own index
    msgs: list[tuple[int, dict[str, Any]]] = []
    keys: dict[int, str] = {}
    for n, m in enumerate(messages):  # passed over, a message would leave its command unanswered
        if not isinstance(m, dict):
            raise expected(f"messages[{n}]", "an object", m)
        m, keys[n] = _chat(n, m)
        msgs.append((n, m))
    responses = {n for n, m in enumerate(messages) if m.get("object") == RESPONSE}

    def place(n: int | None) -> str:
        """Message `n`'s text as the file names it (`messages[3].output`)."""
        return f"messages[{n}].{keys.get(n, 'content')}"

    parts = NonText()
    task = system = None
    at = next((n for n, m in msgs if m.get("role") == "system"), None)  # the first one's
    if at is not None and messages[at].get("content") is None:  # unknown, never ""
        yield warning(
            "message_not_imported",
            f"{null_or_missing(messages[at], 'content', f'messages[{at}]')}, the system prompt"
            " is unknown (no agent_system_prompt); not imported",
        )
    elif at is not None:
        system = parts.text(messages[at]["content"], f"system prompt (messages[{at}].content)")
    for n, m in msgs:
        if m.get("role") == "user" and task is None:
            task = parts.text(m.get("content"), f"task (messages[{n}].content)")
    pairs = []
    submit: dict[str, str] = {}
    last = max((i for i, (_, m) in enumerate(msgs) if m.get("role") == "assistant"), default=-1)
    for i, (n, m) in enumerate(msgs):
        if m.get("role") != "assistant":
            continue
        turn = len(pairs)
        calls = m.get("tool_calls")
        # the messages that answer this one: those up to the next assistant message
        after = list(itertools.takewhile(lambda x: x[1].get("role") != "assistant", msgs[i + 1 :]))
        if calls:
            if not isinstance(calls, list):
                yield ImportProblem(
                    str(path),
                    "",
                    "invalid",
                    str(expected(f"messages[{n}].tool_calls", "a list", calls)),
                )
                return
            text = parts.text(m.get("content"), f"turn {turn} reasoning ({place(n)})")
            steps = _calls(calls)
            if steps is None:
                continue  # mini-swe-agent rejected the message; no environment step happened
            ids = {cid for cid, _ in steps if cid}
            tools = [(k, r) for k, r in after if r.get("role") == "tool"]
            answers = []
            for cid, _ in steps:  # the result with the call's id, else the next one of none
                got = next((x for x in tools if cid and x[1].get("tool_call_id") == cid), None)
                got = got or next((x for x in tools if x[1].get("tool_call_id") not in ids), None)
                if got is not None:
                    tools.remove(got)
                answers.append(got)
            prose: str | None = text
        elif n in responses:
            continue  # a response without a call: mini-swe-agent rejected it, nothing ran
        else:
            cmd, prose = _command(parts.text(m.get("content"), f"turn {turn} action ({place(n)})"))
            if cmd is None:
                continue  # a format error the agent was told about; no environment step happened
            steps = [(None, cmd)]
            answers = [after[0] if after and after[0][1].get("role") in ("user", "tool") else None]
        # v2 writes the submission as a last `exit` message, no tool result
        exit_ = next((r for _, r in after if r.get("role") == "exit"), None)
        for (_, cmd), got in zip(steps, answers, strict=True):
            turn = len(pairs)
            k, nxt = got or (None, None)
            if nxt is not None and nxt.get("content") is None and _raw(nxt) is None:
                yield warning(  # what the command printed is unknown: never ""
                    "unpaired_call",
                    f"{null_or_missing(messages[k], keys[k], f'messages[{k}]')}, the answer"
                    f" to {cmd!r} is unknown; no turn",
                )
                continue
            bare = textless(nxt.get("content"), place(k)) if nxt is not None else None
            if bare is not None and _raw(nxt) is None:  # images only: never ""
                yield warning("unpaired_call", f"{no_text([(place(k), bare)], repr(cmd))}; no turn")
                continue
            reply = (
                parts.text(nxt.get("content"), f"turn {turn} observation ({place(k)})")
                if nxt is not None
                else None
            )
            if not calls and reply is not None and reply.startswith(FORMAT_ERROR):
                break  # mini-swe-agent rejected the message (its format error): nothing ran
            if i == last and _is_submit(cmd, reply):
                # the end-of-episode signal: mini-swe-agent took what the command printed
                # after the marker line as the submission and showed the agent no output
                submit = {"submit_command": cmd}
                if reply is None and exit_ is not None:
                    reply = parts.text(exit_.get("content"), "submission (exit message)")
                if reply is not None:
                    submit["submission"] = reply
                continue
            raw = _raw(nxt)
            if raw == NOT_EXECUTED:
                yield warning("not_run", f"messages[{k}]: mini-swe-agent did not run {cmd!r}")
                continue
            if reply is None:  # what it printed is unknown: never ""
                yield warning("unpaired_call", f"messages[{n}]: no result for {cmd!r}; no turn")
                continue
            obs = raw if isinstance(raw, Observation) else _observation(reply)
            pairs.append((Action("command", cmd, name="bash"), obs, prose or None))
            prose = None  # the message's reasoning goes with its first call
    yield from parts.warnings()
    status = info.get("exit_status")
    if status is not None and not isinstance(status, str):
        bad = expected("info.exit_status", "a string", status)
        yield ImportProblem(str(path), "", "invalid", str(bad))
        return
    try:
        yield build(
            NAME,
            origin_stem(path),
            "swe",
            pairs,
            task_description=task,
            instruction=task,
            action_space=[BASH_TOOL],
            agent={
                "name": "mini-swe-agent",
                "model": (info.get("config") or {}).get("model", {}).get("model_name")
                if isinstance(info.get("config"), dict)
                else None,
            },
            outcome=Outcome(
                status="unknown"
                if status is None
                else ("success" if status == "Submitted" else "failure"),
                error=None if status in (None, "Submitted") else status,
            ),
            metadata={
                "trajectory_format": fmt,
                "exit_status": status,
                "agent_system_prompt": system,
                "submission": info.get("submission"),
                **submit,
            },
        )
    except MissingField as exc:
        yield ImportProblem(str(path), "", "missing_field", str(exc))
