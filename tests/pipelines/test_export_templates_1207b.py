"""Real chat templates (2026-12-07, b): a model's own `chat_template`, rendered by export
as transformers' `apply_chat_template` renders it.

Found: every one of six widely used templates failed. Given as a Jinja file, each stopped
the export at its first trajectory (`UndefinedError: 'bos_token' is undefined`, `'tools'
is undefined`, `'add_generation_prompt' is undefined`): export rendered with a strict
environment and passed `messages` alone. Past that, the trim check would have refused
Llama 3.1, Gemma 2 and Mistral v0.3 (their templates `trim` each message), and the
tokenizer_config.json a model ships its template in was read as Jinja (`unexpected char
'\\'`). Now the environment is transformers' (sandboxed, `trim_blocks`, `lstrip_blocks`,
`raise_exception`, its `tojson`, `strftime_now`, `{% generation %}`), the template gets
`add_generation_prompt=False`, `tools=None` and the special tokens of its model's
tokenizer_config.json, and `trim`/`strip` act on the text itself, so the loss spans are
the text the template writes. A template that drops the system prompt (Mistral v0.3 writes
it only before a final user message) is refused, as are slices and other changes.

Also: where a template writes a text after the last message only (Phi-3's eos_token), a
turn started inside the next turn's `<|user|>` header; it starts at the header now.

Fixtures (data/templates/*.json): each model's tokenizer_config.json, cut to the fields a
rendering reads (the special tokens, and `chat_template` as public copies of the model's
file give it: Qwen/Qwen2.5-7B-Instruct, meta-llama/Llama-3.1-8B-Instruct,
mistralai/Mistral-7B-Instruct-v0.3, google/gemma-2-9b-it, microsoft/Phi-3-mini-4k-instruct);
the DeepSeek-R1-Distill-Qwen-32B one is the whole file. Real parts: the `worldtrace`
command, the Qwen tokenizer, Parquet read back; transformers' `apply_chat_template` where
installed (offline: a tokenizer built from the local tokenizer.json).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from worldtrace.pipelines.prompt import SystemPrompt
from worldtrace.pipelines.render import load_template
from worldtrace.pipelines.tokens import load_tokenizer
from worldtrace.schemas import ShardWriter, Store
from worldtrace.schemas.records import Action, Observation, System, Trajectory, Turn

from .test_export_hunt_1204f import TOKENIZER, wt

DATA = Path(__file__).parent / "data" / "templates"
QWEN, LLAMA, MISTRAL = "qwen2.5-7b-instruct", "llama-3.1-8b-instruct", "mistral-7b-instruct-v0.3"
GEMMA, PHI3, DEEPSEEK = "gemma-2-9b-it", "phi-3-mini-4k-instruct", "deepseek-r1-distill-qwen-32b"
ALL = [QWEN, LLAMA, MISTRAL, GEMMA, PHI3, DEEPSEEK]
TEXTS = [  # (action, observation): whitespace at the ends (trim), markup, non-ASCII
    ("echo 0\n", "0 ok beta\n"),
    ("  cat notes.txt\n", "\n  Café <b>olé</b> & 'x'\n\n"),
    ("ls", "a.txt  b.txt"),
]
EOT = {
    QWEN: "<|im_end|>",
    LLAMA: "<|eot_id|>",
    PHI3: "<|end|>",
    DEEPSEEK: "<｜end▁of▁sentence｜>",
}


def expected(name: str, system: str, texts: list[tuple[str, str]]) -> str:
    """What each model's template writes for the conversation (apply_chat_template's
    text, add_generation_prompt=False)."""
    if name == QWEN:
        return f"<|im_start|>system\n{system}<|im_end|>\n" + "".join(
            f"<|im_start|>user\n{a}<|im_end|>\n<|im_start|>assistant\n{o}<|im_end|>\n"
            for a, o in texts
        )
    if name == LLAMA:  # `trim` on every message
        head = "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n"
        head += (
            f"Cutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n{system.strip()}"
        )
        return f"{head}<|eot_id|>" + "".join(
            f"<|start_header_id|>user<|end_header_id|>\n\n{a.strip()}<|eot_id|>"
            f"<|start_header_id|>assistant<|end_header_id|>\n\n{o.strip()}<|eot_id|>"
            for a, o in texts
        )
    if name == PHI3:  # eos_token after the last message
        return (
            f"<|system|>\n{system}<|end|>\n"
            + "".join(f"<|user|>\n{a}<|end|>\n<|assistant|>\n{o}<|end|>\n" for a, o in texts)
            + "<|endoftext|>"
        )
    assert name == DEEPSEEK  # bos_token from an AddedToken entry; the system prompt bare
    return (
        "<｜begin▁of▁sentence｜>"
        + system
        + "".join(f"<｜User｜>{a}<｜Assistant｜>{o}<｜end▁of▁sentence｜>" for a, o in texts)
    )


def written(name: str, obs: str) -> str:
    return obs.strip() if name == LLAMA else obs


@pytest.fixture(scope="module")
def tok():
    return load_tokenizer(TOKENIZER)


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Store:
    """One trajectory of TEXTS, every turn a target, as a processed table."""
    s = Store.at(tmp_path_factory.mktemp("tpl") / "store")
    turns = [
        Turn(i, Action("keystrokes", a), Observation(o), category="mixed", keep=1.0)
        for i, (a, o) in enumerate(TEXTS)
    ]
    t = Trajectory(
        "terminal", turns=turns, system=System(simulation_instruction="Predict the output.")
    )
    with ShardWriter(s.table("trajectories")) as w:
        w.write([t.with_id()])
    return s


@pytest.fixture(scope="module")
def system(store) -> str:
    from worldtrace.pipelines.inputs import iter_batches

    [[rec]] = list(iter_batches(str(store.table("trajectories"))))
    return SystemPrompt().text(rec)


def export(store: Store, out: Path, *args: str):
    return wt("--store", str(store.root), "export", "-o", str(out), *args)


def rows(out: Path) -> list[dict]:
    return [r for f in sorted(out.glob("*.parquet")) for r in pq.read_table(f).to_pylist()]


def runs(mask: list[int]) -> list[tuple[int, int]]:
    m = np.concatenate(([0], np.asarray(mask, dtype=np.int8), [0]))
    edges = np.flatnonzero(np.diff(m))
    return list(zip(edges[::2].tolist(), edges[1::2].tolist(), strict=True))


# -- a model's tokenizer_config.json as --template -----------------------------------------
@pytest.mark.parametrize("name", list(EOT))
def test_a_models_tokenizer_config_exports_what_its_template_writes(
    tmp_path, store, system, tok, name
):
    """The export's text is the template's, special tokens and all, and its targets are
    each observation as the template writes it (trimmed by Llama's) and the end of turn."""
    out = tmp_path / "out"
    r = export(store, out, "--template", str(DATA / f"{name}.json"), "--template-eot", EOT[name])
    assert r.returncode == 0, r.stderr
    assert wt("export", "--verify", str(out)).returncode == 0
    [row] = rows(out)
    ids = row["input_ids"]
    assert tok.decode(ids, skip_special_tokens=False) == expected(name, system, TEXTS)
    targets = [tok.decode(ids[a:b], skip_special_tokens=False) for a, b in runs(row["loss_mask"])]
    # each the observation and end of turn, and a boundary token joining them to the
    # template's text on either side (docs/export.md, Loss mask): a few characters more
    wanted = [written(name, o) + EOT[name] for _, o in TEXTS]
    assert len(targets) == len(wanted)
    assert all(w in t and len(t) - len(w) <= 4 for t, w in zip(targets, wanted, strict=True))


def test_a_jinja_file_takes_the_special_tokens_of_the_tokenizer_config_beside_it(tmp_path, store):
    """A model directory as transformers saves it now: chat_template.jinja beside a
    tokenizer_config.json without the template. Either file as --template gives the rows
    the config holding the template gives."""
    cfg = json.loads((DATA / f"{LLAMA}.json").read_text())
    model = tmp_path / "Llama-3.1-8B-Instruct"
    model.mkdir()
    (model / "chat_template.jinja").write_text(cfg.pop("chat_template"))
    (model / "tokenizer_config.json").write_text(json.dumps(cfg))
    got = {}
    for what, path in [
        ("config", DATA / f"{LLAMA}.json"),
        ("jinja", model / "chat_template.jinja"),
        ("beside", model / "tokenizer_config.json"),
    ]:
        r = export(store, tmp_path / what, "--template", str(path), "--template-eot", "<|eot_id|>")
        assert r.returncode == 0, r.stderr
        got[what] = [(x["input_ids"], x["loss_mask"]) for x in rows(tmp_path / what)]
    assert got["jinja"] == got["config"] and got["beside"] == got["config"]


def test_a_jinja_file_writing_bos_token_with_no_tokenizer_config_is_refused(tmp_path, store):
    """Llama's template alone: its bos_token is unknown. Refused when the template is
    loaded, in one line saying what to give, where each trajectory failed on `'bos_token'
    is undefined`."""
    j2 = tmp_path / "llama.j2"
    j2.write_text(json.loads((DATA / f"{LLAMA}.json").read_text())["chat_template"])
    out = tmp_path / "out"
    r = export(store, out, "--template", str(j2))
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
    [line] = [x for x in r.stderr.splitlines() if x.startswith("Error")]
    assert (
        line.startswith(f"Error: template {j2}: it writes bos_token") and "trajectory" not in line
    )
    assert "tokenizer_config.json" in line
    assert not out.exists()


def test_a_template_that_drops_the_system_prompt_is_refused(tmp_path, store):
    """Mistral v0.3 writes the system message only before a final user message: training
    text ends with an assistant one, so transformers renders it without the system prompt
    (the simulation instructions). Refused, not exported without it."""
    out = tmp_path / "out"
    r = export(store, out, "--template", str(DATA / f"{MISTRAL}.json"), "--template-eot", "</s>")
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
    assert f"template '{MISTRAL}' dropped the system prompt (system message)" in r.stderr
    assert not out.exists()


def test_a_template_that_refuses_a_system_message_says_so_in_one_line(tmp_path, store):
    """Gemma 2 raises on a system message (`raise_exception`), as under transformers."""
    out = tmp_path / "out"
    r = export(store, out, "--template", str(DATA / f"{GEMMA}.json"))
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
    [line] = [x for x in r.stderr.splitlines() if x.startswith("Error")]
    assert f"template {GEMMA}: TemplateError: System role not supported" in line
    assert not out.exists()


def test_a_split_that_cuts_an_observation_is_refused_naming_the_turn():
    """DeepSeek-R1's template keeps what follows a `</think>` in an assistant message: an
    observation holding one would lose its start. Refused naming the turn (the end marker
    came with no start: the renderer indexed `spans[None]`)."""
    tpl = load_template(str(DATA / f"{DEEPSEEK}.json"))
    texts = [("ls", "a.txt"), ("cat t.xml", "<think>x</think>\ny")]
    with pytest.raises(ValueError, match=r"changes the observation of turn 1 \(its start is cut"):
        tpl.render("S", turns_of(texts))


def test_named_templates_give_the_default_and_the_tokens_are_in_the_hash(tmp_path):
    """tokenizer_config.json may hold named templates (Command R, Hermes): transformers
    renders a conversation without tools with the `default` one. The special tokens are in
    the template's sha256 (the manifest's): another bos_token, another text."""
    cfg = json.loads((DATA / f"{LLAMA}.json").read_text())
    llama = cfg["chat_template"]
    cfg["chat_template"] = [
        {"name": "tool_use", "template": "{{ 1/0 }}"},
        {"name": "default", "template": llama},
    ]
    named = tmp_path / "named.json"
    named.write_text(json.dumps(cfg))
    turns = turns_of(TEXTS)
    want = load_template(str(DATA / f"{LLAMA}.json")).render("S", turns).text
    assert load_template(str(named)).render("S", turns).text == want
    cfg["bos_token"] = "<s>"
    other = tmp_path / "other.json"
    other.write_text(json.dumps(cfg))
    assert load_template(str(other)).sha256 != load_template(str(named)).sha256


def test_a_turn_starts_at_its_header_when_the_template_ends_with_more(tmp_path):
    """Phi-3's template writes eos_token (`<|endoftext|>`) after the last message only. A
    turn starts where the rendering of the turns before it ends, up to where that text and
    the next message differ: `<|end|>\n<|` is both's, and the turns started inside their
    `<|user|>` header (at `user|>`), so `--overflow split` cut parts inside it."""
    tpl = load_template(str(DATA / f"{PHI3}.json"), "<|end|>")
    r = tpl.render("S", turns_of(TEXTS))
    assert [r.text[s.turn_start :][:9] for s in r.spans] == ["<|user|>\n"] * len(TEXTS)


# -- the environment: transformers' ------------------------------------------------------
SMALL = {
    "blocks": (  # trim_blocks and lstrip_blocks: no newline or indent of the tags
        "{% for m in messages %}\n    {% if m.role == 'assistant' %}\n"
        "<a>{{ m.content }}</a>\n    {% else %}\n<{{ m.role }}>{{ m.content }}\n"
        "    {% endif %}\n{% endfor %}\n"
    ),
    "tojson": (  # transformers' tojson: no HTML escapes, non-ASCII kept, keys in order
        "{% for m in messages %}{{ {'role': m.role, 'text': m.content} | tojson }}\n{% endfor %}"
    ),
    "generation": (  # the {% generation %} tag of templates that mark assistant text
        "{% for m in messages %}{% if m.role == 'assistant' %}{% generation %}"
        "[{{ m.content }}]{% endgeneration %}{% else %}<{{ m.content }}>{% endif %}{% endfor %}"
    ),
    "defined": (  # what apply_chat_template passes, and loop controls
        "{{ tools is defined }}/{{ tools is none }}/{{ add_generation_prompt }}/"
        "{{ raise_exception is defined }}/{{ strftime_now is defined }}\n"
        "{% for m in messages %}{% if m.role == 'tool' %}{% continue %}{% endif %}"
        "{{ m.role }}: {{ m.content }}\n{% endfor %}"
    ),
    "strip": (  # string methods on the text itself, as Qwen3's and DeepSeek's use
        "{% for m in messages %}{% set c = m.content %}"
        "{% if '</think>' in c %}{% set c = c.split('</think>')[-1] %}{% endif %}"
        "{{ m.role }}|{{ c.lstrip('\\n').rstrip() }}|{{ c.startswith('\\n') }}|{{ c|length }}\n"
        "{% endfor %}"
    ),
}
SMALL_EXPECTED = {
    "blocks": "<system>S\n<user>echo 0\n\n<a>0 ok beta\n</a>\n",
    "tojson": (
        '{"role": "system", "text": "S"}\n{"role": "user", "text": "echo 0\\n"}\n'
        '{"role": "assistant", "text": "\\n  Café <b>olé</b> & \'x\'\\n"}\n'
    ),
    "generation": "<S><echo 0\n>[0 ok beta\n]",
    "defined": "True/True/False/True/True\nsystem: S\nuser: echo 0\n\nassistant: 0 ok beta\n\n",
    "strip": "system|S|False|1\nuser|echo 0|False|7\nassistant|0 ok beta|True|11\n",
}
SMALL_TEXTS = {"tojson": [("echo 0\n", "\n  Café <b>olé</b> & 'x'\n")]}


def turns_of(texts: list[tuple[str, str]]) -> list[dict]:
    return [
        {"index": i, "action": {"text": a}, "observation": {"text": o}}
        for i, (a, o) in enumerate(texts)
    ]


@pytest.mark.parametrize("name", list(SMALL))
def test_a_jinja_file_renders_in_transformers_environment(tmp_path, name):
    j2 = tmp_path / f"{name}.j2"
    j2.write_text(SMALL[name])
    texts = SMALL_TEXTS.get(
        name, [("echo 0\n", "\n0 ok beta\n" if name == "strip" else "0 ok beta\n")]
    )
    assert load_template(str(j2)).render("S", turns_of(texts)).text == SMALL_EXPECTED[name]


def test_strftime_now_is_one_date_for_the_export_and_source_date_epoch_fixes_it(
    tmp_path, monkeypatch
):
    """Templates that date their system header (Llama 3.2/3.3, Mistral Small) call
    strftime_now: the date of the export (taken when the template is loaded), or of
    $SOURCE_DATE_EPOCH for byte-identical output on another day."""
    j2 = tmp_path / "d.j2"
    j2.write_text(
        "Today Date: {{ strftime_now('%d %b %Y') }}\n{% for m in messages %}{{ m.content }}{% endfor %}"
    )
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1735689600")  # 2025-01-01T00:00:00Z
    assert (
        load_template(str(j2)).render("", turns_of([("a", "b")])).text
        == "Today Date: 01 Jan 2025\nab"
    )


def test_trim_spans_are_the_trimmed_text(tmp_path):
    """Llama's template trims every message: each observation's span is its text as the
    template writes it, and the end of turn follows it."""
    tpl = load_template(str(DATA / f"{LLAMA}.json"), "<|eot_id|>")
    r = tpl.render(" Obey. \n", turns_of(TEXTS))
    assert [r.text[s.start : s.end] for s in r.spans] == [o.strip() for _, o in TEXTS]
    assert all(r.text[s.end : s.eot_end] == "<|eot_id|>" for s in r.spans)
    assert r.text.count("Obey.<|eot_id|>") == 1


def test_a_change_that_cannot_be_applied_to_the_text_is_still_refused(tmp_path):
    """Our check stays: a filter on more than the text (`(content + '\\n')|trim` strips
    the text's own end only when the text is inserted as itself) is refused at load."""
    j2 = tmp_path / "t.j2"
    j2.write_text(
        "{% for m in messages %}<{{ m.role }}>{{ (m.content + '\\n')|trim }}\n{% endfor %}"
    )
    with pytest.raises(ValueError, match=r"it changes the message text it is given"):
        load_template(str(j2))


# -- the same text as transformers' apply_chat_template -----------------------------------
def hf_tokenizer(name: str):
    import transformers  # the `train` extra set-up installs

    cfg = json.loads((DATA / f"{name}.json").read_text())
    special = {
        k: v["content"] if isinstance(v, dict) else v
        for k, v in cfg.items()
        if k.endswith("_token") and v is not None
    }
    return transformers.PreTrainedTokenizerFast(
        tokenizer_file=TOKENIZER, chat_template=cfg["chat_template"], **special
    )


@pytest.mark.parametrize("system", ["You simulate a shell.\n", ""])
@pytest.mark.parametrize("name", ALL)
def test_the_text_is_apply_chat_templates(name, system, monkeypatch):
    """Every fixture, with and without a system prompt: where export renders, its text is
    transformers' to the character; where it refuses, transformers raises (Gemma 2) or
    drops the system prompt (Mistral v0.3)."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    hf = hf_tokenizer(name)
    messages = [{"role": "system", "content": system}] if system else []
    for a, o in TEXTS:
        messages += [{"role": "user", "content": a}, {"role": "assistant", "content": o}]
    tpl = load_template(str(DATA / f"{name}.json"))
    try:
        ours = tpl.render(system, turns_of(TEXTS)).text
    except ValueError as exc:
        assert system, exc
        if name == MISTRAL:
            assert "dropped the system prompt" in str(exc)
            assert "You simulate" not in hf.apply_chat_template(messages, tokenize=False)
        else:
            assert name == GEMMA and "System role not supported" in str(exc)
            with pytest.raises(Exception, match="System role not supported"):
                hf.apply_chat_template(messages, tokenize=False)
        return
    assert name not in (MISTRAL, GEMMA) or not system
    assert str(ours) == hf.apply_chat_template(messages, tokenize=False)


@pytest.mark.parametrize("name", list(SMALL))
def test_a_small_template_renders_as_apply_chat_template(tmp_path, name, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    import transformers  # the `train` extra set-up installs

    j2 = tmp_path / f"{name}.j2"
    j2.write_text(SMALL[name])
    texts = SMALL_TEXTS.get(
        name, [("echo 0\n", "\n0 ok beta\n" if name == "strip" else "0 ok beta\n")]
    )
    hf = transformers.PreTrainedTokenizerFast(tokenizer_file=TOKENIZER, chat_template=SMALL[name])
    messages = [{"role": "system", "content": "S"}]
    for a, o in texts:
        messages += [{"role": "user", "content": a}, {"role": "assistant", "content": o}]
    ours = load_template(str(j2)).render("S", turns_of(texts)).text
    assert str(ours) == hf.apply_chat_template(messages, tokenize=False)
