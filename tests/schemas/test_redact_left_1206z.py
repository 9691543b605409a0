"""What the 2026-12-06 hunt "y" left (z), each through the path that let it through, with
real Redactors, the real batch screen, a real docker sandbox and real Chromium:

1. a credential option's value of no known shape was kept (`--password hunterlong`,
   `--api-key abcdefghij`, `--client-secret abcdefghijk`): a value after a name had to
   hold a digit or a symbol; the options of `redact_rules.CREDENTIAL_OPTIONS` now name
   their value a secret whatever its shape;
2. a credential option in a YAML flow sequence (`args: [--token, V]`), a block sequence
   (`- --token` then `- V`) or pretty-printed JSON (one item a line) kept its value;
3. a web tree's named element (a link, a cell, a button) whose key is split in its page
   lost the key from its name, but the piece the tree shows below it (a `<span>`'s)
   kept part of it (`redact._shown_pieces`).
"""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest
from worldtrace.collectors.jobs import JobSpec, run_job
from worldtrace.schemas.redact import Redactor, find_secrets

from ..conftest import serving_pages
from .test_redact_review_1203c import assert_pass1_redacts_as_whole
from .test_redact_review_1203d import assert_screen_flags

V = "Xq9vLm2pRt9sKw4zB7"


def redacted(text: str) -> str:
    return Redactor().text(text)[0]


# -- 1. a credential option's value, whatever its shape -------------------------------
BARE = [
    ("mytool --password hunterlong", "mytool --password <secret:password>"),
    ("mytool --passwd hunterlong -v", "mytool --passwd <secret:password> -v"),
    ("pg-tool --db-password correcthorse --db app", "pg-tool --db-password <secret:password> --db app"),
    ("mytool --api-key abcdefghij", "mytool --api-key <secret:api_key>"),
    ("mytool --api-key=abcdefghij", "mytool --api-key=<secret:api_key>"),
    ("mytool --apikey abcdefghij", "mytool --apikey <secret:api_key>"),
    ("mytool --client-secret abcdefghijk", "mytool --client-secret <secret:secret_key>"),
    ("mytool --secret-key mysecretvalue", "mytool --secret-key <secret:secret_key>"),
    ("mytool --token abcsecretvalue", "mytool --token <secret:token>"),
    ("mytool --auth-token abcsecretvalue", "mytool --auth-token <secret:token>"),
    ('mytool --password "hunterlong"', 'mytool --password "<secret:password>"'),
    ("started: mytool --bot-token qwertyuiop on :8080", "started: mytool --bot-token <secret:token> on :8080"),
    ('["srv", "--token", "abcsecretvalue"]', '["srv", "--token", "<secret:token>"]'),
]  # fmt: skip


@pytest.mark.parametrize(("text", "out"), BARE)
def test_a_credential_option_names_its_value_a_secret_whatever_its_shape(text, out):
    """The hunt's repro, in a command and in a tool's output (the same text), and in a
    JSON string (`arguments_json`, a raw stream in `state_json`)."""
    assert redacted(text) == out
    assert "<secret:" in redacted(json.dumps({"command": text}))


BARE_KEPT = [
    "mytool --password-file /run/secrets/pw",
    "mytool --password-file passwordfile",
    "mytool --token-limit 5",
    "mytool --secret-name foobarbaz",
    "mytool --no-password mydatabase",
    "train.py --eos-token endoftext --pad-token padtoken",
    "gcloud list --page-token nextpagecursor",
    "db --sort-key createdat",
    "usage: mytool [-h] [--password PASSWORD] [--api-key API_KEY]",
    "  --token TEXT        The token to use.",
    "  -p, --password string   Password",
    "Use --password instead of -p, or the --token argument.",
    "options --password, username and host are required",
    "mytool --api-key <your-key>",
    "mytool --token $API_TOKEN",
    '["server", "--token", "--verbose"]',
    '["ssh-tool", "--private-key", "id_rsa.pem"]',
    "docker buildx build --secret id=mytoken,src=/run/x .",
    "mytool --token short",
]


@pytest.mark.parametrize("text", BARE_KEPT)
def test_options_that_name_no_credential_value_are_kept(text):
    """Other option names (`--password-file`, `--eos-token`, `--no-password`), help text
    (metavars, types), prose, placeholders and variables, the next option, a file's name."""
    assert redacted(text) == text


