"""Hunt 1205 (export): a Jinja template that changes the text it is given.

1. `{{ m.content|trim }}`: the export wrapped each text in private-use markers to find
   its span, so `trim` saw only the markers and the samples kept the whitespace the
   template drops: training data other than what the template says, unreported.
2. `{{ m.content[:30] }}`: the slice cut an observation's end marker, and the export
   stopped with `not enough values to unpack (expected 2, got 1)`.

Both were refusals naming the template, before or instead of a wrong sample; since 1207b
`trim` (and its kin) act on the text itself, as real templates need, and only a change
of the text such as a slice is refused."""

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


def test_a_template_that_trims_the_text_exports_the_trimmed_text(tmp_path):
    """Refused from 1205 to 1207b; real templates trim every message (Llama 3.1, Gemma 2,
    Mistral v0.3), and `trim` now acts on the text itself: its spans are the trimmed
    text (test_export_templates_1207b.py checks them)."""
    r, _, out = export_with(tmp_path, "m.content|trim")
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    assert any(out.glob("*.parquet"))


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
