"""Leaks an audit found (2026-12-02), each through the code path that let it through:
values split by terminal escape codes, a web sandbox's storage state, token-shaped keys
matched only in part, the policy's own API key, MCP `set_env` values. Real redactor, real
Recorder journals and Parquet shards; the sandboxes are recorded stand-ins here (the real
ones: tests/sandboxes/test_redact_sandboxes.py)."""

from __future__ import annotations

import json
import random
import string
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from worldtrace.collectors.recorder import Recorder, publish
from worldtrace.schemas import (
    Action,
    Agent,
    Observation,
    Outcome,
    ShardWriter,
    Source,
    Trajectory,
    Turn,
)
from worldtrace.schemas.arrow import to_batch
from worldtrace.schemas.redact import Redactor, env_secrets, redact_record, redactor
from worldtrace.schemas.redact_rules import example_secrets

from worldtrace.leaks import Checker

PLAIN = "plaintokenvalue9876"
GHP = "ghp_" + "Zq7" * 12  # a GitHub token: 36 after the prefix


# -- shared helpers ---------------------------------------------------------------------
class Recorded:
    """A sandbox of some kind with a real config, answering with recorded observations."""

    def __init__(self, config: Any, observations: list[Observation], domain: str = "terminal"):
        self.config = config
        self.domain = domain
        self.kind = domain
        self._obs = list(observations)
        self.initial = "ready"

    def reset(self, task) -> Observation:
        return Observation(self.initial)

    def step(self, action: Action) -> Observation:
        return self._obs.pop(0)

    def describe(self) -> dict[str, Any]:
        return {"backend": "recorded", "initial_state": self.initial}

    def close(self) -> None:
        pass


def record(tmp_path: Path, sandbox, actions: list[Action], error: str | None = None, **kw):
    """One episode through the Recorder, published as Parquet: (trajectory, every string
    of the shard as read back)."""
    rec = Recorder(
        sandbox,
        tmp_path / "journals",
        source=Source(kind="collector", name="t", job_id="j", episode_id="e0", attempt=1),
        agent=Agent(name="scripted"),
        task_id="t",
        instruction="look",
        **kw,
    )
    rec.header(sandbox.reset(None))
    for a in actions:
        rec.step(a)
    outcome = Outcome(status="error", error=error) if error else Outcome(status="success")
    rec.finish(outcome)
    dest = tmp_path / "raw" / "e0-a1.parquet"
    dest.parent.mkdir(parents=True, exist_ok=True)
    t = publish(rec.path, dest)
    return t, json.dumps(pq.read_table(dest).to_pylist(), default=str)


def terminal_state(raw: bytes) -> str:
    """`state_json` as `TerminalSandbox.step` stores a step's raw byte stream."""
    state = {"prompt_returned": True, "waited_s": 1.0}
    state["raw"] = raw.decode("utf-8", errors="backslashreplace")
    return json.dumps(state)


# -- 3. escape sequences splitting a value ----------------------------------------------
GREP_RAW = (  # `env | grep --color=always value` on the debian image (audit, recorded)
    b"env | grep --color=always value\r\n\x1b[?2004l\rMY_PLAIN_TOKEN=plaintoken"
    b"\x1b[01;31m\x1b[Kvalue\x1b[m\x1b[K9876\r\n\x1b[?2004huser@sandbox:~$ "
)


def test_an_env_value_split_by_colour_codes_in_the_raw_stream_reaches_no_shard(
    tmp_path, monkeypatch
):
    from worldtrace.sandboxes.docker import DockerConfig
    from worldtrace.sandboxes.terminal import TerminalConfig

    monkeypatch.setenv("MY_PLAIN_TOKEN", PLAIN)
    config = TerminalConfig(docker=DockerConfig(env=("MY_PLAIN_TOKEN",)))
    screen_text = "env | grep --color=always value\nMY_PLAIN_TOKEN=plaintokenvalue9876\n"
    obs = Observation(screen_text, state_json=terminal_state(GREP_RAW))
    t, shard = record(tmp_path, Recorded(config, [obs]), [Action(kind="keystrokes", text="x")])
    assert PLAIN not in shard and "value\\\\u001b[m\\\\u001b[K9876" not in shard
    state = json.loads(t.turns[0].observation.state_json)  # still JSON, the rest as it was
    assert state["raw"].startswith("env | grep --color=always value\r\n\x1b[?2004l\r")
    assert "MY_PLAIN_TOKEN=<secret:env_value>\r\n" in state["raw"]
    assert t.turns[0].observation.text.endswith("MY_PLAIN_TOKEN=<secret:env_value>\n")


