"""Redaction rules: every kind found, ordinary data kept, counts, config, env values."""

from __future__ import annotations

import base64
import hashlib
import json
import random
import uuid

import pyarrow as pa
import pytest
from worldtrace.schemas import Action, Observation, Trajectory, Turn, validate_dict
from worldtrace.schemas.arrow import to_batch
from worldtrace.schemas.parsing import ConfigError
from worldtrace.schemas.prefilter import bounded
from worldtrace.schemas.redact import (
    Redactor,
    env_secrets,
    find_secrets,
    redact_payload,
    redact_record,
    redact_trajectory,
)
from worldtrace.schemas.redact_rules import (
    SCREEN_CACHE,
    RedactConfig,
    RedactPattern,
    example_secrets,
)


def planted(seed: int = 7) -> dict[str, str]:
    return {k: v for k, (v, _) in example_secrets(seed).items()}


def in_context(kind: str, value: str) -> str:
    return dict(example_secrets(7).values())[value]


KINDS = {"github_pat": "github_token"}


@pytest.mark.parametrize("kind", list(planted()))
def test_every_kind_becomes_its_placeholder(kind):
    value = planted()[kind]
    text, n = Redactor().text(f"before\n{in_context(kind, value)}\nafter")
    assert n == 1 and value not in text
    assert f"<secret:{KINDS.get(kind, kind)}>" in text
    assert text.startswith("before\n") and text.endswith("\nafter")  # the shape stays


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("sk_live_" + "4eC39HqLyjWDarjtT1zdp7dc", "stripe_access_key"),
        ("SG." + "a" * 22 + "." + "b" * 43, "sendgrid_api_key"),
        ("glpat-" + "x1Y2z3W4v5U6t7S8r9Q0", "gitlab_token"),
    ],
)
def test_detect_secrets_plugins_find_their_kinds(text, kind):
    assert Redactor().text(f"key: {text}\n") == (f"key: <secret:{kind}>\n", 1)


def ordinary_data() -> list[str]:
    rng = random.Random(3)
    blob = bytes(rng.randrange(256) for _ in range(3000))
    return [
        "commit " + hashlib.sha1(b"x").hexdigest() + "\nAuthor: A <a@b.c>",
        hashlib.sha256(b"data").hexdigest() + "  data.bin",
        str(uuid.UUID(int=rng.getrandbits(128))),
        base64.encodebytes(blob).decode(),  # `base64` output, 76 columns
        base64.b64encode(json.dumps({"a": 1, "b": [1, 2]}).encode()).decode(),  # eyJ... alone
        "sha512: " + hashlib.sha512(b"x").hexdigest(),
        "docker pull debian@sha256:" + hashlib.sha256(b"img").hexdigest(),
        "http://127.0.0.1:8080/api/v1/items?id=3f2a9c1e8b7d6a5f",
        "ssh://git@github.com:22/org/repo.git and user@host:path",
        "password = os.environ['DB_PASSWORD']  # ${DB_PASSWORD}",
        "https://user:${PASSWORD}@host/ and https://user:****@host/",
        "Bearer authentication is described in RFC 6750",
    ]


@pytest.mark.parametrize("text", ordinary_data())
def test_ordinary_data_is_kept(text):
    assert Redactor().text(text) == (text, 0)


def test_json_fields_stay_valid_json():
    key = planted()["private_key"]
    args = json.dumps({"path": "/root/.ssh/id_rsa", "content": key})
    out, n = Redactor().text(args)
    assert n == 1 and json.loads(out)["content"] == "<secret:private_key>"


def _trajectory(secret: str) -> Trajectory:
    turns = [
        Turn(0, Action(kind="command", text=f"echo {secret}"), Observation(text=secret + "\n")),
        Turn(1, Action(kind="command", text="git log -1"), Observation(text="commit " + "a" * 40)),
    ]
    return Trajectory(domain="terminal", turns=turns, metadata={"note": secret}).with_id()


def test_trajectory_redacted_counted_and_reidentified():
    secret = planted()["github_token"]
    t = _trajectory(secret)
    r = redact_trajectory(t)
    assert secret not in r.to_json() and r.redactions == 3
    assert r.trajectory_id != t.trajectory_id and validate_dict(r.to_dict()) == []
    again = redact_trajectory(r)  # idempotent: the count is the placeholders held
    assert again.redactions == 3 and again.trajectory_id == r.trajectory_id
    clean = _trajectory("nothing here")
    assert redact_trajectory(clean).redactions == 0


