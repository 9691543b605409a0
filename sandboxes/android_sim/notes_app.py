"""The Notes app (list, editor, delete dialog, overflow menu) and a Calculator.

Notes is where the environment failures live: its overflow menu's `Sync now` crashes
the app ("Notes keeps stopping") and `Export` hangs it (an ANR dialog), so explorers
and tests meet crashes through the UI, the way they happen on devices.
"""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal, DivisionByZero, InvalidOperation
from typing import Any

from .apps import (
    ROW_H,
    TOOLBAR_H,
    Activity,
    App,
    alert_dialog,
    button,
    edit_text,
    image_button,
    popup_menu,
    scroll_by,
    scroll_list,
    text_view,
    toolbar,
)
from .ui import CONTENT, STATUS_BAR, WIDTH, Bounds, View

NOTES = [
    {"title": "Shopping list", "body": "Milk, eggs, bread"},
    {"title": "Meeting notes", "body": "Discuss the Q3 roadmap with Dana"},
    {"title": "Ideas", "body": "Learn Kotlin\nPlant tomatoes"},
]


class NotesApp(App):
    package = "com.example.notes"
    label = "Notes"
    version = "2.3.1"

    def initial_data(self) -> dict[str, Any]:
        return {"notes": [dict(n) for n in NOTES], "sort": "recent", "exported": 0}

    def main(self) -> Activity:
        return NotesList(self)

    @property
    def notes(self) -> list[dict[str, str]]:
        return self.data["notes"]

    def delete_dialog(self, act: Activity, index: int, then: Callable[[], None]):
        def delete() -> None:
            del self.notes[index]
            act.overlay = None
            then()

        def cancel() -> None:
            act.overlay = None

        return lambda: alert_dialog(
            self.package,
            "Delete this note?",
            "This can’t be undone.",
            [("Cancel", "android:id/button2", cancel), ("Delete", "android:id/button1", delete)],
            act.title(),
            on_outside=cancel,
        )


class NotesList(Activity):
    name = ".MainActivity"
    LIST: Bounds = (0, STATUS_BAR + TOOLBAR_H, WIDTH, CONTENT[3])

    def __init__(self, app: NotesApp):
        super().__init__(app)
        self.napp, self.scroll = app, {}

    def order(self) -> list[int]:
        idx = list(range(len(self.napp.notes)))
        if self.napp.data["sort"] == "title":
            idx.sort(key=lambda i: self.napp.notes[i]["title"].lower())
        return idx

    def open(self, index: int | None) -> None:
        self.host.start(NoteEditor(self.napp, index))

    def menu(self) -> None:
        def close() -> None:
            self.overlay = None

        def run(fn: Callable[[], None]) -> Callable[[], None]:
            return lambda: (close(), fn())

        def sort() -> None:
            d = self.napp.data
            d["sort"] = "recent" if d["sort"] == "title" else "title"

        def export() -> None:
            self.host.anr(
                self.napp, on_wait=lambda: self.napp.data.update(exported=len(self.napp.notes))
            )

        label = "Sort by date" if self.napp.data["sort"] == "title" else "Sort by title"
        items = [
            (label, run(sort)),
            ("Sync now", run(lambda: self.host.crash(self.napp))),
            ("Export", run(export)),
        ]
        anchor = (WIDTH - 126, STATUS_BAR, WIDTH, STATUS_BAR + TOOLBAR_H)
        self.overlay = lambda: popup_menu(
            self.package, anchor, items, self.title(), on_outside=close
        )

    def item(self, index: int) -> Callable[[Bounds], View]:
        note = self.napp.notes[index]

        def build(b: Bounds) -> View:
            row = View("android.widget.LinearLayout", rid=self.rid("note_item"), bounds=b, clickable=True,
                       long_clickable=True, focusable=True, on_click=lambda: self.open(index),
                       on_long_click=lambda: self.ask_delete(index))  # fmt: skip
            row.children = [
                text_view(note["title"], (b[0] + 48, b[1] + 36, b[2] - 48, b[1] + 106), self.rid("note_title")),
                text_view(note["body"].split("\n")[0], (b[0] + 48, b[1] + 116, b[2] - 48, b[3] - 36), self.rid("note_snippet")),
            ]  # fmt: skip
            return row

        return build

    def ask_delete(self, index: int) -> None:
        self.overlay = self.napp.delete_dialog(self, index, then=lambda: None)

    def content(self) -> View:
        items = [(ROW_H, self.item(i)) for i in self.order()]
        total = len(items) * ROW_H
        bar = toolbar(self, "Notes", actions=[("More options", "", self.menu)])
        children = [bar]
        if items:
            children.append(scroll_list(self.rid("notes_list"), self.LIST, items, self.scroll.get("list", 0),
                                        lambda dy: scroll_by(self.scroll, "list", dy, total, self.LIST)))  # fmt: skip
        else:
            children.append(text_view("No notes yet", (300, 1100, 780, 1180), self.rid("empty")))
        if self.napp.data["exported"]:
            children.append(
                text_view(
                    f"Exported {self.napp.data['exported']} notes",
                    (60, 2000, 700, 2060),
                    self.rid("export_status"),
                )
            )
        fab = image_button(
            "New note",
            (WIDTH - 230, CONTENT[3] - 230, WIDTH - 62, CONTENT[3] - 62),
            self.rid("fab"),
            lambda: self.open(None),
        )
        children.append(fab)
        return View("android.widget.FrameLayout", bounds=CONTENT, children=children)


