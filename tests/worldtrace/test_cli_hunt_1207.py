"""CLI hunt 1207. Found:

5. a Parquet file whose footer does not read broke the one-line rule: pyarrow's reason
   ends in a newline, kept whole by `validate` (a blank line after it), `redact --check`
   (its line cut in two) and the `rejects` table (`Invalid data\\n`); and a shard whose
   pages do not decode ended `redact --check` with pyarrow's line, naming no file;
6. `doctor` on a store path that is a file said it `does not exist`, then a `FAIL` of a
   run manifest read through it; `ANDROID_ADB_SERVER_PORT=abc` failed the `adb` check too
   (`adb ... fails`, fix: install adb), where it is the `android devices` check's line;
7. `explain` printed `origin=openai:chats:2` and then said `no processed trajectory
   matches 'openai:chats:2'`.

Real CLI processes on real files: JSONL imported with the real importers, the real
pipeline, shards damaged on disk as a disk fault or a cut copy leaves them."""

from __future__ import annotations

import json
import struct
from pathlib import Path

from ..conftest import wt

WORDS = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron pi"


def _output(n: int, t: int) -> str:
    return " ".join(f"{w}{n}{t}" for w in (WORDS + " rho sigma tau phi chi psi omega").split())


def openai_chats(path: Path, n: int = 2) -> Path:
    """`n` OpenAI-messages records without an id: their origin ids are `chats:LINE`."""
    lines = []
    for i in range(n):
        messages = [{"role": "user", "content": f"list things {i}"}]
        for t in range(3):
            args = json.dumps({"command": f"ls d{i}{t}"})
            call = {
                "id": f"c{t}",
                "type": "function",
                "function": {"name": "bash", "arguments": args},
            }
            messages += [
                {"role": "assistant", "content": "", "tool_calls": [call]},
                {"role": "tool", "tool_call_id": f"c{t}", "content": _output(i, t)},
            ]
        lines.append(json.dumps({"messages": messages}))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")
    return path


def sharegpt_chats(path: Path, n: int = 2) -> Path:
    """`n` ShareGPT records without an id, of other contents: origin ids `chats:LINE` too."""
    lines = []
    for i in range(n):
        conv = [{"from": "human", "value": f"show files {i}"}]
        for t in range(3):
            call = json.dumps({"name": "bash", "arguments": {"command": f"cat f{i}{t}"}})
            conv += [
                {"from": "function_call", "value": call},
                {"from": "observation", "value": _output(i + 7, t)},
            ]
        lines.append(json.dumps({"conversations": conv}))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")
    return path


def imported_shard(env: dict, tmp_path: Path) -> Path:
    """The raw shard `import` made of a small file, in the store of `env`."""
    r = wt(env, "import", "--create", str(openai_chats(tmp_path / "in" / "chats.jsonl")))
    assert r.returncode == 0, r.stderr
    [shard] = Path(env["WORLDTRACE_STORE"]).glob("raw/import/*.parquet")
    return shard


def zero_footer(shard: Path) -> None:
    """The footer's metadata zeroed, its length and magic kept: pyarrow then says
    `Couldn't deserialize thrift: TProtocolException: Invalid data` and a newline."""
    data = bytearray(shard.read_bytes())
    n = struct.unpack("<I", data[-8:-4])[0]
    data[-8 - n : -8] = bytes(n)
    shard.write_bytes(data)


# -- 5 --------------------------------------------------------------------------------
def test_a_parquet_footer_that_does_not_read_is_one_line_everywhere(wt_env, tmp_path):
    shard = imported_shard(wt_env, tmp_path)
    zero_footer(shard)

    r = wt(wt_env, "validate", str(shard))
    assert r.returncode == 1
    [line] = r.stdout.splitlines()  # was the line, then an empty one
    assert line.startswith(f"{shard}: <file>: unreadable Parquet: "), line
    assert not line.endswith(" "), line

    r = wt(wt_env, "redact", "--check")
    assert r.returncode == 1
    said, summary = r.stderr.splitlines()  # was cut in two: `...Invalid data` then `)`
    assert said.startswith(f"cannot check {shard}: unreadable Parquet (") and said.endswith(")")
    assert summary.endswith("file(s)"), summary

    r = wt(wt_env, "process")
    assert r.returncode == 0, r.stderr
    [rejected] = [x for x in r.stderr.splitlines() if x.startswith("rejected: ")]
    assert "unreadable Parquet: " in rejected and "\\n" not in rejected, rejected
    q = wt(wt_env, "query", "SELECT reason FROM rejects", "--format", "json")
    [reason] = [row["reason"] for row in json.loads(q.stdout)]
    assert "unreadable Parquet: " in reason and "\n" not in reason, reason