# -- 2. YAML flow and block sequences, pretty-printed JSON ----------------------------
PRETTY = json.dumps({"mcpServers": {"x": {"command": "srv", "args": ["--token", V]}}}, indent=2)
SEQUENCES = [
    ("args: [--token, abc123secretvalue]", "args: [--token, <secret:token>]"),
    (f'args: [--api-key, "{V}"]', 'args: [--api-key, "<secret:api_key>"]'),
    (f"args: [--api-key, '{V}', --port, 8080]", "args: [--api-key, '<secret:api_key>', --port, 8080]"),
    ("command: [srv, --password, hunterlong]", "command: [srv, --password, <secret:password>]"),
    ("args: [--db-token, s3cr3tvalue9]", "args: [--db-token, <secret:token>]"),
    (f"    args:\n      - --api-key\n      - {V}\n      - --port",
     "    args:\n      - --api-key\n      - <secret:api_key>\n      - --port"),
    (f'command:\n  - "--token"\n  - "{V}"', 'command:\n  - "--token"\n  - "<secret:token>"'),
    (PRETTY, PRETTY.replace(V, "<secret:token>")),
]  # fmt: skip


@pytest.mark.parametrize(("text", "out"), SEQUENCES)
def test_a_credential_option_in_a_yaml_sequence_or_pretty_json_is_redacted(text, out):
    """A config file shown by `cat`, as it stands and inside a JSON string (a raw stream
    kept in `state_json`, a heredoc in `arguments_json`)."""
    assert redacted(text) == out
    inner = redacted(json.dumps({"raw": text}))
    assert V not in inner and "abc123secret" not in inner and "hunterlong" not in inner, inner


@pytest.mark.parametrize(
    "text",
    [
        "args: [--token, $API_TOKEN]",
        'args: [--token, "${API_TOKEN}"]',
        "args: [--password-file, /run/secrets/pw]",
        "args: [--eos-token, endoftext]",
        "  - --token\n  - --verbose",
        "choose --password, or --token, then run",
    ],
)
def test_sequences_that_hold_no_credential_are_kept(text):
    assert redacted(text) == text


def test_the_screen_flags_and_pass1_redacts_every_new_shape(tmp_path):
    lines = [t for t, _ in BARE[:6]] + [t for t, _ in SEQUENCES]
    kept = [*BARE_KEPT[:6], "ok"]
    assert_screen_flags(lines, kept, seed=12062)
    assert_pass1_redacts_as_whole(tmp_path, lines, (V, "hunterlong", "abcdefghij"))


@pytest.mark.docker
def test_a_config_shown_by_cat_reaches_no_shard(docker_engine, store, repo):
    """The hunt's case end to end: a compose file and a server's flags written by a
    heredoc (the action holds them too) and shown by `cat`, through a real SWE sandbox
    and a real job into the raw store."""
    config = (
        "services:\n  srv:\n    command: [srv, --token, abc123secretvalue]\n"
        f"    args:\n      - --api-key\n      - {V}\n"
        "# run: mytool --password hunterlong --client-secret abcdefghijk\n"
    )
    job = {
        "name": "optleak", "retries": 0,
        "sandbox": {"kind": "swe", "repo": str(repo), "docker": {"step_timeout": 20}},
        "tasks": [{"id": "cat", "instruction": "Show the config.", "actions": [
            {"tool": "bash", "arguments": {"command": f"cat > c.yaml <<'EOF'\n{config}EOF"}},
            {"tool": "bash", "arguments": {"command": "cat c.yaml"}},
        ]}],
    }  # fmt: skip
    [t] = run_job(JobSpec.from_dict(job), store.raw).trajectories
    assert "command: [srv, --token, <secret:token>]" in t.turns[1].observation.text
    rows = [r for f in sorted(store.raw.rglob("*.parquet")) for r in pq.read_table(f).to_pylist()]
    journals = [p.read_text() for p in store.raw.rglob("*.journal.jsonl")]
    text = json.dumps(rows, default=str) + "".join(journals)
    assert rows
    for secret in ("abc123secretvalue", V, "hunterlong", "abcdefghijk"):
        assert secret not in text, secret


