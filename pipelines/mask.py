"""Turn-level loss-mask policies (report Table 3; definitions in docs/pipeline.md).

A policy maps a turn's statistics to a category, the rule that fired and a keep ratio:
the fraction of the turn's observation tokens that count in the loss. How a partial
keep is applied (whole turn by hash, per token, or a prefix) is the exporter's
`keep_mode`; `keep_turn` is the deterministic per-turn draw that `turn` mode uses.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import math
import re
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Protocol

from worldtrace.schemas import fields as F

from . import stats as S
from .stats import surprisal

KEEP_MODES = ("turn", "token", "prefix")
MAX_PROMPT = 256
"""Characters a prompt can have: only the last ones of a screen's last line are looked at."""
DEFAULT_POLICY = "agentworld-v1"


class Decision(NamedTuple):
    """A tuple, not a frozen dataclass: one is made per turn, at a third of the cost."""

    category: str
    keep: float
    rule: str
    """Human-readable rule that fired, with the values that made it fire."""


class MaskPolicy(Protocol):
    name: str

    def decide(
        self, stats: dict[str, float], action: str, observation: str, fault: str | None = None
    ) -> Decision:
        """`fault`: the kind of fault injected into the turn (`injected_fault`), if any."""
        ...

    def describe(self) -> dict[str, Any]:
        """Name, thresholds and choices, for the manifest."""
        ...


@dataclass(frozen=True)
class AgentWorldThresholds:
    """Table 3 thresholds; defaults are the report's."""

    echo_ol: float = 0.7
    echo_nov: float = 0.3
    boilerplate_ol: float = 0.5
    boilerplate_nov: float = 0.5
    expansion_ol: float = 0.5
    expansion_nov: float = 0.5
    expansion_r: float = 1.5
    retrieval_nov: float = 0.6
    retrieval_r: float = 1.0
    action_nov: float = 0.5
    action_r: float = 1.0
    short_chars: int = 64
    """An observation shorter than this (characters) counts as "short"."""
    transform_nov: float = 0.5
    transform_r: float = 1.0


@dataclass(frozen=True)
class KeepRatios:
    echo: float = 0.05
    boilerplate: float = 0.10
    expansion: float = 1.0
    retrieval: float = 1.0
    action: float = 1.0
    transform: float = 0.5
    other: float = 1.0
    injected: float = 0.0
    """A turn whose observation our fault proxy made (`F.INJECTED_FAULTS`) or our collector
    cut (`COLLECTOR_CUTS`): a draw or a cut of ours, not the environment's answer, so by
    default context and never a target."""


COLLECTOR_CUTS = {
    "truncated": "the collector cut this observation (observation.truncated)",
    "timed_out": "the collector's step timeout ended this observation (state timed_out)",
    "interrupted": "an interruption ended this observation (state interrupted)",
    "still_printing": "the step's wait ended while output was still arriving or the page "
    "still rendering (state still_printing)",
    "refused": "the sandbox refused the action and said so in the observation (state refused)",
}
"""Why the collector, not the environment, ended an observation, and the rule text: a cap
on the output, a step timeout, a Ctrl-C (worldtrace's sandboxes and importers record each
so). Where the text stops, and the marker after it (`[output truncated]`, `[timed out after
30s]`, `[interrupted]`), are ours; a model trained on them learns to stop mid-answer. A
terminal step whose wait ended mid-stream (`seq 1 3000000` with the default 1 s) stops
where our clock did: the same, as is a web page observed before it was still (its
results half rendered). So is a web step whose navigation the sandbox refused (outside
the allowed origins): the error the agent reads is our text."""
STATE_CUTS = ("timed_out", "interrupted", "still_printing", "refused")
"""The `COLLECTOR_CUTS` read from the turn's `observation.state_json` (true values)."""
_STATE_KEYS = tuple(f'"{k}"' for k in STATE_CUTS)


def injected_fault(perturbation: str | None) -> str | None:
    """The kind of a turn's `perturbation` JSON if it made the observation (an error,
    timeout, rate limit or truncation we injected), else None (`latency` only delays)."""
    if perturbation is None:
        return None
    try:
        kind = json.loads(perturbation).get("kind")
    except (ValueError, AttributeError):
        return None
    return kind if kind in F.INJECTED_FAULTS else None


def collector_cut(truncated: bool | None, state_json: str | None) -> str | None:
    """The `COLLECTOR_CUTS` key that ended a turn's observation, else None: `truncated`
    first, then a true `timed_out` or `interrupted` in its state (only parsed when named:
    a terminal state can hold a large raw capture)."""
    if truncated:
        return "truncated"
    if not state_json or not any(k in state_json for k in _STATE_KEYS):
        return None
    try:
        state = json.loads(state_json)
    except ValueError:
        return None
    if not isinstance(state, dict):
        return None
    return next((k for k in STATE_CUTS if state.get(k) is True), None)