SPLIT = [  # a GitHub token cut by escape sequences, as a raw stream holds it
    GHP[:9] + "\x1b[01;31m\x1b[K" + GHP[9:20] + "\x1b[m\x1b[K" + GHP[20:],  # grep --color
    GHP[:5] + "\x1b[1m" + GHP[5:] + "\x1b[0m",  # bold
    GHP[:12] + "\x1b]0;title\x07" + GHP[12:],  # OSC (window title), BEL
    GHP[:12] + "\x1b]8;;http://x/\x1b\\" + GHP[12:],  # OSC 8 hyperlink, ST
    GHP[:3] + "\x1b(B" + GHP[3:],  # charset
]


@pytest.mark.parametrize("raw", SPLIT)
def test_a_secret_split_by_escape_sequences_is_found_in_raw_and_json_text(raw):
    red = Redactor()
    for text in (f"$ cat t\r\n{raw}\r\n$ ", terminal_state(f"$ cat t\r\n{raw}\r\n$ ".encode())):
        out, n = red.text(text)
        assert n == 1 and "<secret:github_token>" in out, text
        assert GHP[20:] not in out and GHP[:9] not in out
        assert out.endswith('\\r\\n$ "}' if text.startswith("{") else "\r\n$ ")
    state = json.loads(red.text(terminal_state(raw.encode()))[0])  # still JSON
    assert state["raw"].startswith("<secret:github_token>") and GHP[-6:] not in state["raw"]


NEED_CONTEXT = {"aws_secret_key", "aws_session_token", "bearer_token", "url_password"}
"""Kinds found only with what precedes them (`AWS_SECRET_ACCESS_KEY=`,
`AWS_SESSION_TOKEN=`, `Bearer `, `://u:`)."""


@pytest.mark.parametrize("kind", [k for k in example_secrets(3) if k not in NEED_CONTEXT])
def test_a_key_at_a_line_start_of_a_raw_stream_kept_as_json_is_redacted(kind):
    """Found with the above: in `state_json` every line of the raw stream starts after
    `\\r\\n`, whose `n` read as a key character before the key (`sk-ant-`, `sk-proj-`,
    `AIza`, ... matched only when not preceded by one): the raw copy kept the key."""
    value = example_secrets(3)[kind][0]
    for raw in (f"$ cat key\r\n{value}\r\n$ ", f"$ cat key\r\n\x1b[1m{value}\x1b[0m\r\n$ "):
        out, n = Redactor().text(terminal_state(raw.encode()))
        assert n == 1 and value[:12] not in out and value[-8:] not in out, out
        assert json.loads(out)["raw"].startswith("$ cat key\r\n")


def test_escape_sequences_without_a_secret_change_nothing():
    ls = "\x1b[0m\x1b[01;34mdir\x1b[0m  \x1b[01;32mrun.sh\x1b[0m  notes.txt\r\n"
    red = Redactor()
    for text in (ls, terminal_state(ls.encode()), "\x1b[31mred\x1b[0m", "a\x1bb", "\x1b"):
        assert red.text(text) == (text, 0)
    rows = [_traj(terminal_state(ls.encode()))]
    assert not red.screen.rows(to_batch(rows)).any()


def _traj(state_json: str, text: str = "ok") -> Trajectory:
    turn = Turn(
        0, Action(kind="keystrokes", text="cat t\n"), Observation(text, state_json=state_json)
    )
    return Trajectory(domain="terminal", turns=[turn]).with_id()


