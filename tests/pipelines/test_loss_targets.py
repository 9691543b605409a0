"""What counts as a loss target: every character of a kept observation, nothing the
collector made, and a system prompt that says what the targets are.

Found by a review of exported stores:
- with `--template plain` (or a Jinja template) the last character of 81% of the kept
  observations was never a target: Qwen's pre-tokenizer merges `}`, `]` or `###` with the
  template's `\\n\\n` after it into one token, which is not wholly inside the observation;
  with chatml an observation starting with `\\n` lost it to `assistant\\n`'s newline;
- a 1 MiB terminal screen ending in `[output truncated]`, an SWE `[timed out after 30s]`
  and a truncated SWE read were full-keep targets: the cut and the marker are ours;
- tau-bench chats (imported as `mcp`, the agent talking to a simulated customer) were told
  "Each user message is one tool call ... the result the server returns".
"""

from __future__ import annotations

import json

import numpy as np
import pyarrow.parquet as pq
import pytest
from worldtrace.pipelines.export import ExportConfig, export
from worldtrace.pipelines.mask import (
    COLLECTOR_CUTS,
    AgentWorldV1,
    InformationAware,
    collector_cut,
    get_policy,
    turn_fault,
)
from worldtrace.pipelines.prompt import (
    TEXT_TURNS,
    SystemPrompt,
    builtin_instructions,
    builtin_text_turns,
    load_instructions,
)
from worldtrace.pipelines.render import CHATML, PLAIN, load_template
from worldtrace.pipelines.tokens import (
    Encoder,
    MaskConfig,
    default_tokenizer,
    load_tokenizer,
    loss_mask,
)
from worldtrace.schemas import ShardWriter
from worldtrace.schemas.records import Action, Observation, System, Trajectory, Turn

TOKENIZER = str(default_tokenizer())
OBSERVATIONS = [
    '{"name": {"first": "Heidi"}, "ids": ["0H3595", "F04ZYL"]}',
    '[{"flight_number": "HAT996"}]',
    "###STOP###",
    "\ndiff --git a/x b/x\n+return a/b\n \n \n",
    "total 3\n-rw-r--r-- 1 root root 0 a.txt\n",
    "ends with a space ",
    "   indented\n\n",
    "x",
]
JINJA = "{% for m in messages %}<<{{ m.role }}>>\n{{ m.content }}\n<</{{ m.role }}>>\n{% endfor %}"


AROUND = {
    "plain": ("### Observation\n", "\n\n"),
    "chatml": ("<|im_start|>assistant\n", "<|im_end|>\n"),
    "jinja": ("<<assistant>>\n", "\n<</assistant>>\n"),
}


@pytest.fixture(scope="module")
def tok():
    return load_tokenizer(TOKENIZER)


def turns_of(observations: list[str], keep: float = 1.0) -> list[dict]:
    return [
        {
            "index": i,
            "action": {"kind": "tool_call", "text": f'get_item({{"id": {i}}})'},
            "observation": {"text": o},
            "keep": keep,
            "category": "retrieval",
        }
        for i, o in enumerate(observations)
    ]


def covered(enc, mask: np.ndarray, n_chars: int) -> np.ndarray:
    """Which characters the target tokens hold."""
    out = np.zeros(n_chars, dtype=bool)
    for a, b in enc.offsets[mask.astype(bool)]:
        out[a:b] = True
    return out


def content_chars(text) -> np.ndarray:
    out = np.zeros(len(text), dtype=bool)
    c = text.content
    for a, b in zip(c[::2], c[1::2], strict=True):
        out[a:b] = True
    return out


@pytest.mark.parametrize("template", ["plain", "chatml", "jinja"])
@pytest.mark.parametrize("keep_mode", ["turn", "token", "prefix"])
def test_every_character_of_a_kept_observation_is_a_target(tok, tmp_path, template, keep_mode):
    """A token the pre-tokenizer merged across an observation's end or start is a target:
    the template text it also holds follows from the template. Nothing else is: no target
    token holds a character of an action or the system prompt."""
    if template == "jinja":
        (tmp_path / "t.j2").write_text(JINJA)
        tpl = load_template(str(tmp_path / "t.j2"))
    else:
        tpl = {"plain": PLAIN, "chatml": CHATML}[template]
    turns = turns_of(OBSERVATIONS)
    rendered = tpl.render("You are the world model of a booking server.", turns)
    [enc] = Encoder(tok)([rendered.text])
    cfg = MaskConfig(keep_mode=keep_mode, eot_target=False)
    mask, ranges = loss_mask(enc, rendered, {t["index"]: t for t in turns}, "tid", cfg)
    text = rendered.text
    got = covered(enc, mask, len(text))
    for sp in rendered.spans:
        lost = [i for i in range(sp.start, sp.end) if not got[i]]
        assert not lost, (template, text[sp.start : sp.end], [text[i] for i in lost])
    observation = np.zeros(len(text), dtype=bool)
    for sp in rendered.spans:
        observation[sp.start : sp.end] = True
    other = content_chars(text) & ~observation
    assert not (got & other).any(), "a target token holds an action or the system prompt"
    # the manifest's observation tokens are the tokens the mask can choose from
    assert sum(hi - lo for _, lo, hi in ranges) == int(mask.sum())


