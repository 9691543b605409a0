"""Secrets never reach a shard: planted in an imported trajectory and in the environment
of a real docker episode that prints it, they appear nowhere in raw/, processed/, any
export format (token shards decoded) or jobs.db, while SHAs and UUIDs stay."""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import uuid

import numpy as np
import pyarrow.parquet as pq
import pytest
import yaml
from worldtrace.collectors.importers import import_paths
from worldtrace.collectors.jobspec import JobSpec
from worldtrace.collectors.jobstore import open_job_store
from worldtrace.collectors.worker import Worker, WorkerConfig
from worldtrace.pipelines.export import ExportConfig, export
from worldtrace.pipelines.megatron import read_index
from worldtrace.pipelines.process import ProcessConfig, run
from worldtrace.pipelines.tokens import default_tokenizer, load_tokenizer
from worldtrace.schemas import ShardWriter, Store, Trajectory, Turn
from worldtrace.schemas.records import Action, Observation
from worldtrace.schemas.redact_rules import example_secrets

SHA1 = hashlib.sha1(b"commit").hexdigest()
SHA256 = hashlib.sha256(b"data").hexdigest()
UUID = str(uuid.UUID(int=0x1234567890ABCDEF1234567890ABCDEF))


def chat_file(path, planted: dict[str, tuple[str, str]]):
    """An OpenAI chat record with a secret of every kind in its system prompt, task, tool
    arguments and tool results, beside a SHA, a sum and a UUID."""
    lines = [ctx for _, ctx in planted.values()]
    msgs = [
        {"role": "system", "content": "You are careful. " + lines[0]},
        {"role": "user", "content": "Deploy with " + lines[1]},
    ]
    calls = [
        {"id": f"c{i}", "function": {"name": "bash", "arguments": json.dumps({"cmd": line})}}
        for i, line in enumerate(lines)
    ]
    msgs.append({"role": "assistant", "tool_calls": calls})
    for i, line in enumerate(lines):
        body = f"{line}\ncommit {SHA1}\n{SHA256}  data.bin\n{UUID}\n"
        msgs.append({"role": "tool", "tool_call_id": f"c{i}", "content": body})
    path.write_text(json.dumps({"id": "leaky", "messages": msgs}) + "\n")