def turn_fault(
    perturbation: str | None, truncated: bool | None = False, state_json: str | None = None
) -> str | None:
    """What `decide` takes as `fault`: the injected fault that made the observation
    (`injected_fault`), else the collector's cut of it (`collector_cut`), else None."""
    fault = injected_fault(perturbation) if perturbation else None
    return fault or collector_cut(truncated, state_json)


_VENV = r"(?: \)[\w.-]+\()?"
"""A virtualenv's or conda's `(venv) ` in front of a prompt (reversed, as below)."""
_SHAPES = (  # each reversed (the text is read from its end), the longest first
    r" ?\$[^\s@$]*:xobdnas@resu" + _VENV,  # user@sandbox:~/dir$ : ours (sandboxes/terminal.py)
    # root@host:/dir# : docker's default, its user known (output before it: `OKroot@web`)
    r" ?[$#](?:\)[^()\s]+\( )?[^\s@$#]*:[\w.-]+@toor" + _VENV,
    r" ?[$#](?:\)[^()\s]+\( )?[^\s@$#]*:[\w.-]+@[\w.-]+" + _VENV,  # user@host:~/dir (main)$
    r" ?[$#]\](?:[^\]]* )?[\w.-]+@[\w.-]+\[" + _VENV,  # [user@host dir]$ (Fedora, RHEL)
    r" ?[%#$] \S+ [\w.-]+@[\w.-]+" + _VENV,  # user@host ~ % (zsh on macOS)
    r" ?[$#](?:\d+\.)*\d+-hs(?:ab|ad|z|k|km)?",  # bash-5.1$ , sh-5.2# (a shell's default)
    r" ?[$#] \S*[~/](?!\S)",  # / # , ~ $ (busybox's default)
    r" %[\w.-]*[a-zA-Z](?![\w.-])",  # host% (zsh's and csh's default)
    r" >>>",  # a Python REPL's
    r" [$#%>]",  # a bare $ # % > after the output
    r"(?:[$#%>]| \.\.\.)\Z",  # alone on its line: without its blank too; a REPL's ...
)
PROMPT_REVERSED = re.compile("|".join(_SHAPES))
"""The shapes of a prompt at the end of a screen's last line, reversed: our PS1
(`user@sandbox:~$ `), a distribution's (`root@host:/# `, `[user@host dir]$ `, `user@host ~
% `, `bash-5.1$ `, `/ # `, `host% `), with a `(venv) ` in front, a bare `$ `, `# `, `% `
or `> `, a REPL's `>>> `. The output a command printed without a final line break comes
before it on the same line (`{"id":42}root@sandbox:/# `), so the prompt is that suffix,
not the whole line. Output ending in a letter or digit runs into the user name of a
`user@host` prompt: known users are split off (ours, `user@sandbox`, and `root`, docker's
default: `OKroot@web:/# `); another's name takes the output's last word with it. A line
that merely ends in `$`, `#`, `%` or `>` with no prompt's shape (`cost: 5$`) is output. Matched on the reversed text, from its end (~1 us): a
search of the shapes from the start tried each at every one of up to `MAX_PROMPT`
places (0.2-0.5 ms on a long last line)."""
_PROMPT_LAST = frozenset("$#%> ")
"""The last character of every prompt `PROMPT_REVERSED` knows (a cheap first test)."""
ECHO_NOTE = "; of the answer after the echo of the typed line"
NO_OUTPUT = {
    True: "boilerplate: no output (the observation is empty)",
    False: "boilerplate: no output (the observation is whitespace only)",
}
"""The rule of a turn whose observation holds no character to learn (`AgentWorldV1`), by
whether it is empty: a tool that answered nothing, as a typed line answered by a prompt
alone is a silent success. Every statistic of it has a zero denominator, and the zeros
fell into the transform rule (keep 0.5, `Nov<0.5 and R<1.0 (OL=0.000 Nov=0.000 R=0.000)`)."""


