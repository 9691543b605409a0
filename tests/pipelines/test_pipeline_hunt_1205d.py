"""Found (hunt 1205d), in processing:

1. A command's output without a final newline was taken for the prompt: `curl -s URL`
   answering `{"id":42,...}root@sandbox:/# ` was decided `boilerplate` (keep 0.1, "the
   echo of the typed line and a prompt, no output"), the answer masked.
2. A failed tool call without arguments, retried as it was, was no `retry_cycle` (nor a
   keystroke retry without words): the word Jaccard of two empty sets counted as 0.
3. A raw file edited in place with its size and mtime kept (`sed -i` of a same-length
   edit, then `touch -r`) was `no new input`: docs/pipeline.md says a processed file
   that changed is an error.
4. The reject of a JSONL line `null` or `[1,2]` said `got NoneType` / `got list`.
5. `process --set output=DIR` wrote the processed tables outside the store, exit 0.

Real parts: raw shards written by ShardWriter, JSONL, the real `process` (Beam), `sed`
and `touch`, the CLI.
"""

from __future__ import annotations

import json
import subprocess

import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from worldtrace.collectors.synthetic import SyntheticConfig, build, generate
from worldtrace.pipelines.filters import FilterConfig, apply_filters
from worldtrace.pipelines.mask import split_answer
from worldtrace.pipelines.process import ProcessConfig, run
from worldtrace.schemas import ShardWriter, Store
from worldtrace.schemas import actions as A
from worldtrace.schemas.records import Action, Observation, Source, System, Trajectory, Turn
from worldtrace.schemas.views import connect

from worldtrace.cli import cli

SPACE = System(action_space=json.dumps([{"name": "get_status"}, {"name": "read"}]))
CURL = "curl -s http://localhost:8080/api/v1/orders/42\n"
ORDER = '{"id":42,"status":"shipped","carrier":"UPS","eta":"2026-12-09"}'
HOSTNAME = "printf '%s' \"$HOSTNAME\"\n"


def traj(domain, turns, origin, kind="import", system=None) -> Trajectory:
    tt = [
        Turn(
            index=i,
            action=Action("keystrokes", a) if isinstance(a, str) else a,
            observation=Observation(o) if isinstance(o, str) else o,
        )
        for i, (a, o) in enumerate(turns)
    ]
    source = Source(kind=kind, name="hand", origin_id=origin)
    return Trajectory(domain=domain, source=source, turns=tt, system=system or System()).with_id()


def cfg(store: Store, **kw) -> ProcessConfig:
    return ProcessConfig(inputs=[str(store.raw)], output=str(store.processed), workers=1, **kw)


@pytest.fixture(scope="module")
def processed(tmp_path_factory) -> Store:
    """The brief's records, processed once."""
    store = Store.at(tmp_path_factory.mktemp("hunt") / "store")
    failed = Observation("503 upstream unavailable", is_error=True)
    records = [
        traj("mcp", [(A.tool("get_status"), failed),
                     (A.tool("get_status"), Observation("status: green, 3 nodes")),
                     (A.tool("read", path="/a"), Observation("alpha"))],
             "NOARGS", kind="collector", system=SPACE),
        traj("mcp", [(A.tool("read", path="/a"), Observation("timeout", is_error=True)),
                     (A.tool("read", path="/a"), Observation("alpha text")),
                     (A.tool("get_status"), Observation("green"))],
             "SAMEARGS", kind="collector", system=SPACE),
        traj("terminal", [(CURL, CURL + ORDER + "root@sandbox:/# "),
                          (HOSTNAME, HOSTNAME + "web-7f9c2d-xk2lq$ "),
                          ("cat config.json\n", 'cat config.json\n{"db": "postgres"}\nroot@sandbox:/# '),
                          ("cd /tmp\n", "cd /tmp\nuser@sandbox:/tmp$ ")],
             "CURL"),
        traj("terminal", [("!!\n", Observation("!!\nbash: !!: event not found\n$ ", exit_code=1)),
                          ("!!\n", Observation("!!\nls -l\ntotal 0\n$ ", exit_code=0)),
                          ("pwd\n", Observation("pwd\n/root\n$ ", exit_code=0))],
             "BANGBANG"),
    ]  # fmt: skip
    with ShardWriter(store.raw / "a") as w:
        w.write(records)
    run(cfg(store))
    return store


