"""A field's text equal to its hint (found 1205): typing "Title" into the notes app's title
field (hint "Title") was recorded as an empty field showing its hint, the typed text lost.

Android 8+ reports an empty field's hint as its text (TextView's text for accessibility),
and the uiautomator2 server's dump (androidx uiautomator's dumper in the client's
`u2.jar`) writes `text` and `hint` but not `isShowingHintText()`: an empty field and one
holding its hint's words dump alike. The compactor keeps the text then (the reading that
loses nothing) and shows the hint beside it; a dump that does carry `showing-hint`
(Appium's UiAutomator2 server writes it) decides.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET

from worldtrace.collectors.actions import tool
from worldtrace.sandboxes.android import AndroidConfig, AndroidSandbox, AndroidTask
from worldtrace.sandboxes.android_view import NodeIds, nodes, parse
from worldtrace.sandboxes.base import TaskSpec
from worldtrace.schemas import Observation

NOTES = "com.example.notes"


def field(obs: Observation, rid: str):
    [found] = [n for n in parse(obs.text) if n.rid == rid]
    return found


def title_node(d) -> dict:
    """The title field's attributes in the dump the real uiautomator2 client `d` reads."""
    root = ET.fromstring(d.dump_hierarchy().encode())
    [el] = [e for e in root.iter("node") if e.get("resource-id", "").endswith(":id/title_input")]
    return dict(el.attrib)


def test_text_typed_equal_to_the_hint_is_not_recorded_as_an_empty_field(sim):
    sb = AndroidSandbox(AndroidConfig(adb=sim.adb, serial=sim.serial))
    sb.reset(TaskSpec("t", "test", (), AndroidTask(app=NOTES, clear_data=True)))
    sb.step(tool("tap", x=934, y=2128))  # New note
    empty = sb.step(tool("tap", x=540, y=327))  # the title field, focused, still empty
    d = sb._d  # the sandbox's own uiautomator2 client (a second one would reset the IME)
    before = title_node(d)
    typed = sb.step(tool("type", text="Title"))
    # what a real dump says: the same attributes whether the field is empty or holds "Title"
    assert title_node(d) == before and (before["text"], before["hint"]) == ("Title", "Title")
    assert "showing-hint" not in before

    title = field(typed, "title_input")
    assert (title.text, title.hint) == ("Title", "Title")  # was ("", "Title"): text lost
    assert field(typed, "title_input") == field(empty, "title_input")  # alike, as the dumps
    sb.step(tool("press", key="back"))  # closes the keyboard (typing leaves it up)
    back = sb.step(tool("press", key="back"))  # the editor closes, saving what was typed
    assert next(n.text for n in parse(back.text) if n.rid == "note_title") == "Title"
    sb.close()


def test_a_dump_that_says_whether_the_hint_is_shown_decides():
    def dump(showing: str) -> str:
        return (
            '<hierarchy rotation="0"><node class="android.widget.EditText" text="Title" '
            f'hint="Title" showing-hint="{showing}" package="a.b" resource-id="a.b:id/t" '
            'clickable="true" bounds="[0,0][10,10]" /></hierarchy>'
        )

    [shown] = nodes(dump("true"), NodeIds())
    [typed] = nodes(dump("false"), NodeIds())
    assert (shown.text, shown.hint) == ("", "Title")
    assert (typed.text, typed.hint) == ("Title", "")
