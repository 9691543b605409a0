"""The report's trajectory and turn filters, as pure functions on record dicts.

Turn filters return the kept turns (re-indexed) and the removed ones with a reason;
trajectory filters return a reason to drop or None. The Beam stage counts both and
writes every removal to `rejects`.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from worldtrace.schemas import fields as F
from worldtrace.schemas.actions import declared_tools
from worldtrace.schemas.pages import shows_captcha

from .stats import words

HTTP_ERROR_NAMES = (
    "Not Found", "Forbidden", "Internal Server Error", "Bad Gateway", "Service Unavailable"
)  # fmt: skip
HTTP_ERROR_RE = re.compile(
    r"\b(HTTP (ERROR )?[45]\d\d|[45]\d\d (" + "|".join(HTTP_ERROR_NAMES) + r")|ERR_[A-Z_]+)\b"
)
_HTTP_ERROR_MARKS = ("HTTP ", "ERR_", *(f" {name}" for name in HTTP_ERROR_NAMES))
"""What every match of `HTTP_ERROR_RE` holds, one of them: looked for first."""


def shows_http_error(text: str) -> bool:
    """Whether `text` reads as an HTTP or browser error page (`HTTP_ERROR_RE`)."""
    return any(m in text for m in _HTTP_ERROR_MARKS) and HTTP_ERROR_RE.search(text) is not None


@dataclass(frozen=True)
class FilterConfig:
    """Each filter of the report, switchable."""

    min_turns: int = 2
    """Drop trajectories with fewer turns (after turn filters); 0 disables."""
    undeclared_tools: bool = True
    """mcp/swe: drop trajectories that call a tool absent from the action space."""
    gui_env_failures: bool = True
    """GUI: drop trajectories with missing state, CAPTCHA or HTTP errors."""
    empty_actions: bool = True
    """Strip turns whose action is empty."""
    retry_cycles: bool = True
    """Skip failed (action, error) pairs that the next turn retries."""
    gui_no_change: bool = True
    """GUI: remove turns after which state and observation equal those before."""
    retry_similarity: float = 0.5
    """Word Jaccard of two actions (their normalized tool arguments, or their text) at or
    above which the second retries the first."""

    def __post_init__(self) -> None:
        """Ranges, checked when a config is made (`--set`/`--config` name the key)."""
        from worldtrace.schemas.config import check

        check(self, "min_turns", self.min_turns >= 0, "an integer >= 0 (0 disables)")
        check(self, "retry_similarity", 0 <= self.retry_similarity <= 1, "a number in [0, 1]")


Turn = dict[str, Any]
Removed = list[tuple[Turn, str]]


def _action_text(t: Turn) -> str:
    return (t.get("action") or {}).get("text") or ""


def _is_error(t: Turn) -> bool:
    o = t.get("observation") or {}
    code = o.get("exit_code")
    return bool(o.get("is_error")) or (code is not None and code != 0)


def carries_flags(record: dict[str, Any]) -> bool:
    """Whether the record says which turns failed: our collectors of `F.FLAGGED_DOMAINS`
    flag every failure, so a turn they recorded without a flag succeeded (so does the
    generator, which writes records in their shape); any other log (imported, or a
    terminal screen) counts as flagged when a turn carries a flag."""
    source = record.get(F.SOURCE) or {}
    kind = source.get("kind")
    if kind in ("collector", F.SYNTHETIC) and record[F.DOMAIN] in F.FLAGGED_DOMAINS:
        return True
    return any(
        (o := t.get("observation") or {}).get("is_error") or o.get("exit_code") is not None
        for t in record[F.TURNS]
    )


def _failed(t: Turn, nxt: Turn, flagged: bool) -> bool:
    """Flagged as an error, or, in a log without flags, answered with the very text its
    retry got: an identical repeated error is recognised by content. In a flagged log
    an unflagged turn succeeded, however alike its retry's answer (a repeated search,
    a scroll back)."""
    if _is_error(t):
        return True
    if flagged:
        return False
    text = (t.get("observation") or {}).get("text") or ""
    return bool(text.strip()) and text == ((nxt.get("observation") or {}).get("text") or "")


def _similar(a: str, b: str, similarity: float) -> bool:
    """Word Jaccard of two actions' texts at or above `similarity`. Two without words (a
    call without arguments, a bare key such as C-c) are alike when they are the same:
    the Jaccard of two empty sets is undefined, and taking it as 0 made an identical
    retry of such a call no retry."""
    wa, wb = words(a), words(b)
    union = wa | wb
    if not union:
        return a == b
    return len(wa & wb) / len(union) >= similarity


def _is_retry(failed: Turn, nxt: Turn, similarity: float) -> bool:
    """The next action calls the same tool with similar (normalized) arguments, or types
    similar keystrokes/text: a retry. Two different `bash` commands are not."""
    fa, na = failed.get("action") or {}, nxt.get("action") or {}
    if fa.get("name") or na.get("name"):
        if fa.get("name") != na.get("name"):
            return False
        # arguments are sorted-key JSON after Normalize: their words compare like with like
        return _similar(
            fa.get("arguments_json") or fa.get("text") or "",
            na.get("arguments_json") or na.get("text") or "",
            similarity,
        )
    return _similar(fa.get("text") or "", na.get("text") or "", similarity)


def strip_empty_actions(turns: list[Turn]) -> tuple[list[Turn], Removed]:
    kept, removed = [], []
    for t in turns:
        a = t.get("action") or {}
        if not _action_text(t).strip() and not a.get("name"):
            removed.append((t, "empty_action"))
        else:
            kept.append(t)
    return kept, removed


def skip_retry_cycles(
    turns: list[Turn], similarity: float, flagged: bool
) -> tuple[list[Turn], Removed]:
    """Garbage action -> error -> retry: drop the failed pair, keep the retry.

    Only a failed turn immediately retried (same tool and similar arguments, or similar
    keystrokes) is dropped; an error that the agent moves on from is kept (it is real
    environment behaviour), so the state chain stays intact.
    """
    kept, removed = [], []
    for i, t in enumerate(turns):
        nxt = turns[i + 1] if i + 1 < len(turns) else None
        if nxt is not None and _failed(t, nxt, flagged) and _is_retry(t, nxt, similarity):
            removed.append((t, "retry_cycle"))
        else:
            kept.append(t)
    return kept, removed


def _gui_state(t: Turn) -> tuple[str | None, str]:
    o = t.get("observation") or {}
    return o.get("state_json"), o.get("text") or ""


def _reported(o: dict[str, Any]) -> bool:
    """Whether a live GUI sandbox reported this turn's state: it always sets `changed`
    (True/False) and then `env_failure` (None meaning it checked and found none)."""
    return o.get("changed") is not None


def drop_gui_no_change(turns: list[Turn]) -> tuple[list[Turn], Removed]:
    """Remove turns that changed nothing: as the sandbox reported (`changed`), or else
    when state and observation equal those before."""
    kept, removed = [], []
    before: tuple[str | None, str] | None = None
    for t in turns:
        after = _gui_state(t)
        o = t.get("observation") or {}
        if _reported(o):
            same = o["changed"] is False  # the sandbox compared with the state before the action
        else:
            same = before is not None and after == before
        if same:
            removed.append((t, "gui_no_change"))
        else:
            kept.append(t)
        before = after
    return kept, removed


def undeclared_tool(record: dict[str, Any]) -> str | None:
    tools = declared_tools((record.get(F.SYSTEM) or {}).get("action_space"))
    if tools is None:
        return None
    for t in record[F.TURNS]:
        a = t.get("action") or {}
        if a.get("kind") == "tool_call" and a.get("name") not in tools:
            return f"undeclared_tool:{a.get('name')}"
    return None


def gui_env_failure(record: dict[str, Any]) -> str | None:
    """The first environment failure of a GUI trajectory: as the sandbox reported it
    (`env_failure`), or else guessed from the state and the text (imported data)."""
    for t in record[F.TURNS]:
        o = t.get("observation") or {}
        if o.get("env_failure"):
            return f"gui_env_failure:{o['env_failure']}"
        if _reported(o):
            continue  # the sandbox checked: a docs page quoting "404 Not Found" is fine
        if not o.get("state_json"):
            return "gui_env_failure:missing_state"
        text = o.get("text") or ""
        if shows_captcha(text):
            return "gui_env_failure:captcha"
        try:
            state = json.loads(o["state_json"])
        except json.JSONDecodeError:
            return "gui_env_failure:missing_state"
        status = state.get("status") if isinstance(state, dict) else None
        if (isinstance(status, int) and status >= 400) or shows_http_error(text):
            return "gui_env_failure:http_error"
    return None


def apply_filters(
    record: dict[str, Any], cfg: FilterConfig
) -> tuple[dict[str, Any] | None, Removed, str | None]:
    """Run the turn filters then the trajectory filters.

    Returns (record with filtered, re-indexed turns or None, removed turns, drop reason).
    """
    domain = record[F.DOMAIN]
    gui = domain in F.GUI_DOMAINS
    turns = list(record[F.TURNS])
    removed: Removed = []
    if cfg.gui_env_failures and gui:
        reason = gui_env_failure(record)
        if reason:
            return None, removed, reason
    if cfg.undeclared_tools and domain in F.TOOL_DOMAINS:
        reason = undeclared_tool(record)
        if reason:
            return None, removed, reason
    if cfg.empty_actions:
        turns, r = strip_empty_actions(turns)
        removed += r
    if cfg.retry_cycles:
        turns, r = skip_retry_cycles(turns, cfg.retry_similarity, carries_flags(record))
        removed += r
    if cfg.gui_no_change and gui:
        turns, r = drop_gui_no_change(turns)
        removed += r
    if len(turns) < cfg.min_turns:
        return None, removed, "min_turns"
    out = dict(record)
    out[F.TURNS] = [{**t, "index": i} for i, t in enumerate(turns)]
    return out, removed, None