def echo_end(action: str, observation: str) -> int:
    """Where the echo of the action ends in the observation, 0 when it does not start
    with one: the action a typed line (ending with Enter, `\n` or `\r`), the observation
    what a terminal shows first, the echo of the keys, then the command's answer. Line
    ends are read alike (`\n`, `\r\n` as a pty writes them, `\r` as Enter is typed): a
    screen recorded with `\r\n` was decided on the whole screen, its echo and prompt
    kept as an `expansion` and its answer (`Killed`, `rc=137`) as boilerplate (2026-12-07,
    a hunt)."""
    if len(action) <= 1 or action[-1] not in "\r\n":
        return 0
    if action[-1] == "\n" and observation.startswith(action):
        return len(action)  # the common case: the same line ends
    typed = action.replace("\r\n", "\n").replace("\r", "\n")
    i = 0
    for c in typed:
        if c != "\n":
            if i >= len(observation) or observation[i] != c:
                return 0
            i += 1
        elif observation.startswith("\r\n", i):
            i += 2
        elif i < len(observation) and observation[i] == "\n":
            i += 1
        else:
            return 0
    return i


def split_answer(answer: str) -> tuple[str, str]:
    """(output, prompt): the prompt is the end of the answer's last line when it has a
    prompt's shape (`PROMPT_REVERSED`) and no line break follows it (the screen's cursor
    sits after it). What precedes it on that line is output printed without a final
    newline (`curl -s URL`, then `root@sandbox:/# `): the whole line taken for the
    prompt made such an answer "a prompt, no output"."""
    if not answer or answer[-1] not in _PROMPT_LAST:
        return answer, ""
    start = max(answer.rfind("\n") + 1, len(answer) - MAX_PROMPT)
    m = PROMPT_REVERSED.match(answer[start:][::-1])
    if m is None:
        return answer, ""
    at = len(answer) - m.end()
    return answer[:at], answer[at:]


def injected_decision(keep: KeepRatios, fault: str) -> Decision:
    if fault in COLLECTOR_CUTS:
        why = f"{COLLECTOR_CUTS[fault]}: where it ends is ours, not the environment's answer"
    else:
        why = f"a {fault} fault the collector injected made this observation, not the environment"
    return Decision("injected", keep.injected, f"injected: {why}")


@dataclass(frozen=True)
class AgentWorldV1:
    """Report Table 3, first matching rule wins: echo, boilerplate, expansion, retrieval, action,
    transform, other (docs/pipeline.md#mask-policies). An observation with no output
    (empty or whitespace) is boilerplate before them (`NO_OUTPUT`)."""

    thresholds: AgentWorldThresholds = field(default_factory=AgentWorldThresholds)
    keep: KeepRatios = field(default_factory=KeepRatios)
    name: str = "agentworld-v1"
    answer_after_echo: bool = True
    """Decide a turn whose observation starts with its typed line (a terminal's echo) on
    the answer after it (`echo_end`): the echo alone makes any short answer look like one."""
    cuts_injected: bool = True
    """Decide a turn the collector cut (`COLLECTOR_CUTS`) `injected`; off, it is decided on
    its text like any other (for a corpus whose caps are part of the observation format)."""

    @functools.cached_property
    def _rules(self) -> dict[str, tuple[float, str]]:
        """Each category's keep ratio and the constant start of its rule text, built once:
        formatting the thresholds for every turn was half of `decide`'s time."""
        t, k = self.thresholds, self.keep
        return {
            "echo": (k.echo, f"echo: OL>={t.echo_ol} and Nov<{t.echo_nov} ("),
            "boilerplate": (
                k.boilerplate,
                f"boilerplate: OL>={t.boilerplate_ol} and Nov<{t.boilerplate_nov} (",
            ),
            "expansion": (
                k.expansion,
                f"expansion: OL>={t.expansion_ol} and Nov>={t.expansion_nov} and R>{t.expansion_r} (",
            ),
            "retrieval": (
                k.retrieval,
                f"retrieval: Nov>={t.retrieval_nov} and R>{t.retrieval_r} (",
            ),
            "action": (k.action, f"action: Nov>={t.action_nov} and R<={t.action_r} ("),
            "action_short": (k.action, f"action: Nov>={t.action_nov} and len(obs)="),
            "transform": (k.transform, f"transform: Nov<{t.transform_nov} and R<{t.transform_r} ("),
            "other": (k.other, "other: no rule matched ("),
        }

    def decide(
        self, stats: dict[str, float], action: str, observation: str, fault: str | None = None
    ) -> Decision:
        if fault is not None and (self.cuts_injected or fault not in COLLECTOR_CUTS):
            return injected_decision(self.keep, fault)
        if self.answer_after_echo and (end := echo_end(action, observation)):
            return self._after_echo(action, observation, end)
        if not observation or observation.isspace():
            return Decision("boilerplate", self.keep.boilerplate, NO_OUTPUT[not observation])
        return self._table3(stats["ol"], stats["nov"], stats["r"], len(observation))

    def _table3(self, ol: float, nov: float, r: float, obs_chars: int, note: str = "") -> Decision:
        t = self.thresholds
        if ol >= t.echo_ol and nov < t.echo_nov:
            category = "echo"
        elif ol >= t.boilerplate_ol and nov < t.boilerplate_nov:
            category = "boilerplate"
        elif ol >= t.expansion_ol and nov >= t.expansion_nov and r > t.expansion_r:
            category = "expansion"
        elif nov >= t.retrieval_nov and r > t.retrieval_r:
            category = "retrieval"
        elif nov >= t.action_nov and r <= t.action_r:
            category = "action"
        elif nov >= t.action_nov and obs_chars < t.short_chars:
            keep, text = self._rules["action_short"]
            v = f"OL={ol:.3f} Nov={nov:.3f} R={r:.3f}{note}"
            return Decision("action", keep, f"{text}{obs_chars}<{t.short_chars} ({v})")
        elif nov < t.transform_nov and r < t.transform_r:
            category = "transform"
        else:
            category = "other"
        keep, text = self._rules[category]
        return Decision(category, keep, f"{text}OL={ol:.3f} Nov={nov:.3f} R={r:.3f}{note})")

    def _after_echo(self, action: str, observation: str, end: int) -> Decision:
        """Table 3 on what the environment answered after echoing the typed line (up to
        `end`, `echo_end`): the output without the prompt that ends it. Nothing there is
        an echo (no prompt yet: still running) or boilerplate (a prompt only: a silent
        success)."""
        output, prompt = split_answer(observation[end:])
        if not output.strip():
            if prompt:
                return Decision(
                    "boilerplate",
                    self.keep.boilerplate,
                    "boilerplate: the echo of the typed line and a prompt, no output",
                )
            return Decision("echo", self.keep.echo, "echo: the echo of the typed line only")
        s = S.ratios(S.words(action), S.words(output), len(action), len(output))
        return self._table3(s["ol"], s["nov"], s["r"], len(output), ECHO_NOTE)

    def describe(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "thresholds": dataclasses.asdict(self.thresholds),
            "keep": dataclasses.asdict(self.keep),
            "words": "lower-cased \\w+ runs (Python re, Unicode) of the NFC text, de-duplicated",
            "zero_denominator": "0",
            "no_output": "an empty or whitespace-only observation is boilerplate first",
            "precedence": list(F.TABLE3_CATEGORIES),
            "injected": f"a turn flagged with an injected fault ({', '.join(F.INJECTED_FAULTS)}) "
            f"or, with cuts_injected, cut by the collector ({', '.join(COLLECTOR_CUTS)}) is "
            "`injected` before any rule",
            "cuts_injected": self.cuts_injected,
            "answer_after_echo": self.answer_after_echo,
        }