def decisions(store: Store) -> dict[tuple[str, int], tuple[str, float, str]]:
    rows = (
        connect(store)
        .execute("SELECT origin_id, turn_index, category, keep, rule FROM turns")
        .fetchall()
    )
    return {(o, i): (c, k, r) for o, i, c, k, r in rows}


# -- 1. output before the prompt on the prompt's line ------------------------------------


def test_output_without_a_final_newline_is_the_answer_not_the_prompt(processed):
    """Before: CURL turns 0 and 1 `boilerplate`, 0.1, "a prompt, no output"."""
    d = decisions(processed)
    assert d[("CURL", 0)][:2] == ("retrieval", 1.0), d[("CURL", 0)]
    assert d[("CURL", 1)][:2] == ("action", 1.0), d[("CURL", 1)]
    for i in (0, 1):
        assert d[("CURL", i)][2].endswith("; of the answer after the echo of the typed line)")
    assert d[("CURL", 2)][:2] == ("retrieval", 1.0)  # output ending in a newline, as before
    assert d[("CURL", 3)] == (  # a silent success: the whole line is our prompt
        "boilerplate",
        0.1,
        "boilerplate: the echo of the typed line and a prompt, no output",
    )


PS1 = "user@sandbox:~/w$ "
SPLITS = [
    # output before the prompt on its line
    (ORDER + "root@sandbox:/# ", (ORDER, "root@sandbox:/# ")),
    ("web-7f9c2d-xk2lq$ ", ("web-7f9c2d-xk2lq", "$ ")),
    ("cost: 5$" + PS1, ("cost: 5$", PS1)),
    ("cost: 5$$ ", ("cost: 5$", "$ ")),
    ("okuser@sandbox:~$ ", ("ok", "user@sandbox:~$ ")),  # ours: its user is known
    ("3 nodes(venv) me@box:~/p (main)$ ", ("3 nodes", "(venv) me@box:~/p (main)$ ")),
    ("done\nokbash-5.1$ ", ("done\nok", "bash-5.1$ ")),
    ("1>>> ", ("1", ">>> ")),
    ("y" * 300 + PS1, ("y" * 300, PS1)),  # a long line: its end is looked at
    # a whole line that is a prompt, as before
    ("out\n" + PS1, ("out\n", PS1)),
    ("root@host:/etc# ", ("", "root@host:/etc# ")),
    ("x\n[me@fedora tmp]$ ", ("x\n", "[me@fedora tmp]$ ")),
    ("me@MacBook-Pro ~ % ", ("", "me@MacBook-Pro ~ % ")),
    ("host% ", ("", "host% ")),
    ("sh-5.2# ", ("", "sh-5.2# ")),
    ("/ # ", ("", "/ # ")),
    (">>> ", ("", ">>> ")),
    ("... ", ("", "... ")),
    ("$", ("", "$")),
    ("> ", ("", "> ")),
    # no prompt: output that merely ends like one, or a line break after it
    ("cost: 5$", ("cost: 5$", "")),
    ("Downloading...", ("Downloading...", "")),
    ("Loading... ", ("Loading... ", "")),
    ("a$ \n", ("a$ \n", "")),
    ("out\nmore", ("out\nmore", "")),
]


@pytest.mark.parametrize("answer, split", SPLITS, ids=[repr(s[0][-24:]) for s in SPLITS])
def test_the_prompt_is_a_known_shape_at_the_end_of_the_last_line(answer, split):
    assert split_answer(answer) == split


# -- 2. a retry of a call without arguments -----------------------------------------------