def test_process_check_and_screen_see_through_escape_sequences(tmp_path):
    """Raw data recorded before: `process` (screen, then `redact_record`) redacts the split
    secret, and `redact --check` (`find_secrets` through the Checker) reports it."""
    raw = SPLIT[0]
    leaky = [_traj(terminal_state(f"$ cat t\r\n{raw}\r\n".encode())), _traj(None, raw)]
    clean = _traj(terminal_state(b"\x1b[01;34mdir\x1b[0m\r\n"))
    with ShardWriter(tmp_path / "raw") as w:  # written directly: no boundary redacted it
        w.write([*leaky, clean])
    [path] = w.paths
    found = [(f.field, f.kind) for f in Checker(Redactor()).check(path)]
    assert found == [
        ("turns[0].observation.state_json", "github_token"),
        ("turns[0].observation.text", "github_token"),
    ]
    batch = pq.read_table(path).to_batches()[0]
    assert redactor().screen.rows(batch).tolist() == [True, True, False]
    for d in batch.to_pylist()[:2]:
        out = redact_record(d)
        assert out["redactions"] == 1 and GHP[20:] not in json.dumps(out, default=str)
    # the strings `process` rewrites are screened again one by one (`Screen.text`)
    assert redactor().screen.text(raw) and redactor().screen.text(terminal_state(raw.encode()))
    assert not redactor().screen.text(terminal_state(b"\x1b[01;34mdir\x1b[0m\r\n"))


SEQUENCES = ["\x1b[01;31m\x1b[K", "\x1b[m", "\x1b[1m", "\x1b[?2004h", "\x1b]0;t\x07", "\x1b(B"]


def test_the_screen_flags_every_secret_the_full_path_finds_through_escape_sequences():
    """Secrets of every kind cut by random sequences at random places, as raw text and as
    a raw stream in JSON, among neighbours with and without sequences: every row whose
    strings the full path redacts is flagged, and the full path leaves no piece of 8."""
    rng = random.Random(5)
    red = Redactor()
    lines = [line for _, line in example_secrets(21).values()]

    def cut(text: str) -> str:  # between the text's own characters
        for at in sorted(rng.sample(range(len(text) + 1), rng.randint(1, 3)), reverse=True):
            text = text[:at] + rng.choice(SEQUENCES) + text[at:]
        return text

    texts, values = [], []
    for _ in range(400):
        value, line = rng.choice(list(example_secrets(rng.randrange(50)).values()))
        text = cut(line) if rng.random() < 0.8 else rng.choice(lines)
        if rng.random() < 0.5:
            text = terminal_state(f"$ x\r\n{text}\r\n".encode())
        texts.append(text)
        values.append(value)
    noise = [cut("ls --color\r\n dir  run.sh") for _ in range(400)]
    column = [t for pair in zip(texts, noise, strict=True) for t in pair]
    batch = pa.RecordBatch.from_pylist(
        [{"s": t, "l": [n, t]} for t, n in zip(column, reversed(column), strict=True)]
    )
    flags = red.screen.rows(batch).tolist()
    assert [t for t, f in zip(column, flags, strict=True) if red.text(t)[1] and not f] == []
    for text, value in zip(texts, values, strict=True):
        out = red.text(text)[0]
        pieces = {value[i : i + 8] for i in range(len(value) - 8)}
        assert not [p for p in pieces if p in out and p.isalnum()], (text, out)


# -- 4. a web sandbox's storage state -----------------------------------------------------
STATE = {  # the audit's storage-state file, as Playwright writes one
    "cookies": [
        {"name": "session", "value": "plainsessioncookie4242abc", "domain": "127.0.0.1",
         "path": "/", "expires": -1, "httpOnly": False, "secure": False, "sameSite": "Lax"},
        {"name": "lang", "value": "en", "domain": "127.0.0.1", "path": "/"},
    ],
    "origins": [{"origin": "http://127.0.0.1:8000",
                 "localStorage": [{"name": "apitoken", "value": "plainlocalstoragetoken777"}]}],
}  # fmt: skip