@dataclass(frozen=True)
class InformationAware:
    """agentworld-v1, then worldtrace's extra statistics down-weight what it keeps fully.

    A turn Table 3 keeps at 1.0 is cut to `repeat_keep` when conditional novelty says its
    observation was already in the context, and to `common_keep` when the corpus says
    its template is said everywhere ("File saved." a million times).
    """

    base: AgentWorldV1 = field(default_factory=AgentWorldV1)
    repeat_below: float = 0.25
    """cond_novelty under this is a repeat of the context."""
    repeat_keep: float = 0.1
    common_below_bits: float = 1.0
    """corpus_surprisal under this many bits is a common template: kept more than 8 times in
    the processed corpus (log2(16 / count) < 1; stats.SURPRISAL_REFERENCE = 16)."""
    common_keep: float = 0.25
    name: str = "agentworld-v1+info"

    def corpus_from(self) -> int | None:
        """The template count from which `common` can fire (None: never).

        A policy that reads corpus counts says here where its decisions change: below
        this count a turn is decided as if its template were rare, at or above it as if
        common (surprisal falls with the count, so there are exactly two regimes).
        Processing stores both decisions; the views pick one by the current count, so
        adding data never rewrites earlier files (docs/pipeline.md).
        """
        return next(
            (
                c
                for c in range(1, F.SURPRISAL_REFERENCE + 1)
                if surprisal(c) < self.common_below_bits
            ),
            None,
        )

    def decide(
        self, stats: dict[str, float], action: str, observation: str, fault: str | None = None
    ) -> Decision:
        d = self.base.decide(stats, action, observation, fault)
        if d.keep < 1.0 or not observation or d.category == "injected":
            return d
        cn, cs = stats.get("cond_novelty", 1.0), stats.get("corpus_surprisal")
        cs = math.inf if cs is None else cs  # count not known here: decided as rare
        if cn < self.repeat_below:
            return Decision(
                "repeat",
                self.repeat_keep,
                f"repeat: cond_novelty={cn:.3f}<{self.repeat_below} (was {d.category})",
            )
        if cs < self.common_below_bits:
            # no count in the text: it must hold for every count of the regime
            return Decision(
                "common",
                self.common_keep,
                f"common: corpus_surprisal<{self.common_below_bits} bits, template kept "
                f"{self.corpus_from()}+ times (was {d.category})",
            )
        return d

    def describe(self) -> dict[str, Any]:
        out = self.base.describe()
        out.update(
            name=self.name,
            repeat_below=self.repeat_below,
            repeat_keep=self.repeat_keep,
            common_below_bits=self.common_below_bits,
            common_keep=self.common_keep,
        )
        return out


