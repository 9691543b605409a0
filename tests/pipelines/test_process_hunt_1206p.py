"""Hunt 1206p, through the real CLI (import, process on the real Beam runner, query):

- the same text in NFC and in NFD (combining accents) was two texts: `\\w` takes no
  combining mark, so `élève` in NFD was the words `e`, `le`, `ve`; the NFC copy's echo
  turn was `echo` keep 0.05, the NFD copy's `action` keep 1.0, and the NFD copy was
  neither an exact nor a near duplicate. The statistics, words, shingles and the exact
  dedup key now read NFC text; the stored text and the trajectory id stay as recorded;
- a verbatim repeat of an observation longer than deflate's 32 KiB window scored as
  novel (six turns of one 40,000-character output: `cond_novelty` 0.878);
- an empty tool output was `transform` keep 0.5, its rule a transform's with zeros.
"""

from __future__ import annotations

import json
import random
import subprocess
import unicodedata
from pathlib import Path

from worldtrace.pipelines.process import LAYOUT

STATS = ("ol", "nov", "jac", "r", "byte_entropy", "zlib_ratio", "cond_novelty")
LINES = [
    "Élèves de l'école été préférés",
    "Le garçon a reçu un cadeau à Noël",
    "Où sont passées les clés du château",
    "Ça coûte très cher à Genève",
    "Le café crème est déjà prêt",
    "Une forêt épaisse entoure le lac gelé",
    "Les œufs brûlés sentent très fort",
    "Il a été élu député en décembre",
]