# -- 3. a key's piece below a named element of a web page -----------------------------
TREE = (  # what real Chromium shows for PAGE below (`web_axtree`)
    "RootWebArea 'T', focused, url='http://127.0.0.1:8765/index.html'\n"
    "\t[4] paragraph ''\n"
    "\t\tStaticText 'A:'\n"
    "\t\t[5] link 'ghp_Zx8Kq2Lm5Np7Rt1Vw3Yb6Cd9Fg4Hj0Ks2Mn5', url='http://127.0.0.1:8765/x'\n"
    "\t\t\tStaticText 'ghp_Zx8Kq2Lm5Np7'\n"
    "\t[7] table ''\n"
    "\t\t[8] rowgroup ''\n"
    "\t\t\t[9] row ''\n"
    "\t\t\t\t[10] columnheader 'Name'\n"
    "\t\t\t\t[11] columnheader 'Key'\n"
    "\t\t\t[12] row ''\n"
    "\t\t\t\t[13] cell 'ci'\n"
    "\t\t\t\t[14] cell 'Key sk-proj-Ab12Cd34Ef56Gh78Ij90Kl12Mn34Op56Qr78St90Uv12Wx34 (ci)'\n"
    "\t\t\t\t\t[15] code ''\n"
    "\t\t\t\t\t\tStaticText 'sk-proj-Ab12Cd34Ef56Gh78'\n"
    "\t[16] button 'ghp_Tq2Lm5Np7Rt1Vw3Yb6Cd9Fg4Hj0Ks2Mn5Zx8K'\n"
    "\t\tStaticText 'ghp_Tq2Lm5Np7Rt1V'\n"
    "\t[18] link 'Docs', url='http://127.0.0.1:8765/docs'\n"
    "\t\tStaticText 'Do'"
)
PAGE = """<!doctype html><html><head><title>T</title></head><body>
<p>A: <a href="/x"><span>ghp_Zx8Kq2Lm5Np7</span>Rt1Vw3Yb6Cd9Fg4Hj0Ks2Mn5</a></p>
<table><tr><th>Name</th><th>Key</th></tr><tr><td>ci</td><td>Key
<code>sk-proj-Ab12Cd34Ef56Gh78</code>Ij90Kl12Mn34Op56Qr78St90Uv12Wx34 (ci)</td></tr></table>
<button><span>ghp_Tq2Lm5Np7Rt1V</span>w3Yb6Cd9Fg4Hj0Ks2Mn5Zx8K</button>
<a href="/docs"><span>Do</span>cs</a>
</body></html>"""
PIECES = ("ghp_Zx8Kq2Lm5Np7", "sk-proj-Ab12Cd34Ef56Gh78", "ghp_Tq2Lm5Np7Rt1V", "Ab12Cd34")


def test_a_piece_below_a_named_element_goes_with_the_key_in_its_name():
    """Each piece below the link, the cell and the button is cut where the key was cut
    in the name; the words around it and a piece of no secret (`Do` of `Docs`) stay."""
    out, n = Redactor().text(TREE)
    for piece in PIECES:
        assert piece not in out, (piece, out)
    lines = out.splitlines()
    assert len(lines) == len(TREE.splitlines())
    assert "\t\t\tStaticText '<secret:github_token>'" in lines
    assert "\t\t\t\t[14] cell 'Key <secret:openai_key> (ci)'" in lines
    assert "\t\t\t\t\t\tStaticText '<secret:openai_key>'" in lines
    assert "\t\tStaticText '<secret:github_token>'" in lines
    assert lines[-2:] == [
        "\t[18] link 'Docs', url='http://127.0.0.1:8765/docs'",
        "\t\tStaticText 'Do'",
    ]
    assert n == 6
    assert Redactor().text(out) == (out, 0)
    assert len(list(find_secrets({"observation": TREE}))) == 6


@pytest.mark.browser
def test_a_named_elements_piece_reaches_no_tree_chromium_shows(tmp_path):
    """The page in real Chromium: its tree is TREE's shape, and redacted holds no piece."""
    from worldtrace.sandboxes.base import TaskSpec
    from worldtrace.sandboxes.web import WebConfig, WebSandbox, WebTask
    from worldtrace.schemas.parsing import parse

    with serving_pages({"/index.html": PAGE}) as url:
        sb = WebSandbox(parse(WebConfig, {}))
        try:
            shown = sb.reset(TaskSpec("t", params=WebTask(url=f"{url}/index.html"))).text
        finally:
            sb.close()
    tree = shown[shown.index("RootWebArea") :]
    assert tree.replace(url.split("//")[1], "127.0.0.1:8765") == TREE, tree
    out = Redactor().text(shown)[0]
    for piece in PIECES:
        assert piece not in out, (piece, out)
