"""The android kind's model-free policy: random taps, scrolls and typing on what is on screen.

It reads the nodes back from the last observation (`android_view.parse`), picks an
action kind by weight among those the screen allows (tap a clickable node, long-press
a long-clickable one, swipe a scrollable one, type into the focused field or focus
one, press back), and draws every choice from `random.Random(ctx.seed)`, so the same
seed against the same device state gives the same episode.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar

from pydantic import Field
from worldtrace.schemas import Action, Observation
from worldtrace.schemas.actions import tool_call
from worldtrace.schemas.parsing import configclass

from .android_view import Node, parse
from .base import Explorer

Weight = Annotated[float, Field(ge=0)]


@configclass
class ExplorerConfig:
    """Weights of the action kinds and what gets typed."""

    steps: Annotated[int, Field(ge=1)] | None = None
    """Stop after this many actions (unset: the job's max_turns stops it)."""
    tap: Weight = 0.55
    long_press: Weight = 0.05
    swipe: Weight = 0.15
    type: Weight = 0.15
    back: Weight = 0.10
    texts: tuple[str, ...] = ("hello", "Buy milk", "42", "meeting at 10", "Wi-Fi")
    """Texts typed into fields."""
    stop_on_failure: bool = True
    """End the episode at a crash, ANR or offline device (the rest would be filtered)."""


def failure(obs: Observation) -> str | None:
    """The environment failure the sandbox reported with this observation."""
    return obs.env_failure


class AndroidExplorer(Explorer):
    config_class: ClassVar[type] = ExplorerConfig
    name = "android-explorer"

    def act(self, history) -> Action | None:
        c = self.config
        if c.steps is not None and len(history.turns) >= c.steps:
            return None
        obs: Observation = history.turns[-1].observation if history.turns else history.initial
        if c.stop_on_failure and failure(obs):
            return None
        screen = list(parse(obs.text))
        options = self._options(screen)
        kinds = [k for k in options if getattr(c, k) > 0]
        if not kinds:
            return tool_call("press", {"key": "back"})
        kind = self.rng.choices(kinds, weights=[getattr(c, k) for k in kinds])[0]
        return options[kind]()

    def _options(self, screen: list[Node]) -> dict[str, Any]:
        rng, c = self.rng, self.config
        clickable = [n for n in screen if "clickable" in n.flags and "disabled" not in n.flags]
        long_clickable = [n for n in screen if "long-clickable" in n.flags and not n.editable]
        scrollable = [n for n in screen if "scrollable" in n.flags]
        fields = [n for n in screen if n.editable and "disabled" not in n.flags]
        focused = [n for n in fields if "focused" in n.flags]
        out: dict[str, Any] = {"back": lambda: tool_call("press", {"key": "back"})}
        if clickable:
            out["tap"] = lambda: tool_call("tap", {"node": rng.choice(clickable).id})
        if long_clickable:
            out["long_press"] = lambda: tool_call(
                "long_press", {"node": rng.choice(long_clickable).id}
            )
        if scrollable:
            out["swipe"] = lambda: tool_call(
                "swipe",
                {"direction": rng.choice(("up", "up", "down")), "node": rng.choice(scrollable).id},
            )
        if focused:
            out["type"] = lambda: tool_call("type", {"text": rng.choice(c.texts)})
        elif fields:
            out["type"] = lambda: tool_call(
                "tap", {"node": rng.choice(fields).id}
            )  # focus one first
        return out