def test_record_dict_in_arrow_shape():
    secret = planted()["aws_access_key"]
    d = _trajectory(secret).to_dict()
    d["metadata"] = sorted(d["metadata"].items())  # Arrow gives a map as pairs
    out = redact_record(d)
    assert out["redactions"] == 3 and secret not in json.dumps(out, default=str)
    assert out["metadata"] == [("note", "<secret:aws_access_key>")]
    assert sorted(k for _, k in find_secrets(d)) == ["aws_access_key"] * 3


def test_literal_gates_open_the_detectors_a_substring_test_would():
    """The literals that gate detectors are found in one Aho-Corasick pass; the detectors
    it opens must be those a substring test of each literal opens, on texts holding
    several, overlapping and case-folded ones (the default rules' 40 case-sensitive
    literals go through the automaton, their 6 folded ones through substring tests)."""
    red = Redactor(RedactConfig())
    assert red._lits.automaton is not None and red._folded.automaton is None

    def by_substring(text: str) -> list[int]:
        low = text.lower()
        return sorted(
            i
            for i, d in enumerate(red.detectors)
            if d.gates is None
            or any((g in low if d.fold else g in text) for g in d.gates if isinstance(g, str))
            or any(g.search(low) for g in d.gates if not isinstance(g, str))
        )

    literals = [g for d in red.detectors for g in d.gates or () if isinstance(g, str)]
    rng = random.Random(3)
    for _ in range(300):
        parts = [*rng.sample(literals, rng.randint(0, 4)), "x" * rng.randint(0, 5), " = "]
        rng.shuffle(parts)
        text = "".join(p.upper() if rng.random() < 0.2 else p for p in parts)
        assert red._active(text) == by_substring(text), text
    assert len({tuple(red._active(t)) for t in ["", "sk-ant-x", "AKIA x aws", "xox"]}) == 4


def test_config_from_yaml_adds_patterns_and_allows(tmp_path):
    f = tmp_path / "redact.yaml"
    f.write_text(
        "patterns:\n  - {kind: employee_id, regex: 'EMP-(\\d{6})', group: 1}\n"
        "allow: ['AKIAIOSFODNN7EXAMPLE']\n"
    )
    red = Redactor(RedactConfig.load(f))
    assert red.text("id EMP-123456 key AKIAIOSFODNN7EXAMPLE") == (
        "id EMP-<secret:employee_id> key AKIAIOSFODNN7EXAMPLE",
        1,
    )
    f.write_text("patterns:\n  - {kind: x, regex: 'a'}\nallowed: []\n")
    with pytest.raises(ConfigError, match=r"redact.yaml:3: allowed: unknown key"):
        RedactConfig.load(f)
    f.write_text("patterns:\n  - {kind: x, regex: '(unclosed'}\n")
    with pytest.raises(ConfigError, match="not a regular expression"):
        RedactConfig.load(f)


def test_env_values_of_any_sandbox_config(tmp_path, monkeypatch):
    from worldtrace.sandboxes.docker import DockerConfig
    from worldtrace.sandboxes.terminal import TerminalConfig

    monkeypatch.setenv("WT_SECRET_ONE", "correct-horse-battery")
    monkeypatch.setenv("LANG", "en_US.UTF-8")
    envf = tmp_path / "secrets.env"
    envf.write_text("# comment\nDB_PASS=s3cr3t-value-42\nSHORT=1\n")
    cfg = TerminalConfig(
        docker=DockerConfig(env=("WT_SECRET_ONE", "LANG", "UNSET_ONE"), env_file=str(envf))
    )

    class Sandbox:  # any kind: found through `.config`
        config = cfg

    assert env_secrets(Sandbox()) == ["correct-horse-battery", "s3cr3t-value-42"]

    class OtherKind:  # another kind's `env` mapping (an MCP server's, say)
        env = {"API_TOKEN": "tok-abcdef-123", "DEBUG": "1"}

    assert env_secrets(OtherKind()) == ["tok-abcdef-123"]
    payload = {"text": "DB_PASS=s3cr3t-value-42 WT=correct-horse-battery LANG=en_US.UTF-8"}
    assert redact_payload(payload, Sandbox())["text"] == (
        "DB_PASS=<secret:env_value> WT=<secret:env_value> LANG=en_US.UTF-8"
    )
    broken = TerminalConfig(docker=DockerConfig(env_file=str(tmp_path / "missing.env")))
    assert env_secrets(broken) == []  # the sandbox cannot have received them either