def test_a_token_merging_an_observation_with_an_action_is_not_a_target(tok, tmp_path):
    """A template with nothing between the messages lets a word of the observation and one
    of the next action become one token: predicting it would predict the agent's text."""
    (tmp_path / "bare.j2").write_text("{% for m in messages %}{{ m.content }}{% endfor %}")
    tpl = load_template(str(tmp_path / "bare.j2"))
    turns = turns_of(["abc", "ghi"])
    turns[1]["action"]["text"] = "def"
    rendered = tpl.render("", turns)
    [enc] = Encoder(tok)([rendered.text])
    end = rendered.spans[0].end  # "abc" then "def"
    assert any(a < end < b for a, b in enc.offsets.tolist()), "the test needs a merged token"
    mask, _ = loss_mask(enc, rendered, {t["index"]: t for t in turns}, "tid", MaskConfig())
    got = covered(enc, mask, len(rendered.text))
    action = content_chars(rendered.text)
    for sp in rendered.spans:
        action[sp.start : sp.end] = False
    assert not (got & action).any()


def target_runs(tok, row: dict) -> list[str]:
    ids, m = row["input_ids"], row["loss_mask"]
    runs, i = [], 0
    while i < len(m):
        if m[i]:
            j = i
            while j < len(m) and m[j]:
                j += 1
            runs.append(tok.decode(ids[i:j], skip_special_tokens=False))
            i = j
        else:
            i += 1
    return runs


@pytest.mark.parametrize("template", ["plain", "chatml", "jinja"])
def test_exported_targets_hold_every_observation_whole(tok, tmp_path, template):
    """The review's check on a real export: decode each run of target tokens; it holds its
    observation whole (before: `}` and `]` missing from 1,286 of 1,581 turns in plain)."""
    turns = [
        Turn(i, Action("tool_call", f'get_item({{"id": {i}}})'), Observation(o), keep=1.0)
        for i, o in enumerate(OBSERVATIONS)
    ]
    rec = Trajectory("mcp", turns=turns, trajectory_id="t-cover")
    with ShardWriter(tmp_path / "in") as w:
        w.write([rec])
    name = template
    if template == "jinja":
        (tmp_path / "t.j2").write_text(JINJA)
        name = str(tmp_path / "t.j2")
    m = export(
        ExportConfig(
            input=str(tmp_path / "in"),
            output=str(tmp_path / "out"),
            tokenizer=TOKENIZER,
            template=name,
            eot_target=False,
        )
    )
    [row] = pq.read_table(next((tmp_path / "out").glob("*.parquet"))).to_pylist()
    runs = target_runs(tok, row)
    assert len(runs) == len(OBSERVATIONS)
    head, tail = AROUND[template]  # the template's text before and after an observation
    for run, obs in zip(runs, OBSERVATIONS, strict=True):
        assert obs in run, (template, obs, run)
        before, _, after = run.partition(obs)
        assert head.endswith(before) and tail.startswith(after), (template, obs, run)
    cat = m["counts"]["by_category"]["unscored"]
    assert cat["obs_tokens"] == cat["loss_tokens"] == row["num_loss_tokens"]


# -- what the collector made -----------------------------------------------------------
STATS = {"ol": 0.0, "nov": 1.0, "r": 5.0}


@pytest.mark.parametrize(
    "perturbation,truncated,state,fault",
    [
        (None, True, None, "truncated"),
        (None, False, '{"timed_out": true}', "timed_out"),
        (None, False, '{"interrupted": true}', "interrupted"),
        (None, False, '{"prompt_returned": false, "still_printing": true}', "still_printing"),
        (None, False, '{"blocked": ["http://example.com/"], "refused": true}', "refused"),
        (None, False, '{"blocked": ["http://example.com/a.png"]}', None),
        (None, False, '{"timed_out": false, "prompt_returned": true}', None),
        (None, False, '{"raw": "echo \\"timed_out\\""}', None),
        (None, False, "not json", None),
        (None, False, None, None),
        ('{"kind": "latency", "ms": 20}', True, None, "truncated"),
        ('{"kind": "truncate"}', True, None, "truncate"),  # the injected fault says more
        ('{"kind": "error"}', False, '{"timed_out": true}', "error"),
    ],
)
def test_turn_fault_names_what_made_the_observation(perturbation, truncated, state, fault):
    assert turn_fault(perturbation, truncated, state) == fault


