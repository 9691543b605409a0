"""`collect --keys`: the keys typed are the text given, three escapes read (2026-12-05).

Found: `--keys 'echo héllo wörld €\\n'` recorded `echo hÃ©llo wÃ¶rld â\\x82¬` (the text
went through Python's `unicode_escape`, which reads UTF-8 as Latin-1), and every
backslash escape became a key (`\\001` typed C-a) where the help promised only `\\n`."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from worldtrace.schemas import read_records


def quick(wt_env: dict[str, str], *keys: str) -> list[tuple[str, str]]:
    """A quick run of `keys` (one --keys each) by the real CLI: (action, output) per turn,
    the output being what the screen showed between the echo of the keys and the prompt."""
    args = [a for k in keys for a in ("--keys", k)]
    r = subprocess.run(["worldtrace", "collect", "--sandbox", "docker", *args],
                       capture_output=True, text=True, env=wt_env)  # fmt: skip
    assert r.returncode == 0, r.stdout + r.stderr
    [t] = read_records(Path(wt_env["WORLDTRACE_STORE"]) / "raw")
    return [
        (turn.action.text, "\n".join(turn.observation.text.splitlines()[1:-1])) for turn in t.turns
    ]


@pytest.mark.docker
def test_keys_keep_non_ascii_text_as_typed(docker_engine, wt_env):
    assert quick(wt_env, "echo héllo wörld €\\n", "pwd\\n") == [
        ("echo héllo wörld €\n", "héllo wörld €"),
        ("pwd\n", "/root"),
    ]


@pytest.mark.docker
def test_keys_read_newline_tab_and_backslash_and_type_other_escapes_as_they_are(
    docker_engine, wt_env
):
    """`\\n` is Enter, `\\t` Tab, `\\\\` one backslash; `\\001`, `\\x41`, `\\e`, `\\r` are
    typed as written (bash's `echo` prints them back), not turned into keys."""
    turns = quick(wt_env, "echo '\\001 \\x41 \\e \\r'\\n", "echo 'a\\\\nb'\\tc\\n")
    assert turns == [
        ("echo '\\001 \\x41 \\e \\r'\n", "\\001 \\x41 \\e \\r"),
        ("echo 'a\\nb'\tc\n", "a\\nbc"),  # Tab: no completion there, nothing typed
    ]