def test_disabled_config_redacts_nothing():
    value = planted()["github_token"]
    assert Redactor(RedactConfig(enabled=False), [value]).text(value) == (value, 0)


def _placed(text: str, place: int) -> Trajectory:
    """A trajectory holding `text` in one of its strings: an observation, an action, the
    task, a metadata value, inside a list (the second turn)."""
    obs, act, meta, task = "ok", "ls", {"k": "v"}, None
    if place == 0:
        obs = f"out\n{text}\n"
    elif place == 1:
        act = f"echo '{text}'"
    elif place == 2:
        meta = {"k": "v", "note": text}
    else:
        task = text
    turns = [
        Turn(0, Action(kind="command", text="pwd"), Observation(text="/")),
        Turn(1, Action(kind="command", text=act), Observation(text=obs)),
    ]
    t = Trajectory(domain="terminal", turns=turns, metadata=meta)
    t.task.instruction = task
    return t.with_id()


def test_the_batch_screen_passes_only_rows_the_full_path_leaves_as_they_are():
    """A record the screen passes skips redaction in `process`: every kind, in every kind
    of place, is flagged, and so is a placeholder; ordinary data (SHAs, UUIDs, base64,
    URLs, text beyond ASCII, the separators Python's `\\s` matches) passes, and the full
    path finds nothing in it, unless a detector matches it before the allow-list
    (`user:${PASSWORD}@`), which is the full path's to apply."""
    red = Redactor()
    assert red.screen is not None  # hyperscan is installed here: the screen is real
    flagged = [line for _, line in example_secrets(11).values()]
    flagged += ["sk_live_" + "4eC39HqLyjWDarjtT1zdp7dc", "glpat-" + "x1Y2z3W4v5U6t7S8r9Q0"]
    flagged += ["already <secret:github_token> here"]
    passed = [*ordinary_data(), "naïve café", "a\x1cb", "• Größe — 中文 😀"]
    allowed = [any(d.regex.search(text) for d in red.detectors) for text in passed]
    assert sum(allowed) == 1
    # each set in a batch of its own: the screen reads a column's strings back to back, so
    # a hit at the end of one string may also flag the next row (a row more through the
    # full path, which finds nothing: never a row less)
    for texts, expect in ((flagged, [True] * len(flagged)), (passed, allowed)):
        rows = [_placed(text, i % 4) for i, text in enumerate(texts)]
        batch = to_batch(rows)
        assert red.screen.rows(batch).tolist() == expect
        assert red.screen.rows(batch.slice(3)).tolist() == expect[3:]  # offsets into buffers
    for t in rows:
        d = t.to_dict()
        assert red.record(d) == {**d, "redactions": 0}


def test_a_string_is_screened_as_it_stands_alone_whatever_its_neighbours_in_the_column():
    """Found: the screen scanned a column's strings back to back, so a string's start
    and end were read in its neighbours' context: `Bearer <token>` at the start of an
    observation that followed one ending in a letter (`...done`) was not flagged (`\\b`
    saw no word boundary), and `process` left the token in. Anchored user rules (`^`,
    `\\A`, `$`, `\\Z`) missed every string but the column's first the same way."""
    token = "Bearer " + example_secrets(3)["bearer_token"][0]
    red = Redactor()
    assert red.text(token)[1] == 1  # alone, the full path finds it
    column = ["done", token, "ls", "z"]
    batch = pa.RecordBatch.from_pylist([{"obs": t, "turns": [t, "x"]} for t in column])
    assert red.screen.rows(batch).tolist()[:2] == [False, True]  # and maybe the next
    lists = pa.RecordBatch.from_pylist([{"turns": ["ok", "done"]}, {"turns": [token]}])
    assert red.screen.rows(lists).tolist() == [False, True]
    for rule in (r"^EMP-\d{6}$", r"\AEMP-\d{6}\Z", r"\bEMP-\d{6}\b"):
        anchored = Redactor(RedactConfig(patterns=(RedactPattern("emp", rule),)))
        assert anchored.text("EMP-123456")[1] == 1 and anchored.screen is not None
        batch = pa.RecordBatch.from_pylist([{"t": v} for v in ("x1", "EMP-123456", "EMP-1")])
        assert anchored.screen.rows(batch).tolist() == [False, True, False], rule