def wt(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    r = subprocess.run(["worldtrace", *args], capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr
    return r


def openai(rid: str, turns: list[tuple[str, str]]) -> dict:
    """An OpenAI chat record: one `bash` tool call and its output per turn."""
    msgs = [{"role": "system", "content": "sys"}, {"role": "user", "content": "go"}]
    for k, (cmd, out) in enumerate(turns):
        call = {"name": "bash", "arguments": json.dumps({"cmd": cmd}, ensure_ascii=False)}
        msgs.append({"role": "assistant", "content": "",
                     "tool_calls": [{"id": f"c{k}", "type": "function", "function": call}]})  # fmt: skip
        msgs.append({"role": "tool", "tool_call_id": f"c{k}", "content": out})
    return {"id": rid, "messages": msgs}


def processed(tmp_path: Path, env: dict[str, str], lines: list[str], *settings: str) -> str:
    """A store with `lines` imported (one JSONL file) and processed."""
    f = tmp_path / "in.jsonl"
    f.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    store = str(tmp_path / f"S{len(list(tmp_path.glob('S*')))}")
    wt(env, "--store", store, "--create", "import", str(f))
    wt(env, "--store", store, "process", *(a for s in settings for a in ("--set", s)))
    return store


def query(env: dict[str, str], store: str, sql: str) -> list[dict]:
    return json.loads(wt(env, "--store", store, "query", sql, "--format", "json").stdout)


def nfd(text: str) -> str:
    return unicodedata.normalize("NFD", text)


def echo_turns(form) -> list[tuple[str, str]]:
    return [(form(f"echo {line} {k}"), form(f"{line} {k}\n")) for k, line in enumerate(LINES)]


def test_nfc_and_nfd_copies_are_one_text(tmp_path, wt_env):
    """Three copies of one record (NFC, NFD, NFC written with `\\u` escapes) and an NFD
    copy with one word changed: the same statistics and decisions turn by turn (dedup
    off), one cluster with dedup on: two exact copies and a near one. The NFD copies keep
    their own trajectory ids (the store's ids are the recorded bytes')."""
    same = echo_turns(str)
    changed = echo_turns(nfd)
    changed[-1] = (changed[-1][0], nfd(same[-1][1].replace("décembre", "janvier")))
    assert changed[-1] != echo_turns(nfd)[-1]
    lines = [
        json.dumps(openai("nfc", same), ensure_ascii=False),
        json.dumps(openai("nfd", echo_turns(nfd)), ensure_ascii=False),
        json.dumps(openai("escaped", same)),  # \u00c9...: NFC once read
        json.dumps(openai("nfd-near", changed), ensure_ascii=False),
    ]
    assert nfd(LINES[0]) != LINES[0] and "\\u00c9" in lines[2]
    apart = processed(tmp_path, wt_env, lines, "dedup.exact=false", "dedup.near=false")
    cols = ", ".join(STATS)
    rows = query(
        wt_env, apart,
        f"select origin_id, turn_index, category, keep, rule, {cols} from turns "
        "where origin_id in ('nfc', 'nfd', 'escaped') order by turn_index, origin_id",
    )  # fmt: skip
    by_origin: dict[str, list] = {}
    for r in rows:
        by_origin.setdefault(r.pop("origin_id"), []).append(r)
    assert len(by_origin["nfc"]) == len(LINES)
    assert by_origin["nfd"] == by_origin["nfc"] == by_origin["escaped"]  # was action 1.0
    assert by_origin["nfc"][0]["category"] == "echo"

    store = processed(tmp_path, wt_env, lines)
    clusters = query(
        wt_env, store, "select origin_id, trajectory_id, cluster_id, role from clusters"
    )
    got = {c["origin_id"]: c for c in clusters}
    assert {o: c["role"] for o, c in got.items()} == {
        "nfc": "representative", "escaped": "exact", "nfd": "exact", "nfd-near": "near",
    }  # fmt: skip
    assert len({c["cluster_id"] for c in clusters}) == 1
    assert got["nfd"]["trajectory_id"] != got["nfc"]["trajectory_id"]  # the id as recorded
    assert got["escaped"]["trajectory_id"] == got["nfc"]["trajectory_id"]
    assert got["nfc"]["cluster_id"] == "c" + got["nfc"]["trajectory_id"]
    stored = query(wt_env, store, "select observation_text from raw_turns where turn_index = 0")
    assert {r["observation_text"] for r in stored} >= {f"{LINES[0]} 0\n", nfd(f"{LINES[0]} 0\n")}


def words(rng: random.Random, chars: int) -> str:
    vocab = ["".join(rng.choices("abcdefghijklmnopqrstuvwxyz", k=rng.randrange(2, 9)))
             for _ in range(3000)]  # fmt: skip
    out, n = [], 0
    while n < chars:
        w = rng.choice(vocab)
        out.append(w)
        n += len(w) + 1
    return " ".join(out)[:chars]


def test_a_verbatim_repeat_beyond_the_window_is_a_repeat(tmp_path, wt_env):
    """A 40,000-character output said again (it scored 0.878), and a short output said
    again after 50,000 other characters: each is further back than deflate's 32 KiB
    window, and each is `cond_novelty` 0, as a repeat is. (A slice of an earlier output
    that far back is not found: a search of the context per turn costs more than the
    deflates, docs/pipeline.md#turn-statistics.)"""
    rng = random.Random(1206)
    big, other = words(rng, 40_000), words(rng, 40_000)
    # actions unlike each other: alike, the filters read each next one as a retry
    rep = [(cmd, big) for cmd in ("cat big.txt", "less -R copy", "more ./b", "tac x | tac")]
    part = [("cat big.txt", big), ("echo ok", "ok\n"), ("cat other.txt", other),
            ("sed -n 100,300p big.txt", big[5_000:15_000]), ("printf 'ok\\n'", "ok\n")]  # fmt: skip
    lines = [json.dumps(openai("rep", rep)), json.dumps(openai("part", part))]
    store = processed(tmp_path, wt_env, lines)
    rows = query(
        wt_env, store, "select origin_id, turn_index, cond_novelty from turns order by 1, 2"
    )
    cn = {(r["origin_id"], r["turn_index"]): r["cond_novelty"] for r in rows}
    assert cn[("rep", 0)] > 0.9 and cn[("part", 0)] > 0.9 and cn[("part", 2)] > 0.9
    assert [cn[("rep", k)] for k in (1, 2, 3)] == [0.0, 0.0, 0.0]  # was 0.878
    assert cn[("part", 4)] == 0.0  # `ok` again, 50,000 characters back


def test_an_empty_tool_output_is_boilerplate_with_its_own_rule(tmp_path, wt_env):
    """An empty output and one of whitespace are boilerplate, as a typed line answered by a
    prompt alone, with a rule that says so (both were `transform` keep 0.5, `transform:
    Nov<0.5 and R<1.0 (OL=0.000 Nov=0.000 R=0.000)`), under both policies."""
    turns = [("touch a", ""), ("touch b", " \n\t\n"), ("cat a.txt", "alpha beta gamma delta\n")]
    lines = [json.dumps(openai("empty", turns))]
    for policy in ("agentworld-v1", "agentworld-v1+info"):
        store = processed(tmp_path, wt_env, lines, f"policy={policy}")
        rows = query(wt_env, store, "select category, keep, rule from turns order by turn_index")
        assert rows[:2] == [
            {"category": "boilerplate", "keep": 0.1,
             "rule": "boilerplate: no output (the observation is empty)"},
            {"category": "boilerplate", "keep": 0.1,
             "rule": "boilerplate: no output (the observation is whitespace only)"},
        ], policy  # fmt: skip
        assert rows[2]["category"] != "boilerplate"


def test_a_store_of_layout_8_asks_for_a_rebuild(tmp_path, wt_env):
    """Its statistics, decisions and exact groups were made from text in any form: an
    incremental run over it would mix the two, so it refuses and names `--rebuild`."""
    assert LAYOUT >= 9
    store = processed(tmp_path, wt_env, [json.dumps(openai("a", echo_turns(str)))])
    manifest = Path(store) / "processed" / "manifest.json"
    manifest.write_text(json.dumps({**json.loads(manifest.read_text()), "layout": 8}))
    f = tmp_path / "b.jsonl"
    f.write_text(json.dumps(openai("b", echo_turns(nfd)), ensure_ascii=False) + "\n")
    wt(wt_env, "--store", store, "import", str(f))
    r = subprocess.run(["worldtrace", "--store", store, "process"], capture_output=True,
                       text=True, env=wt_env)  # fmt: skip
    assert r.returncode != 0
    assert f"layout 8, now {LAYOUT}" in r.stderr and "--rebuild" in r.stderr
    wt(wt_env, "--store", store, "process", "--rebuild")
    assert json.loads(manifest.read_text())["layout"] == LAYOUT