@pytest.mark.parametrize("policy", ["agentworld-v1", "agentworld-v1+info"])
@pytest.mark.parametrize("cut", list(COLLECTOR_CUTS))
def test_an_observation_the_collector_cut_is_context_never_a_target(policy, cut):
    """A 1 MiB screen ending in `[output truncated]` was `retrieval` at keep 1.0; an SWE
    step ending in `[timed out after 30s]` was `action` at 1.0."""
    obs = "line of a flood\n" * 1000 + "[output truncated]"
    d = get_policy(policy).decide(STATS, "yes\n", obs, cut)
    assert (d.category, d.keep) == ("injected", 0.0)
    assert (
        d.rule
        == f"injected: {COLLECTOR_CUTS[cut]}: where it ends is ours, not the environment's answer"
    )
    kept = get_policy(policy, **{"keep.injected": 1.0}).decide(STATS, "yes\n", obs, cut)
    assert (kept.category, kept.keep) == ("injected", 1.0)
    off = get_policy(policy, cuts_injected="false").decide(STATS, "yes\n", obs, cut)
    assert off.category == "retrieval"  # decided on its text, as before
    assert (
        get_policy(policy, cuts_injected="false").decide(STATS, "yes\n", obs, "error").category
        == "injected"
    )
    assert get_policy(policy).describe()["cuts_injected"] is True
    with pytest.raises(ValueError, match="cuts_injected=maybe: expected true or false"):
        get_policy(policy, cuts_injected="maybe")


def test_collector_cut_reads_only_true_flags():
    assert collector_cut(None, None) is None
    assert collector_cut(False, '{"timed_out": 1}') is None  # a flag is `true`
    assert collector_cut(False, '["timed_out"]') is None
    assert isinstance(AgentWorldV1().decide(STATS, "a", "b", None).category, str)
    assert InformationAware().decide(STATS, "a", "b" * 100, "truncated").category == "injected"


def swe_turn(i: int, text: str, **obs) -> Turn:
    return Turn(i, Action("command", f"run step {i}"), Observation(text, **obs))


def test_processing_keeps_collector_cuts_out_of_the_loss(tmp_path):
    from worldtrace.pipelines.process import ProcessConfig, run
    from worldtrace.schemas import Store
    from worldtrace.schemas.views import connect

    store = Store.at(tmp_path / "store")
    rec = Trajectory(
        "swe",
        turns=[
            swe_turn(0, "collected 3 items\n\ntests/test_a.py ...   [100%]\n"),
            swe_turn(1, "x" * 5000, truncated=True),
            swe_turn(
                2,
                "Running tests...\n[timed out after 30s]",
                is_error=True,
                exit_code=137,
                state_json=json.dumps({"timed_out": True}),
            ),
        ],
    ).with_id()
    with ShardWriter(store.raw / "s") as w:
        w.write([rec])
    run(ProcessConfig(inputs=[str(store.raw)], output=str(store.processed), workers=1))
    rows = (
        connect(store)
        .execute("SELECT turn_index, category, keep, in_loss FROM turns ORDER BY turn_index")
        .fetchall()
    )
    assert [r[1:] for r in rows[1:]] == [("injected", 0.0, False)] * 2
    assert rows[0][1] != "injected"


# -- the system prompt of a chat with the user -----------------------------------------
def chat_record(kinds: list[str], domain: str = "mcp") -> dict:
    return {
        "domain": domain,
        "system": {"task_description": "Hi, I want to check my booking 397RY7."},
        "turns": [{"index": i, "action": {"kind": k, "text": "..."}} for i, k in enumerate(kinds)],
    }