def test_the_screen_flags_every_string_the_full_path_redacts_among_random_neighbours():
    """The screen's promise, checked on random columns: secrets of every kind, whole and
    cut, with word and non-word characters around them and on their neighbours' ends."""
    rng = random.Random(11)
    red = Redactor()
    values = [v for v, _ in example_secrets(9).values()]
    values += [line for _, line in example_secrets(10).values()]
    bits = ["", "x", "a1", " ", "\n", "=", ":", "'", '"', "_", "-", "/", ".", "Bearer ",
            "token=", "AKIA", "sk-", "ghp_", "://u:", "@h", "-----BEGIN RSA PRIVATE KEY-----"]  # fmt: skip

    def noise() -> str:
        return "".join(rng.choice(bits) for _ in range(rng.randint(0, 3)))

    texts = []
    for _ in range(3000):
        value = rng.choice(values)
        cut = value[rng.randint(0, 3) : len(value) - rng.randint(0, 3)]
        texts.append(noise() + rng.choice(["", value, cut]) + noise())
    batch = pa.RecordBatch.from_pylist([{"s": t, "l": [noise(), t]} for t in texts])
    flags = red.screen.rows(batch).tolist()
    missed = [t for t, f in zip(texts, flags, strict=True) if red.text(t)[1] and not f]
    assert missed == []
    assert 0.2 < sum(flags) / len(flags) < 1.0  # real secrets flagged, noise not always


@pytest.mark.filterwarnings("ignore:Possible nested set")  # Python's reading of `[[:`
def test_the_screen_reads_python_patterns_as_python_does():
    """Hyperscan reads PCRE: Python's `{,n}` is a repeat to it only once written `{0,n}`,
    a verbose pattern keeps its comments, long repeats are widened (the superset it
    screens with), a class is left as it is; a POSIX class, which Python reads as
    characters, turns the screen off (every record redacted whole)."""
    assert bounded(r"a{,3}[{1,100}]x{0,20000}?\\{,5}\{1,200}") == (
        r"a{0,3}[{1,100}]x{0,}?\\{0,5}\{1,200}"
    )
    assert bounded("a{,3} # b{,3} [\n c", verbose=True) == "a{0,3} # b{,3} [\n c"
    # a match's surroundings are not read (a column is scanned back to back); in a class
    # `\b` is a backspace and `^`, `$` are members (or the negation)
    assert bounded(r"^\Ak\b[\b^$][^a]\B\$x\Z$") == r"k[\b^$][^a]\$x"
    config = RedactConfig(patterns=(RedactPattern("emp", r"EMP-\d{,6}Z"),))
    screen = Redactor(config).screen
    assert screen is not None and screen.text("id EMP-123Z") and not screen.text("id EMP-")
    kelvin = Redactor(RedactConfig(patterns=(RedactPattern("k", "(?i)tok-\u212a\\d{4}"),)))
    assert kelvin.text("tok-k1234")[1] == 1  # Python folds the Kelvin sign to `k`
    caseless = ("(?i)tok-\u212a", "t(?i:ok-\u212a)")  # `\u212a`: a character here
    for foreign in (r"id-[[:digit:]]+", r"id-\N{DIGIT ONE}", r"id-\u0031", *caseless):
        assert Redactor(RedactConfig(patterns=(RedactPattern("p", foreign),))).screen is None
    exact = Redactor(RedactConfig(patterns=(RedactPattern("k", "tok-é\\d{4}"),)))
    assert exact.screen is not None  # matched as written: its bytes
    assert exact.screen.text("tok-é1234") and not exact.screen.text("tok-e1234")
    pair = Redactor(RedactConfig(patterns=(RedactPattern("kv", r"tok[:=](\w{8})", 1),))).screen
    assert pair is not None and pair.text("tok:abcdefgh") and not pair.text("tok abcdefgh")


def test_a_compiled_screen_is_kept_in_the_cache_and_a_damaged_one_replaced(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    config = RedactConfig(patterns=(RedactPattern("emp", r"EMP-\d{6}"),))
    assert Redactor(config).screen.text("EMP-123456")
    [kept] = (tmp_path / SCREEN_CACHE).iterdir()
    written = kept.stat().st_mtime_ns
    loaded = Redactor(config).screen  # loaded, not compiled and written again
    assert kept.stat().st_mtime_ns == written
    assert loaded.text("id EMP-123456") and not loaded.text("id EMP-12")
    kept.write_bytes(b"not a database")
    again = Redactor(config).screen
    assert again.text("id EMP-123456") and not again.text("id EMP-12")
    assert kept.read_bytes() != b"not a database"