def test_redact_check_names_a_shard_whose_pages_do_not_decode_and_goes_on(wt_env, tmp_path):
    shard = imported_shard(wt_env, tmp_path)
    data = bytearray(shard.read_bytes())
    data[40:60] = bytes(b ^ 0xFF for b in data[40:60])  # the first data page: its CRC fails
    shard.write_bytes(data)
    leak = tmp_path / "notes.txt"
    leak.write_text("key AKIAIOSFODNN7EXAMPLE\n")

    r = wt(wt_env, "redact", "--check", str(shard), str(leak))
    assert r.returncode == 1
    assert r.stdout.splitlines() == [f"{leak}: line 1: text: aws_access_key"]
    said, summary = r.stderr.splitlines()  # was `Error: could not verify page integrity...`
    assert said.startswith(f"cannot check {shard}: unreadable Parquet ("), said
    assert summary == "1 secret(s) found in 2 file(s)"


# -- 6 --------------------------------------------------------------------------------
def test_doctor_on_a_store_path_that_is_a_file_says_so_and_checks_nothing_through_it(
    wt_env, tmp_path
):
    afile = tmp_path / "afile"
    afile.write_text("not a store\n")
    env = dict(wt_env, WORLDTRACE_STORE=str(afile))
    assert wt(env, "stats").stderr.strip() == f"Error: store {afile} is not a directory"

    r = wt(env, "doctor", "--store-only")
    assert r.returncode == 1  # a problem: every command refuses this store
    assert r.stdout.splitlines()[0].split() == ["[FAIL]", "store", str(afile), "is", "not", "a",
                                                "directory"]  # fmt: skip
    assert "does not exist" not in r.stdout and "manifest" not in r.stdout, r.stdout

    doc = json.loads(wt(env, "doctor", "--store-only", "--json").stdout)
    assert [(c["name"], c["detail"], c["problem"]) for c in doc["checks"]] == [
        ("store", f"{afile} is not a directory", True)
    ]

    gone = dict(wt_env, WORLDTRACE_STORE=str(tmp_path / "gone"))  # missing: still a MISS
    r = wt(gone, "doctor", "--store-only")
    assert r.returncode == 0 and "does not exist" in r.stdout


def test_an_adb_port_that_is_no_number_is_the_android_devices_check_alone(wt_env):
    r = wt(dict(wt_env, ANDROID_ADB_SERVER_PORT="abc"), "doctor", "--json")
    checks = {c["name"]: c for c in json.loads(r.stdout)["checks"]}
    adb = checks["adb"]
    assert adb["ok"] and "Android Debug Bridge" in adb["detail"], adb
    said = [n for n, c in checks.items() if "ANDROID_ADB_SERVER_PORT" in c["detail"]]
    assert said == ["android devices"], said
    assert "ANDROID_ADB_SERVER_PORT" in checks["android devices"]["fix"]


# -- 7 --------------------------------------------------------------------------------
def test_explain_takes_back_the_origin_its_header_prints(wt_env, tmp_path):
    oa = openai_chats(tmp_path / "oa" / "chats.jsonl")
    sg = sharegpt_chats(tmp_path / "sg" / "chats.jsonl")  # the same origin ids, by format
    assert wt(wt_env, "import", "--create", str(oa)).returncode == 0
    assert wt(wt_env, "import", "--format", "sharegpt", str(sg)).returncode == 0
    assert wt(wt_env, "process").returncode == 0
    q = "SELECT trajectory_id FROM trajectories WHERE origin_format = 'openai' AND origin_id = "
    tid = wt(wt_env, "query", q + "'chats:2'", "--format", "csv").stdout.split()[1]

    head = wt(wt_env, "explain", tid).stdout.splitlines()[0]
    [origin] = [w.removeprefix("origin=") for w in head.split() if w.startswith("origin=")]
    assert origin == "openai:chats:2", head
    r = wt(wt_env, "explain", origin)  # was: no processed trajectory matches, exit 1
    assert r.returncode == 0, r.stdout
    assert r.stdout.splitlines()[0] == head
    doc = json.loads(wt(wt_env, "explain", origin, "--json").stdout)
    assert (doc["status"], doc["trajectory_id"]) == ("explained", tid)

    r = wt(wt_env, "explain", "chats:2")  # the origin id alone names both formats' records
    assert r.returncode == 1 and "matches 2 trajectories" in r.stdout, r.stdout
    other = wt(wt_env, "explain", "sharegpt:chats:2")
    assert other.returncode == 0 and " origin=sharegpt:chats:2 " in other.stdout
    assert wt(wt_env, "explain", "openai:chats:9").returncode == 1