class NoteEditor(Activity):
    """Edits one note; leaving saves it (an empty new note is discarded)."""

    name = ".EditorActivity"

    def __init__(self, app: NotesApp, index: int | None):
        super().__init__(app)
        self.napp, self.index = app, index
        note = app.notes[index] if index is not None else {"title": "", "body": ""}
        self.fields = {"title": note["title"], "body": note["body"]}
        self.deleted = False

    def save(self) -> None:
        if self.deleted:
            return
        if self.index is None:
            if self.fields["title"] or self.fields["body"]:
                self.napp.notes.insert(0, dict(self.fields))
                self.index = 0
        else:
            self.napp.notes[self.index] = dict(self.fields)

    def back(self) -> bool:
        if super().back():
            return True
        self.save()
        return False

    def up(self) -> None:
        self.save()
        self.host.finish(self)

    def commit_text(self, text: str) -> None:
        if self.focus in self.fields:
            self.fields[self.focus] += text

    def clear_text(self) -> None:
        if self.focus in self.fields:
            self.fields[self.focus] = ""

    def key(self, name: str) -> None:
        if self.focus not in self.fields:
            return
        if name == "delete":
            self.fields[self.focus] = self.fields[self.focus][:-1]
        elif name == "enter":
            if self.focus == "title":
                self.focus = "body"  # IME action "next"
            else:
                self.fields["body"] += "\n"

    def ask_delete(self) -> None:
        def gone() -> None:
            self.deleted = True
            self.host.finish(self)

        if self.index is None:
            gone()
        else:
            self.overlay = self.napp.delete_dialog(self, self.index, then=gone)

    def content(self) -> View:
        top = STATUS_BAR + TOOLBAR_H
        title = "New note" if self.index is None else "Edit note"
        return View("android.widget.FrameLayout", bounds=CONTENT, children=[
            toolbar(self, title, up=self.up, actions=[("Delete", self.rid("action_delete"), self.ask_delete)]),
            View("android.widget.ScrollView", bounds=(0, top, WIDTH, CONTENT[3]), children=[
                edit_text(self, "title", self.fields["title"], "Title", (42, top + 30, WIDTH - 42, top + 170), self.rid("title_input")),
                edit_text(self, "body", self.fields["body"], "Note", (42, top + 190, WIDTH - 42, CONTENT[3] - 60), self.rid("body_input")),
            ]),
        ])  # fmt: skip


class CalculatorApp(App):
    package = "com.google.android.calculator"
    label = "Calculator"
    version = "8.4"

    def main(self) -> Activity:
        return Calculator(self)