POLICIES: dict[str, type] = {"agentworld-v1": AgentWorldV1, "agentworld-v1+info": InformationAware}
FLAGS = ("answer_after_echo", "cuts_injected")
"""The boolean settings of `AgentWorldV1` (`--set policy_settings.cuts_injected=false`)."""


def _check_range(key: str, given: Any, x: float) -> None:
    """Keep ratios and the OL, Nov and cond_novelty thresholds are fractions; R
    thresholds, lengths and bits are not negative; none is NaN or infinite (a NaN keep
    ratio reached the turns table, a manifest that was not JSON, and stopped a prefix
    export)."""
    name = key.removeprefix("keep.")
    fraction = key != name or name.endswith(("_ol", "_nov", "_keep")) or name == "repeat_below"
    if not math.isfinite(x) or x < 0 or (fraction and x > 1):
        want = "a number in [0, 1]" if fraction else "a finite number >= 0"
        raise ValueError(f"{key}={given}: expected {want}")


def get_policy(name: str = DEFAULT_POLICY, **overrides: Any) -> MaskPolicy:
    """A policy by name; `overrides` set thresholds (`echo_ol=0.8`), keep ratios
    (`keep.echo=0`) or the switches `FLAGS` (`answer_after_echo=false`)."""
    if name not in POLICIES:
        raise ValueError(f"unknown mask policy {name!r} (known: {', '.join(POLICIES)})")
    policy = POLICIES[name]()
    base = policy.base if isinstance(policy, InformationAware) else policy
    th, kp, own, flags = {}, {}, {}, {}
    known = {
        *(f"keep.{f.name}" for f in dataclasses.fields(KeepRatios)),
        *(f.name for f in dataclasses.fields(AgentWorldThresholds)),
        *FLAGS,
    }
    if isinstance(policy, InformationAware):  # its own thresholds and keep ratios
        known |= {f.name for f in dataclasses.fields(policy)} - {"base", "name"}
    for key, value in overrides.items():
        if key not in known:
            raise ValueError(
                f"unknown setting {key} for {name} (known: {', '.join(sorted(known))})"
            )
        if key in FLAGS:
            if not isinstance(value, bool) and str(value).lower() not in ("true", "false"):
                raise ValueError(f"{key}={value}: expected true or false")
            flags[key] = value if isinstance(value, bool) else str(value).lower() == "true"
            continue
        try:
            if key.startswith("keep."):
                kp[key[5:]] = number = float(value)
            elif key in {f.name for f in dataclasses.fields(AgentWorldThresholds)}:
                th[key] = number = float(value)
            else:
                own[key] = number = float(value)
        except (TypeError, ValueError):
            raise ValueError(f"{key}={value}: expected a number") from None
        if key in th and type(getattr(base.thresholds, key)) is int:
            # a count (short_chars): int(10.5) was 10, and 0.9 turned the rule off, in silence
            if not number.is_integer():
                raise ValueError(f"{key}={value}: expected a whole number")
            th[key] = int(number)
        _check_range(key, value, number)
    base = dataclasses.replace(
        base,
        thresholds=dataclasses.replace(base.thresholds, **th),
        keep=dataclasses.replace(base.keep, **kp),
        **flags,
    )
    if isinstance(policy, InformationAware):
        return dataclasses.replace(policy, base=base, **own)
    return base


def unit_draw(*parts: object) -> float:
    """Deterministic uniform draw in [0, 1) from the parts (stable across machines)."""
    h = hashlib.blake2b("\x1f".join(map(str, parts)).encode(), digest_size=8).digest()
    return int.from_bytes(h, "big") / 2**64


def keep_turn(trajectory_id: str, index: int, seed: int, keep: float) -> bool:
    """`turn` keep mode: the whole observation is a target with probability `keep`."""
    return keep >= 1.0 or (keep > 0.0 and unit_draw(trajectory_id, index, seed) < keep)