def test_a_chat_with_the_user_is_told_how_its_text_turns_are_answered():
    """tau-bench's turns where the agent talks to the customer were told that every user
    message is a tool call answered by the server."""
    prompt = SystemPrompt()
    mixed = prompt.text(chat_record(["text", "tool_call", "text"]))
    tools = prompt.text(chat_record(["tool_call"]))
    mcp = builtin_instructions()["mcp"]
    assert tools.endswith(f"# Simulation instruction\n{mcp}")
    assert mixed.endswith(f"# Simulation instruction\n{mcp}\n\n{builtin_text_turns()}")
    assert "do not apply to such a message" in builtin_text_turns()
    assert "###STOP###" in builtin_text_turns()  # the simulator's end marker stays a target
    swe = prompt.text(chat_record(["command", "text"], domain="swe"))
    assert swe.endswith(f"{builtin_instructions()['swe']}\n\n{builtin_text_turns()}")
    # `text` alone is also an action of unknown kind (AgentWorldBench's imports, the
    # schema's default): not known to be a message to the user
    assert prompt.text(chat_record(["text", "text"])) == tools
    # a record's own instruction replaces worldtrace's; where the agent talks to its user
    # it is the simulated user's script (tau-bench's), which says nothing of the tools:
    # it follows worldtrace's texts
    own = chat_record(["tool_call"])
    own["system"]["simulation_instruction"] = "Answer as the airline's servers."
    assert prompt.text(own).endswith("# Simulation instruction\nAnswer as the airline's servers.")
    own = chat_record(["text", "tool_call"])
    own["system"]["simulation_instruction"] = "You are Sophia; cancel H8Q05L."
    assert prompt.text(own).endswith(
        f"# Simulation instruction\n{mcp}\n\n{builtin_text_turns()}\n\nYou are Sophia; cancel H8Q05L."
    )
    # a record read without action kinds (none known) gets the domain's alone
    assert prompt.text({**chat_record([]), "turns": [{"index": 0, "action": {}}]}) == tools


def test_the_text_turn_instruction_is_overridable_and_recorded(tmp_path):
    f = tmp_path / "i.yaml"
    f.write_text(f"{TEXT_TURNS}: Answer as the customer.\nmcp: Answer as the server.\n")
    prompt = SystemPrompt.from_file(str(f))
    text = prompt.text(chat_record(["text", "tool_call"]))
    assert text.endswith("Answer as the server.\n\nAnswer as the customer.")
    d = prompt.describe(str(f))
    assert TEXT_TURNS not in d["sha256"] and len(d["sha256"]) == len(builtin_instructions())
    assert d["text_turns_sha256"] != SystemPrompt().describe(None)["text_turns_sha256"]
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / f"{TEXT_TURNS}.md").write_text("Be the user.\n")
    assert load_instructions(str(tmp_path / "d"))[TEXT_TURNS] == "Be the user."


def test_an_exported_chat_carries_the_text_turn_instruction(tok, tmp_path):
    rec = Trajectory(
        "mcp",
        turns=[
            Turn(0, Action("text", "Could you give me your user id?"), Observation("heidi_6522")),
            Turn(1, Action("tool_call", 'get_user({"id": "heidi_6522"})'), Observation("{}")),
        ],
        system=System(task_description="Hi, I want to check my booking 397RY7."),
    ).with_id()
    rec.turns[0].keep = rec.turns[1].keep = 1.0
    with ShardWriter(tmp_path / "in") as w:
        w.write([rec])
    export(
        ExportConfig(input=str(tmp_path / "in"), output=str(tmp_path / "o"), tokenizer=TOKENIZER)
    )
    [row] = pq.read_table(next((tmp_path / "o").glob("*.parquet"))).to_pylist()
    assert builtin_text_turns() in tok.decode(row["input_ids"], skip_special_tokens=False)


def test_overlap_range_and_content_lookup_match_a_linear_scan(tok):
    import random

    from worldtrace.pipelines.tokens import _touches

    rng = random.Random(1)
    texts = ['{"a": [1]}\n\n### Action\nx', "<|im_start|>assistant\n\ndiff 😀 ﬁ\n", "abc", ""]
    for text, enc in zip(texts, Encoder(tok)(texts), strict=True):
        offsets = enc.offsets.tolist()
        for _ in range(300):
            s = rng.randrange(len(text) + 1)
            e = rng.randrange(s, len(text) + 1)
            holding = [i for i, (a, b) in enumerate(offsets) if a < e and s < b and s < e]
            want = (holding[0], holding[-1] + 1) if holding else (enc.first_at(s),) * 2
            assert enc.overlap_range(s, e) == want, (text, s, e)
    for _ in range(2000):
        cuts = sorted(rng.sample(range(40), 2 * rng.randrange(4)))
        pairs = [(a, b) for a, b in zip(cuts[::2], cuts[1::2], strict=True) if a < b]
        flat = tuple(x for p in pairs for x in p)
        a = rng.randrange(40)
        b = rng.randrange(a + 1, 41)
        assert _touches(flat, a, b) == any(x < b and a < y for x, y in pairs), (flat, a, b)