def test_storage_state_cookies_and_local_storage_are_redacted(tmp_path):
    from worldtrace.sandboxes.web import WebConfig
    from worldtrace.schemas.parsing import ConfigError, parse

    f = tmp_path / "state.json"
    f.write_text(json.dumps(STATE))
    config = parse(WebConfig, {"start_url": "http://127.0.0.1:8000/", "storage_state": str(f)})
    assert env_secrets(config) == ["plainlocalstoragetoken777", "plainsessioncookie4242abc"]
    page = "document.cookie: session=plainsessioncookie4242abc; lang=en\napitoken: "
    obs = Observation(page + "plainlocalstoragetoken777", state_json=json.dumps({"url": "x"}))
    sb = Recorded(config, [obs], domain="web")
    sb.initial = page
    t, shard = record(tmp_path, sb, [Action(kind="tool_call", name="noop", arguments_json="{}")])
    assert "plainsessioncookie4242abc" not in shard and "plainlocalstoragetoken777" not in shard
    assert "lang=en" in t.turns[0].observation.text  # shorter than env_min_chars: kept
    assert t.system.initial_state.startswith("document.cookie: session=<secret:env_value>;")
    assert t.turns[0].observation.text.endswith("apitoken: <secret:env_value>")
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(ConfigError, match=r"bad\.json is not a Playwright storage-state file"):
        parse(WebConfig, {"start_url": "http://x/", "storage_state": str(tmp_path / "bad.json")})
    # refused with the job file (since 12-04): nothing is handed over


# -- 5. token-shaped keys matched in part ---------------------------------------------------
B62 = string.ascii_letters + string.digits


def _b62(n: int, offset: int = 0) -> str:
    return "".join(B62[(i * 7 + offset) % 62] for i in range(n))


@pytest.mark.parametrize(
    ("key", "kind"),
    [
        ("sk_live_51H" + _b62(96), "stripe_access_key"),  # today's length: 99 after live_
        ("sk_live_" + _b62(24), "stripe_access_key"),
        ("sk_test_51H" + _b62(96, 3), "stripe_access_key"),
        ("rk_test_" + _b62(24, 5), "stripe_access_key"),
        ("rk_live_" + _b62(40, 9), "stripe_access_key"),
        ("npm_" + _b62(36, 1), "npm_token"),
        ("hf_" + "".join(c for c in _b62(60, 2) if c.isalpha())[:34], "huggingface_token"),
        ("dop_v1_" + "0123456789abcdef" * 4, "digitalocean_token"),
        ("doo_v1_" + "fedcba9876543210" * 4, "digitalocean_token"),
        ("glpat-" + _b62(26, 4), "gitlab_token"),  # detect-secrets matches 20 of them
        ("SK" + "0123456789abcdef" * 3, "twilio_api_key"),  # and 32 of these
    ],
)
def test_a_token_is_redacted_to_its_end(key, kind):
    for line in (f"STRIPE_KEY={key}\n", f'{{"key": "{key}"}}', f"use {key}, then"):
        out, n = Redactor().text(line)
        assert n == 1 and key not in out and f"<secret:{kind}>" in out, out
        assert out == line.replace(key, f"<secret:{kind}>"), out  # nothing of it left


def test_the_audits_stripe_key_leaves_nothing_behind():
    key = "sk_live_51Habcdefghijklmnopqrstuvwxyz0123456789ABCDEFGH"
    assert Redactor().text(f"STRIPE_KEY={key}\n") == ("STRIPE_KEY=<secret:stripe_access_key>\n", 1)
    # detect-secrets' AWS rule takes 20 of a longer run: the run goes whole
    run = "AKIA" + "ABCDEFGHIJKLMNOP" + "QRSTUV"
    assert Redactor(detect_only()).text(f"id={run} x") == ("id=<secret:aws_access_key> x", 1)


def detect_only():
    from worldtrace.schemas.redact_rules import RedactConfig

    return RedactConfig(builtin=False)