OPS = {
    "+": ("op_add", "plus"),
    "−": ("op_sub", "minus"),
    "×": ("op_mul", "multiply"),
    "÷": ("op_div", "divide"),
}
KEYPAD = [["7", "8", "9", "÷"], ["4", "5", "6", "×"], ["1", "2", "3", "−"], [".", "0", "=", "+"]]


def evaluate(expr: str) -> str:
    """`12+3×4` with the usual precedence, in decimals; the calculator's own messages on error."""
    tokens: list[str] = []
    for ch in expr:
        if ch in OPS or not tokens or tokens[-1] in OPS:
            tokens.append(ch)
        else:
            tokens[-1] += ch
    if not tokens or tokens[-1] in OPS:
        return ""
    try:
        terms: list[Decimal] = [Decimal(tokens[0])]
        signs: list[str] = []
        for op, num in zip(tokens[1::2], tokens[2::2], strict=True):
            n = Decimal(num)
            if op == "×":
                terms[-1] *= n
            elif op == "÷":
                terms[-1] /= n
            else:
                signs.append(op)
                terms.append(n)
        total = terms[0]
        for op, n in zip(signs, terms[1:], strict=True):
            total = total + n if op == "+" else total - n
    except (DivisionByZero, InvalidOperation):
        return "Can't divide by 0" if "÷0" in expr else "Bad expression"
    text = format(total.normalize(), "f")
    return text if len(text) <= 16 else f"{float(total):.10g}"


class Calculator(Activity):
    name = "com.android.calculator2.Calculator"

    def __init__(self, app: CalculatorApp):
        super().__init__(app)
        self.expr, self.result = "", ""

    def press(self, key: str) -> None:
        if key == "=":
            value = evaluate(self.expr)
            self.expr, self.result = (
                (value, "") if value and value[0].isdigit() else (self.expr, value)
            )
        elif key == "AC":
            self.expr, self.result = "", ""
        elif key == "⌫":
            self.expr = self.expr[:-1]
        elif key in OPS and (not self.expr or self.expr[-1] in OPS):
            return
        else:
            self.expr += key

    def content(self) -> View:
        top = STATUS_BAR
        preview = evaluate(self.expr) if any(o in self.expr for o in OPS) else ""
        display = View("android.widget.LinearLayout", rid=self.rid("display"), bounds=(0, top, WIDTH, top + 900), children=[
            text_view(self.expr, (40, top + 300, WIDTH - 40, top + 520), self.rid("formula"), desc=self.expr or "No formula"),
            text_view(self.result or preview, (40, top + 560, WIDTH - 40, top + 700), self.rid("result_preview")),
        ])  # fmt: skip
        pad = View(
            "android.widget.LinearLayout",
            rid=self.rid("pad_numeric"),
            bounds=(0, top + 900, WIDTH, CONTENT[3]),
        )
        pad.children.append(
            button(
                "AC", (40, top + 920, 290, top + 1090), self.rid("clr"), lambda: self.press("AC")
            )
        )
        pad.children.append(
            image_button(
                "backspace",
                (WIDTH - 290, top + 920, WIDTH - 40, top + 1090),
                self.rid("del"),
                lambda: self.press("⌫"),
            )
        )
        for r, keys in enumerate(KEYPAD):
            for c, k in enumerate(keys):
                b = (40 + c * 250, top + 1110 + r * 250, 270 + c * 250, top + 1340 + r * 250)
                rid = (
                    OPS[k][0]
                    if k in OPS
                    else ("eq" if k == "=" else "dec_point" if k == "." else f"digit_{k}")
                )
                v = button(k, b, self.rid(rid), lambda k=k: self.press(k))
                v.desc = (
                    OPS[k][1]
                    if k in OPS
                    else ("equals" if k == "=" else "point" if k == "." else "")
                )
                pad.children.append(v)
        return View("android.widget.FrameLayout", bounds=CONTENT, children=[display, pad])