def test_a_failed_call_without_arguments_retried_the_same_is_a_retry_cycle(processed):
    """Before: only SAMEARGS's failed read was removed; NOARGS's failed get_status (and
    BANGBANG's failed `!!`, a keystroke without words) stayed in."""
    rows = connect(processed).execute("SELECT record, reason FROM rejects").fetchall()
    assert sorted(rows) == [  # the records' rows: NOARGS, SAMEARGS, CURL, BANGBANG
        ("row 0#turn 0", "retry_cycle"),
        ("row 1#turn 0", "retry_cycle"),
        ("row 3#turn 0", "retry_cycle"),
    ]
    d = decisions(processed)
    assert sorted(i for o, i in d if o == "NOARGS") == [0, 1]


def test_two_different_actions_without_words_are_no_retry():
    """Alike only when the same: another bare key after a failed one is no retry."""
    failed = Observation("bash: !!: event not found", exit_code=1)
    t = build("terminal", [("!!\n", failed), ("!$\n", "ls"), ("pwd\n", "/")])
    out, removed, _ = apply_filters(t.to_dict(), FilterConfig())
    assert removed == [] and len(out["turns"]) == 3


# -- 3. a raw file written in place with its size and mtime kept --------------------------


def jsonl_store(root) -> tuple[Store, object]:
    store = Store.at(root / "store")
    raw = store.raw / "import" / "records.jsonl"
    raw.parent.mkdir(parents=True)
    records = generate(SyntheticConfig(n=6, seed=4, domains=("terminal",)))
    raw.write_text("".join(t.to_json() + "\n" for t in records))
    return store, raw


def sed_keeping_times(raw, tmp_path) -> None:
    """A same-length edit by `sed -i`, then the times put back from a copy (`touch -r`)."""
    ref = tmp_path / "ref"
    subprocess.run(["cp", "-p", str(raw), str(ref)], check=True)
    before = raw.stat()
    subprocess.run(["sed", "-i", "0,/terminal/s//TERMINAL/", str(raw)], check=True)
    subprocess.run(["touch", "-r", str(ref), str(raw)], check=True)
    after = raw.stat()
    assert (after.st_size, after.st_mtime_ns) == (before.st_size, before.st_mtime_ns)
    assert raw.read_bytes() != ref.read_bytes()


def test_a_file_written_in_place_with_its_size_and_mtime_kept_is_a_change(tmp_path):
    """Before: `no new input`, exit 0, the processed data that of the old content."""
    store, raw = jsonl_store(tmp_path)
    run(cfg(store))
    shards = store.processed / "_index" / "shards.parquet"
    recorded = shards.stat().st_mtime_ns
    again = run(cfg(store))  # nothing moved: not hashed, the index not rewritten
    assert again["new_inputs"] == [] and shards.stat().st_mtime_ns == recorded
    sed_keeping_times(raw, tmp_path)
    with pytest.raises(ValueError, match=r"records\.jsonl: changed since it was processed"):
        run(cfg(store))


def test_an_index_without_ctimes_hashes_each_file_once(tmp_path):
    """An index an earlier version wrote (no ctime_ns, ino): the next run hashes each file,
    finds it the same and records them; a change made meanwhile is found by its hash."""
    store, raw = jsonl_store(tmp_path)
    first = run(cfg(store))
    shards = store.processed / "_index" / "shards.parquet"
    old = pq.read_table(shards).drop_columns(["ctime_ns", "ino"])
    pq.write_table(old, shards)
    again = run(cfg(store))
    assert again["new_inputs"] == [] and again["accounting"] == first["accounting"]
    index = pq.read_table(shards).to_pylist()
    assert [(r["ctime_ns"], r["ino"]) for r in index] == [
        (raw.stat().st_ctime_ns, raw.stat().st_ino)
    ]
    pq.write_table(old, shards)
    sed_keeping_times(raw, tmp_path)
    with pytest.raises(ValueError, match="changed since it was processed"):
        run(cfg(store))