ORDINARY = [
    "from huggingface_hub import hf_hub_download; hf_hub_download(repo_id='gpt2')",
    "hf_transfer_enabled_for_every_download_here and HF_HOME=/root/.cache/hf",
    "npm_config_cache=/tmp/npm npm_lifecycle_event=test npm_package_json=/app/package.json",
    "def sk_test_fixture(): pass  # sk_test_creates_a_customer_and_charges_it_twice",
    "task_test_results_for_everything_in_this_repository rk_live_ok",
    "pk_live_" + _b62(24) + " is a publishable key, meant for the browser",
    "dop_v1_ is DigitalOcean's prefix; dop_v1_abc is too short",
    "sk_test_" + "*" * 24 + " or sk_test_${STRIPE_TEST_KEY}",  # placeholders people write
    "./configure --enable-npm_and_hf_features_for_all_of_the_builds_1234567890abc",
]


@pytest.mark.parametrize("text", ORDINARY)
def test_ordinary_text_near_the_new_prefixes_is_kept(text):
    assert Redactor().text(text) == (text, 0)


def test_an_env_literal_is_not_extended_into_the_text_after_it():
    red = Redactor(literals=["abcdef123"])
    assert red.text("x=abcdef1234567") == ("x=<secret:env_value>4567", 1)


# -- 6. the policy's own key --------------------------------------------------------------
def test_the_policys_api_key_never_reaches_the_outcome(tmp_path, monkeypatch):
    from worldtrace.collectors.policies import OpenAIChatPolicy

    key = "gatewaykeyplainvalue8899"
    monkeypatch.setenv("MY_LLM_KEY", key)
    policy = OpenAIChatPolicy(base_url="http://127.0.0.1:9/v1", model="m", api_key_env="MY_LLM_KEY")
    assert env_secrets(policy) == [key]
    error = (
        f"""RuntimeError: chat completions HTTP 401: b'{{"message": "Invalid API key: {key}"}}'"""
    )
    sb = Recorded(object(), [])
    t, shard = record(tmp_path, sb, [], error=error, secrets_from=policy)
    assert key not in shard and t.outcome.error.endswith("Invalid API key: <secret:env_value>\"}'")


def test_an_http_error_body_echoing_the_key_is_redacted_where_it_is_raised(monkeypatch):
    import io
    import urllib.error

    from worldtrace.collectors import policies

    key = "gatewaykeyplainvalue8899"
    monkeypatch.setenv("MY_LLM_KEY", key)
    body = json.dumps({"error": {"message": f"Invalid API key: {key}"}}).encode()

    def refuse(req, timeout):
        raise urllib.error.HTTPError(req.full_url, 401, "Unauthorized", {}, io.BytesIO(body))

    monkeypatch.setattr(policies.urllib.request, "urlopen", refuse)
    p = policies.OpenAIChatPolicy(
        base_url="http://127.0.0.1:9/v1", model="m", api_key_env="MY_LLM_KEY"
    )
    with pytest.raises(RuntimeError) as err:
        p.complete({})
    assert key not in str(err.value) and "HTTP 401" in str(err.value)
    assert "Invalid API key: <secret:env_value>" in str(err.value)


# -- 7. MCP set_env --------------------------------------------------------------------------
def test_mcp_set_env_values_are_env_values(tmp_path, monkeypatch):
    from worldtrace.sandboxes.mcp import MCPConfig
    from worldtrace.schemas.parsing import parse

    monkeypatch.setenv("MCP_PASSED_SECRET", "passedsecretvalue555")
    config = parse(
        MCPConfig,
        {
            "command": ["{python}", "srv.py"],
            "env": ["MCP_PASSED_SECRET"],
            "set_env": {
                "SET_ENV_SECRET": "setenvsecretvalue777",
                "SHORT": "1",
                "HOME": "/home/someone",  # env_keep
                "GIT_AUTHOR_NAME": "worldtrace",  # identities and paths a tool prints
                "GIT_CONFIG_GLOBAL": "/dev/null",
                "GZIP_ALLOWED_DOMAINS": "127.0.0.1,localhost",  # env_keep's `*_DOMAINS`
                "API_HOST": "127.0.0.1",
            },
        },
    )
    assert env_secrets(config) == ["passedsecretvalue555", "setenvsecretvalue777"]
    shown = "SET_ENV_SECRET=setenvsecretvalue777\nGIT_AUTHOR_NAME=worldtrace\nHOME=/home/someone"
    obs = Observation(shown, state_json=json.dumps({"content": [{"text": shown}]}))
    t, shard = record(tmp_path, Recorded(config, [obs], domain="mcp"), [Action(kind="tool_call", name="show_env", arguments_json="{}")])  # fmt: skip
    assert "setenvsecretvalue777" not in shard
    assert t.turns[0].observation.text == shown.replace(
        "setenvsecretvalue777", "<secret:env_value>"
    )


