"""A secret our output cap cut (review of 2026-12-04): the end of a truncated observation
is checked for the start of a handed-over value or of a key of known shape
(`Redactor.cut_tail`), where no whole-value rule can match what is left."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest
from worldtrace.collectors.jobs import JobSpec, run_job
from worldtrace.schemas.redact import RedactConfig, Redactor

VALUE = "tok-abcdefgh1234567890"  # 22 characters, as the review's MY_API_TOKEN
GHP = "ghp_A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
PAD = "x" * 40


def cut(text: str, literals=(VALUE,), **config) -> str:
    return Redactor(RedactConfig(**config), literals).cut_tail(text)[0]


@pytest.mark.parametrize("n", [6, 7, 12, 16, 21])
def test_a_prefix_of_a_handed_over_value_at_the_cut_is_redacted(n):
    assert cut(PAD + VALUE[:n]) == PAD + "<secret:env_value>"
    assert cut(f"line\nA={VALUE[:n]}") == "line\nA=<secret:env_value>"


def test_a_prefix_shorter_than_env_min_chars_is_kept():
    assert cut(PAD + VALUE[:5]) == PAD + VALUE[:5]
    assert cut(PAD + VALUE[:9], env_min_chars=10) == PAD + VALUE[:9]
    assert cut(PAD + VALUE[:10], env_min_chars=10) == PAD + "<secret:env_value>"


def test_the_longest_prefix_at_the_cut_is_taken_and_counted_once():
    # the value starts again inside its own prefix: `abcab` + cut, of `abcabcXYZ...`
    value = "abcabcabcXYZ123"
    out, n = Redactor(RedactConfig(), [value]).cut_tail("pre " + value[:12])
    assert (out, n) == ("pre <secret:env_value>", 1)


def test_a_value_not_at_the_end_and_ordinary_tails_are_kept():
    assert cut(VALUE[:10] + " and more") == VALUE[:10] + " and more"  # not at the cut
    assert cut(PAD + "tok-") == PAD + "tok-"  # shorter than env_min_chars
    assert cut(PAD) == PAD and cut("") == ""


@pytest.mark.parametrize(
    ("tail", "kind"),
    [
        ("ghp_A1b2C3d4", "github_token"),
        ("github_pat_11ABCDEF_x", "github_token"),
        ("sk-A1b2C3", "openai_key"),
        ("sk-proj-abc_D-9", "openai_key"),
        ("sk-ant-api03-Zx", "anthropic_key"),
        ("AKIAIOSF", "aws_access_key"),
        ("ASIA2B", "aws_access_key"),
        ("xoxb-1234-56", "slack_token"),
        ("xapp-1-A0", "slack_token"),
        ("hf_AbCdEf", "huggingface_token"),
        ("npm_a1B2", "npm_token"),
        ("AIzaSyA-b_c", "google_api_key"),
        ("sk_live_51Hx", "stripe_access_key"),
        ("rk_test_9", "stripe_access_key"),
        ("dckr_pat_A-b_", "docker_token"),
        ("ya29.a0Af", "google_oauth_token"),
        ("eyJhbGciOiJIUzI1NiJ9.eyJzd", "jwt"),
        ("dop_v1_0a1b", "digitalocean_token"),
        ("shpat_0a1B", "shopify_token"),
    ],
)
def test_the_start_of_a_known_key_shape_at_the_cut_is_redacted(tail, kind):
    for before in ("export T=", "url https://", '{"k": "', "cut here "):
        assert cut(PAD + before + tail) == PAD + before + f"<secret:{kind}>"
    assert cut(tail) == f"<secret:{kind}>"


def test_starts_detect_secrets_finds_inside_a_word_are_taken_there_too():
    """The review's second step: `x` * 4084 then `ghp_...`, cut after 8 of its 36."""
    assert cut("x" * 4084 + "ghp_A1b2C3d4") == "x" * 4084 + "<secret:github_token>"
    assert cut("idxoxb-12-ab") == "id<secret:slack_token>"
    assert cut("mask-A1b2C3") == "mask-A1b2C3"  # `sk-` only where a key may start
    assert cut("CAUCASIAN") == "CAUCASIAN"


def test_a_private_key_cut_in_its_header_or_body_is_redacted():
    body = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAA"
    assert cut("cat id\n" + body) == "cat id\n<secret:private_key>"
    assert cut("cat id\n-----BEGIN RSA PRIV") == "cat id\n<secret:private_key>"


@pytest.mark.parametrize(
    "tail",
    [
        "make task-runner",  # `sk-` inside a word
        "ask-me",
        "e3b0c44298fc1c149afbf4c8996fb924",  # hex
        "commit 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b",
        "/usr/lib/python3.11/site-packages/numpy",  # paths
        "/home/ghp_user/notes.txt",  # a key's prefix, then what no key holds
        "~/.cache/hf_home/hub/",
        "ghp_",  # the prefix alone: no character of a key left
        "results: sk- done",
        "hello world",
    ],
)
def test_ordinary_tails_are_kept(tail):
    assert cut(PAD + tail) == PAD + tail


def test_a_placeholder_already_at_the_end_is_left_alone():
    text = PAD + "<secret:env_value>"
    assert Redactor(RedactConfig(), [VALUE]).cut_tail(text) == (text, 0)


def test_nothing_is_redacted_when_redaction_is_off():
    assert cut(PAD + "ghp_A1b2C3d4", enabled=False) == PAD + "ghp_A1b2C3d4"


@pytest.mark.docker
def test_a_value_cut_by_the_output_cap_reaches_no_shard(docker_engine, store, repo, monkeypatch):
    """The review's job: 4,080 bytes, then the value, under a 4,096-byte cap."""
    monkeypatch.setenv("MY_API_TOKEN", VALUE)
    bash = "head -c {} /dev/zero | tr '\\0' x; echo {}; echo more"
    job = {
        "name": "cutsecret",
        "sandbox": {
            "kind": "swe",
            "repo": str(repo),
            "docker": {"step_timeout": 20, "output_cap": 4096, "env": ["MY_API_TOKEN"]},
        },
        "retries": 0,
        "tasks": [
            {
                "id": "cut",
                "instruction": "secret cut by the output cap",
                "actions": [
                    {"tool": "bash", "arguments": {"command": bash.format(4080, "$MY_API_TOKEN")}},
                    {"tool": "bash", "arguments": {"command": bash.format(4084, GHP)}},
                    {"tool": "bash", "arguments": {"command": "echo ok"}},
                ],
            }
        ],
    }
    [t] = run_job(JobSpec.from_dict(job), store.raw).trajectories
    first, second, third = (turn.observation for turn in t.turns)
    assert first.truncated and second.truncated and third.text == "ok\n"
    assert first.text == "x" * 4080 + "<secret:env_value>"
    assert second.text == "x" * 4084 + "<secret:github_token>"
    rows = [r for f in sorted(store.raw.rglob("*.parquet")) for r in pq.read_table(f).to_pylist()]
    journals = [p.read_text() for p in store.raw.rglob("*.journal.jsonl")]
    text = json.dumps(rows, default=str) + "".join(journals)
    assert rows and t.redactions >= 2
    for n in range(6, len(VALUE) + 1):
        assert VALUE[:n] not in text
    assert GHP[:8] not in text