def test_a_copied_store_is_still_the_data_processed(tmp_path):
    """`cp -a`: new ctimes and inodes, the same bytes: hashed once, nothing read again."""
    store, _ = jsonl_store(tmp_path)
    first = run(cfg(store))
    copy = Store.at(tmp_path / "copy")
    subprocess.run(["cp", "-a", str(store.root), str(copy.root)], check=True)
    again = run(cfg(copy))
    assert again["new_inputs"] == [] and again["accounting"] == first["accounting"]
    shards = copy.processed / "_index" / "shards.parquet"
    [row] = pq.read_table(shards).to_pylist()
    assert row["ino"] == (copy.raw / "import" / "records.jsonl").stat().st_ino
    recorded = shards.stat().st_mtime_ns
    assert run(cfg(copy))["new_inputs"] == [] and shards.stat().st_mtime_ns == recorded


# -- 4. JSON words in a reject's reason ---------------------------------------------------


def test_a_line_that_is_no_object_is_rejected_in_json_words(tmp_path):
    """Before: `<record>: expected an object, got NoneType` (list, str, int, bool)."""
    store = Store.at(tmp_path / "store")
    raw = store.raw / "lines.jsonl"
    raw.parent.mkdir(parents=True)
    [good] = generate(SyntheticConfig(n=1, seed=2))
    raw.write_text(good.to_json() + '\nnull\n[1,2]\n"s"\n3\ntrue\n')
    run(cfg(store))
    rows = connect(store).execute("SELECT record, reason FROM rejects ORDER BY 1").fetchall()
    assert rows == [
        ("line 2", "<record>: expected an object, got null"),
        ("line 3", "<record>: expected an object, got an array"),
        ("line 4", "<record>: expected an object, got a string"),
        ("line 5", "<record>: expected an object, got a number"),
        ("line 6", "<record>: expected an object, got a boolean"),
    ]


# -- 5. --set takes settings only ---------------------------------------------------------


def invoke(store: Store, *args: str):
    return CliRunner().invoke(cli, ["--store", str(store.root), "process", *args], obj={})


NOT_SETTINGS = [
    ("output=OUT", "not a setting: processed data goes to the store's processed/ (--store)"),
    ("inputs=[raw]", "not a setting: the files to read are --input PATH (default: the store's raw/)"),
    ("rebuild=true", "not a setting: use --rebuild"),
    ("runner=FlinkRunner", "not a setting: use --runner"),
    ("beam_args=[--x]", "not a setting: Beam's options go on the command line after the command's"),
    ("bogus=1", "unknown setting (known: filters, dedup, policy, policy_settings, seed, workers, bytes_per_worker)"),
]  # fmt: skip


@pytest.mark.parametrize("given, why", NOT_SETTINGS, ids=[n[0] for n in NOT_SETTINGS])
def test_set_takes_settings_only(tmp_path, corpus, given, why):
    """Before: `--set output=DIR` wrote the processed tables in DIR, exit 0, and the
    store's views said nothing of them; `--set rebuild=true` and the others passed too."""
    store = Store.at(tmp_path / "store")
    with ShardWriter(store.raw / "s") as w:
        w.write(corpus[:4])
    out = tmp_path / "elsewhere"
    given = given.replace("OUT", str(out))
    r = invoke(store, "--set", given)
    assert r.exit_code == 2, r.output
    assert r.stderr.splitlines()[-1].startswith(f"Error: Invalid value for --set: {given}: {why}")
    assert not out.exists() and not store.processed.exists()


def test_a_config_file_cannot_move_the_output(tmp_path, corpus):
    store = Store.at(tmp_path / "store")
    with ShardWriter(store.raw / "s") as w:
        w.write(corpus[:4])
    out = tmp_path / "elsewhere"
    f = tmp_path / "run.yaml"
    f.write_text(f"output: {out}\n")
    r = invoke(store, "--config", str(f))
    assert r.exit_code == 2, r.output
    assert r.stderr.splitlines()[-1] == (
        f"Error: Invalid value for --config: {f}: output: not a setting: processed data "
        "goes to the store's processed/ (--store)"
    )
    assert not out.exists()
    f.write_text("workers: 1\nfilters: {min_turns: 1}\n")  # settings still pass
    r = invoke(store, "--config", str(f), "--set", "workers=1", "--set", "seed=3")
    assert r.exit_code == 0, r.output
    assert json.loads((store.processed / "manifest.json").read_text())["config"]["seed"] == 3