def test_helpers_read_what_they_wrote(tmp_path):
    """The stand-in path is the collector's: a clean episode is published as it was."""
    obs = Observation("hello", state_json=terminal_state(b"hello\r\n"))
    t, shard = record(tmp_path, Recorded(object(), [obs]), [Action(kind="keystrokes", text="x")])
    assert t.redactions == 0 and "hello" in shard
    assert pa.Table.from_batches([to_batch([t])]).num_rows == 1


STS_SECRET = "Qm9vZ3VzU2VjcmV0S2V5Rm9yVGVzdGluZ09ubHkx"  # 40 characters
STS_TOKEN = "IQoJb3JpZ2luX2VjEJr//////////wEaCXVzLWVhc3QtMSJHMEUCIQD" + _b62(300, 6) + "=="


@pytest.mark.parametrize(
    "text",
    [
        # `aws sts assume-role`, `aws configure export-credentials`, IMDS and the CLI's cache
        f'{{"Credentials": {{"AccessKeyId": "ASIAABCDEFGHIJKLMNOP", "SecretAccessKey": '
        f'"{STS_SECRET}", "SessionToken": "{STS_TOKEN}", "Expiration": "2026-12-03T12:00:00Z"}}}}',
        f'  "SecretAccessKey" : "{STS_SECRET}",\n  "Token" : "{STS_TOKEN}",\n',
        f"secret_access_key = {STS_SECRET}\naws_session_token = {STS_TOKEN}\n",
        f"export AWS_SECRET_ACCESS_KEY={STS_SECRET} AWS_SESSION_TOKEN={STS_TOKEN}",
    ],
)
def test_aws_credentials_in_the_cli_and_sts_shapes_are_redacted(text):
    """Found: `"SecretAccessKey": "..."` and `"SessionToken": "..."` (what `aws sts
    assume-role` and the metadata endpoints print) were kept: the rule wanted `aws` in
    the key's name before `secret`, and no rule knew session tokens."""
    out, _ = Redactor().text(text)
    assert STS_SECRET not in out and STS_TOKEN[:40] not in out, out
    assert "<secret:aws_secret_key>" in out and "<secret:aws_session_token>" in out, out


def test_a_url_password_holding_an_at_sign_goes_whole():
    """Found: `mysql://root:p@ssw0rdLong99@db...` kept `@ssw0rdLong99`: the rule's
    password stopped at its first `@`; the host starts after the last one."""
    out, n = Redactor().text("mysql -h x --url mysql://root:p@ssw0rdLong99@db.internal:3306/x")
    assert out == "mysql -h x --url mysql://root:<secret:url_password>@db.internal:3306/x"
    assert n == 1
    # a path or a second URL after it is not taken into the password
    text = "git clone https://alice:s3cretpw@git.example.com/r@v1.git and ssh://b@h"
    out, _ = Redactor().text(text)
    assert out == text.replace("s3cretpw", "<secret:url_password>"), out


def test_aws_credentials_inside_a_json_string_are_redacted():
    """Found with the above: the same shapes as a tool call's JSON argument (its quotes
    escaped) were kept."""
    for text in (
        f'"SecretAccessKey": "{STS_SECRET}", "SessionToken": "{STS_TOKEN}"',
        f'{{"Token" : "{STS_TOKEN}"}}',
    ):
        out, _ = Redactor().text(json.dumps({"cmd": text}))
        assert STS_SECRET not in out and STS_TOKEN[:40] not in out, out
