"""Hunt 1205 (export): a Jinja template that changes the text it is given.

1. `{{ m.content|trim }}`: the export wrapped each text in private-use markers to find
   its span, so `trim` saw only the markers and the samples kept the whitespace the
   template drops: training data other than what the template says, unreported.
2. `{{ m.content[:30] }}`: the slice cut an observation's end marker, and the export
   stopped with `not enough values to unpack (expected 2, got 1)`.

Both are now refusals naming the template, before or instead of a wrong sample."""

from __future__ import annotations

import pytest
from worldtrace.pipelines.render import load_template

from .conftest import decided_store
from .test_export_hunt_1204f import wt

LOOP = "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ CONTENT }}<|im_end|>\n{% endfor %}"


def export_with(tmp_path, content: str):
    store = decided_store(tmp_path, keep=1.0)
    template = tmp_path / "t.j2"
    template.write_text(LOOP.replace("CONTENT", content))
    out = tmp_path / "out"
    args = ["--store", str(store.root), "export", "--template", str(template), "-o", str(out)]
    r = wt(*args, "--template-eot", "<|im_end|>")
    return r, template, out


def test_a_template_that_trims_the_text_is_refused_before_any_shard(tmp_path):
    r, template, out = export_with(tmp_path, "m.content|trim")
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
    assert r.stderr.strip() == (
        f"Error: template {template}: it changes the message text it is given (a filter "
        "such as trim, or a slice): the loss spans could not be the text it writes; insert "
        "each message's content unchanged ({{ m.content }})"
    )
    assert not out.exists()


def test_a_template_that_cuts_an_observation_is_refused_naming_the_turn(tmp_path):
    r, template, out = export_with(tmp_path, "m.content[:30]")
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
    assert "not enough values" not in r.stderr
    assert f"template {template}" in r.stderr and "it changes the message text" in r.stderr
    assert not out.exists()


def test_a_slice_only_long_texts_meet_is_refused_at_the_turn_it_cuts(tmp_path):
    """Longer than the load-time probe: the record that meets the slice is refused,
    naming its turn, where the export stopped on `not enough values to unpack`."""
    template = tmp_path / "t.j2"
    template.write_text(LOOP.replace("CONTENT", "m.content[:5000]"))
    tpl = load_template(str(template))
    turns = [{"index": 0, "action": {"text": "cat big"}, "observation": {"text": "x" * 6000}}]
    with pytest.raises(ValueError, match=r"changes the observation of turn 0 \(its end is cut"):
        tpl.render("", turns)


def test_a_template_that_inserts_the_text_unchanged_still_exports(tmp_path):
    r, _, out = export_with(tmp_path, "m.content")
    assert r.returncode == 0, r.stderr
    assert any(out.glob("*.parquet"))