def all_text(store: Store, tok) -> str:
    """Everything the store holds as text: Parquet rows, token shards decoded, JSON(L),
    Megatron sequences decoded, and the SQLite job store's bytes."""
    parts = []
    for f in sorted(store.root.rglob("*")):
        if not f.is_file():
            continue
        if f.suffix == ".parquet":
            t = pq.read_table(f)
            if "input_ids" in t.column_names:
                parts += tok.decode_batch(
                    t.column("input_ids").to_pylist(), skip_special_tokens=False
                )
            else:
                parts.append(json.dumps(t.to_pylist(), default=str, ensure_ascii=False))
        elif f.suffix == ".bin" and f.with_suffix(".idx").exists():
            sizes, pointers, _, dtype = read_index(f.with_suffix(".idx"))
            if np.dtype(dtype) != np.uint8:
                data = np.memmap(f, dtype=dtype, mode="r")
                step = np.dtype(dtype).itemsize
                ids = [
                    data[p // step : p // step + n].tolist()
                    for n, p in zip(sizes, pointers, strict=True)
                ]
                parts += tok.decode_batch(ids, skip_special_tokens=False)
        else:
            parts.append(f.read_bytes().decode("utf-8", errors="replace"))
    return "\n".join(parts)


@pytest.mark.docker
def test_planted_secrets_reach_no_shard_export_or_jobs_db(
    docker_engine, store, tmp_path, monkeypatch, wt_env
):
    planted = example_secrets(seed=11)
    chat_file(tmp_path / "leaky.jsonl", planted)
    report = import_paths([tmp_path / "leaky.jsonl"], store.raw / "import")
    assert sum(report.imported.values()) == 1, report.problems

    env_secrets = {  # handed to the sandbox by name and by env file; the agent prints them
        "WT_OPENAI_API_KEY": example_secrets(seed=12)["openai_key"][0],
        "WT_AWS_SECRET": example_secrets(seed=12)["aws_secret_key"][0],
        "WT_PLAIN_PASSWORD": "correct-horse-battery-staple",
    }
    for k, v in env_secrets.items():
        monkeypatch.setenv(k, v)
    (tmp_path / "more.env").write_text("WT_FROM_FILE=ghp_" + "Q" * 36 + "\nWT_DB=pg-pass-123456\n")
    job = {
        "name": "leak",
        "sandbox": {
            "kind": "terminal",
            "docker": {"env": sorted(env_secrets), "env_file": str(tmp_path / "more.env")},
        },
        "tasks": [
            {
                "id": "env",
                "instruction": "Show the environment.",
                "actions": [
                    "env | grep WT_ | sort\n",
                    "echo $WT_PLAIN_PASSWORD\n",
                    "git init -q /tmp/r && cd /tmp/r && git -c user.email=a@b -c user.name=a "
                    "commit -q --allow-empty -m x && git log --format=%H\n",
                    "cat /proc/sys/kernel/random/uuid; printf abc | sha256sum\n",
                ],
            }
        ],
    }
    js = open_job_store(store.jobs_db)
    js.submit(JobSpec.from_dict(job))
    stats = Worker(js, store.raw, WorkerConfig(concurrency=1)).run()
    assert stats.run == 1
    [t] = [t for t in _records(store.raw / "collect")]
    obs = "\n".join(x.observation.text for x in t.turns)
    assert t.redactions >= 5 and "<secret:env_value>" in obs  # recorded redacted, counted
    sha = re.search(r"^([0-9a-f]{40})$", obs, re.M).group(1)
    uid = re.search(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", obs).group(0)
    assert hashlib.sha256(b"abc").hexdigest() in obs

    run(ProcessConfig(inputs=[str(store.raw)], output=str(store.processed), workers=1))
    tok_path = str(default_tokenizer())
    for fmt in ("parquet", "megatron", "agentworldbench"):
        export(ExportConfig(input=str(store.table("trajectories")), output=str(store.export / fmt),
                            tokenizer=tok_path, format=fmt))  # fmt: skip

    text = all_text(store, load_tokenizer(tok_path))
    values = [v for v, _ in planted.values()] + list(env_secrets.values())
    values += ["ghp_" + "Q" * 36, "pg-pass-123456"]
    leaked = [v[:12] for v in values if v in text]
    assert not leaked, f"secrets found (first characters): {leaked}"
    for kept in (SHA1, SHA256, UUID, sha, uid):  # what a world model must learn stays
        assert kept in text, kept
    assert text.count("<secret:") > 20

    r = subprocess.run(
        ["worldtrace", "--store", str(store.root), "redact", "--check"],
        capture_output=True, text=True, env=wt_env,
    )  # fmt: skip
    assert r.returncode == 0, r.stdout + r.stderr


def _records(path):
    from worldtrace.schemas import read_records

    return list(read_records(path))


def test_jobs_db_keeps_env_names_never_values(tmp_path, monkeypatch, wt_env):
    secret = example_secrets(seed=3)["anthropic_key"][0]
    job = tmp_path / "job.yaml"
    job.write_text(
        yaml.safe_dump(
            {
                "name": "named",
                "sandbox": {"kind": "terminal", "docker": {"env": ["WT_ANTHROPIC_KEY"]}},
                "tasks": [{"id": "t", "instruction": "x", "actions": ["true\n"]}],
            }
        )
    )
    env = dict(wt_env, WT_ANTHROPIC_KEY=secret)
    r = subprocess.run(
        ["worldtrace", "jobs", "submit", str(job)], capture_output=True, text=True, env=env
    )
    assert r.returncode == 0, r.stderr
    db = Store.at(wt_env["WORLDTRACE_STORE"]).jobs_db
    raw = b"".join(p.read_bytes() for p in db.parent.glob("jobs.db*"))
    assert b"WT_ANTHROPIC_KEY" in raw and secret.encode() not in raw


def test_check_lists_file_record_field_kind_never_the_secret(tmp_path, wt_env):
    planted = example_secrets(seed=5)
    key, line = planted["github_token"]
    turns = [Turn(0, Action(kind="command", text="env"), Observation(text=line))]
    t = Trajectory(domain="terminal", turns=turns).with_id()
    with ShardWriter(tmp_path / "leaky") as w:  # written directly: no boundary redacted it
        w.write(t)
    (tmp_path / "leaky" / "notes.jsonl").write_text(json.dumps({"id": "n1", "text": line}) + "\n")
    tok_path = default_tokenizer()
    tok = load_tokenizer(str(tok_path))
    ids = tok.encode("observation: " + planted["aws_access_key"][1]).ids
    train = tmp_path / "leaky" / "export"
    train.mkdir()
    pq.write_table(
        __import__("pyarrow").table({"sample_id": ["s0"], "input_ids": [ids]}),
        train / "train-0.parquet",
    )
    sha = hashlib.sha256(tok_path.read_bytes()).hexdigest()
    (train / "manifest.json").write_text(json.dumps({"tokenizer": {"sha256": sha}}))
    r = subprocess.run(
        ["worldtrace", "redact", "--check", str(tmp_path / "leaky")],
        capture_output=True, text=True, env=wt_env,
    )  # fmt: skip
    assert r.returncode == 1
    lines = r.stdout.splitlines()
    assert f"{w.paths[0]}: {t.trajectory_id}: turns[0].observation.text: github_token" in lines
    assert f"{tmp_path / 'leaky' / 'notes.jsonl'}: n1: text: github_token" in lines
    assert f"{train / 'train-0.parquet'}: s0: input_ids (decoded): aws_access_key" in lines
    assert key not in r.stdout + r.stderr and planted["aws_access_key"][0] not in r.stdout
    assert "3 secret(s) found" in r.stderr


def test_check_reads_a_named_file_of_any_other_suffix_as_text(tmp_path, wt_env):
    """Found: `redact --check notes.txt` (or a saved .html page) said `0 secret(s) found`
    and exit 0 without reading the file: only known suffixes were read. A file named on
    the command line is read as text, line by line; a `.bin` without its `.idx` cannot be
    checked, and says so (exit 1)."""
    planted = example_secrets(seed=9)
    key, line = planted["aws_access_key"]
    (tmp_path / "notes.txt").write_text(f"first line\n{line}\n")
    (tmp_path / "page.html").write_text(f"<pre>{line}</pre>")
    (tmp_path / "orphan.bin").write_bytes(b"\x00" * 8)
    check = lambda *names: subprocess.run(  # noqa: E731
        ["worldtrace", "redact", "--check", *(str(tmp_path / n) for n in names)],
        capture_output=True, text=True, env=wt_env,
    )  # fmt: skip
    r = check("notes.txt", "page.html")
    assert r.returncode == 1, r.stdout + r.stderr
    assert f"{tmp_path / 'notes.txt'}: line 2: text: aws_access_key" in r.stdout.splitlines()
    assert f"{tmp_path / 'page.html'}: line 1: text: aws_access_key" in r.stdout.splitlines()
    assert key not in r.stdout + r.stderr and "2 secret(s) found in 2 file(s)" in r.stderr
    r = check("orphan.bin")
    assert r.returncode == 1 and "orphan.bin: a token shard without its .idx" in r.stderr


def test_a_secret_in_an_invalid_field_reaches_neither_rejects_nor_what_validate_prints(
    tmp_path, wt_env
):
    """A record rejected for a bad field value was rejected with the value quoted in the
    reason ("unknown domain 'AKIA...'"): the secret sat in processed/rejects, where no
    boundary redacts (records are redacted, reasons were not), and `validate` printed it."""
    planted = example_secrets(seed=7)
    aws, token = planted["aws_access_key"][0], planted["bearer_token"][0]
    good = Trajectory(
        domain="terminal",
        turns=[Turn(i, Action(kind="command", text="ls"), Observation(text="a")) for i in (0, 1)],
    ).with_id()
    bad_domain, bad_kind = good.to_dict(), good.to_dict()
    bad_domain["domain"] = aws
    bad_kind["turns"][0]["action"]["kind"] = "Bearer " + token
    records = tmp_path / "records.jsonl"
    records.write_text("".join(json.dumps(d, default=str) + "\n" for d in (bad_domain, bad_kind)))

    def cli(*args):
        return subprocess.run(["worldtrace", *args], capture_output=True, text=True, env=wt_env)

    shown = cli("validate", str(records))
    assert (
        shown.returncode == 1 and "domain: unknown domain '<secret:aws_access_key>'" in shown.stdout
    )
    assert (
        "turns[0].action.kind: unknown action kind 'Bearer <secret:bearer_token>'" in shown.stdout
    )
    assert cli("process", "--input", str(records)).returncode == 0
    reasons = cli("query", "--format", "json", "SELECT reason FROM rejects")
    assert reasons.returncode == 0 and reasons.stdout.count("<secret:") == 2, reasons.stdout
    for out in (shown, reasons):
        assert aws not in out.stdout + out.stderr and token not in out.stdout + out.stderr
    check = cli("redact", "--check")
    assert check.returncode == 0, check.stdout + check.stderr
