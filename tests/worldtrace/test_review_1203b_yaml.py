"""Review 1203b (fault injection), F9: job and config YAML files that are not UTF-8, nest
very deep or hold an alias bomb are one `file:LINE: message` line (exit 1), never a
traceback or memory growing without limit."""

from __future__ import annotations

import resource
import subprocess
from pathlib import Path

import pytest

MEMORY_CAP = 1 << 30
"""Address space a command gets here: ~10x what `jobs submit --dry-run` needs; the alias
bomb grew past 2.5 GB within 30 s."""


def _capped() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_CAP, MEMORY_CAP))


def wt(env: dict, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["worldtrace", *args],
        capture_output=True,
        text=True,
        env=env,
        preexec_fn=_capped,
        timeout=120,
    )


def job(tmp_path: Path, name: str, body: bytes | str) -> Path:
    f = tmp_path / name
    f.write_bytes(body if isinstance(body, bytes) else body.encode())
    return f


BOMB = "name: bomb\na: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{b}: &{b} [{', '.join([f'*{a}'] * 9)}]\n" for a, b in zip("abcdefgh", "bcdefghi", strict=True)
)
"""A "billion laughs": nine aliases of nine aliases ..., 9^9 values from 400 bytes."""

CHAIN = (
    "name: chain\n"
    + "k0: &a0 [x]\n"
    + "".join(f"k{i}: &a{i} [*a{i - 1}]\n" for i in range(1, 2000))
)
"""Each list holds the one before: 2000 levels deep once the aliases are followed."""


@pytest.mark.parametrize(
    ("name", "body", "line", "message"),
    [
        (
            "latin1.yaml",
            b"name: j\n\xff\xfe bad: 1\n",
            2,
            "byte 0xff at column 1 is not UTF-8: the file is in another encoding (Latin-1 or "
            "cp1252?); convert it: iconv -f cp1252 -t utf-8 {f} > {f}.utf8",
        ),
        (
            "deeper.yaml",
            "a: " + "[" * 20000 + "]" * 20000 + "\n",
            1,
            "invalid YAML: nested deeper than 100 levels",
        ),
        (
            "bomb.yaml",
            BOMB,
            7,
            "invalid YAML: aliases expand the document past 100000 values (aliases of aliases: "
            "a YAML bomb?): write the values out, or share less",
        ),
        (
            "chain.yaml",
            CHAIN,
            100,  # k98: [*a97], the alias 3 levels down that reaches 101
            "invalid YAML: nested deeper than 100 levels, with its aliases followed",
        ),
    ],
)
@pytest.mark.parametrize("command", [["jobs", "submit", "--dry-run"], ["collect"]])
def test_a_bad_job_file_is_one_line_at_its_line(
    tmp_path, wt_env, command, name, body, line, message
):
    f = job(tmp_path, name, body)
    r = wt(wt_env, *command, str(f))
    assert (r.returncode, r.stdout) == (1, ""), r.stderr[-2000:]
    assert r.stderr.splitlines() == [f"{f}:{line}: <top>: {message.format(f=f)}"]


def test_a_process_config_that_is_not_utf8_deep_or_a_bomb_is_one_line(tmp_path, wt_env):
    """`process --config` says it as its other config errors: the file, then the line."""
    cases = {
        "latin1.yaml": (
            b"dedup:\n  threshold: 0.8 # \xe9\n",
            "line 2: byte 0xe9 at column 20 is not UTF-8",
        ),
        "deeper.yaml": (
            "a: " + "[" * 20000 + "]" * 20000 + "\n",
            "not YAML (line 1: nested deeper than 100 levels)",
        ),
        "bomb.yaml": (BOMB, "not YAML (line 7: aliases expand the document past 100000 values"),
    }
    for name, (body, says) in cases.items():
        f = job(tmp_path, name, body)
        r = wt(wt_env, "process", "--config", str(f))
        assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr[-2000:]
        [error] = [x for x in r.stderr.splitlines() if x.startswith("Error")]
        assert error.startswith(f"Error: Invalid value for --config: {f}: {says}"), error


def test_aliases_a_job_file_shares_blocks_with_still_load(tmp_path, wt_env):
    """What the bounds must leave alone: an anchored mapping merged into other tasks
    (`<<: *d`), an anchored list used again."""
    f = job(
        tmp_path,
        "shared.yaml",
        "name: shared\nsandbox: {kind: terminal}\ntasks:\n"
        '  - id: a\n    <<: &d {instruction: say hi, actions: &x ["echo hi\\n", "ls\\n"]}\n'
        "  - {id: b, <<: *d}\n  - {id: c, instruction: other, actions: *x}\n",
    )
    r = wt(wt_env, "jobs", "submit", "--dry-run", str(f))
    assert r.returncode == 0, r.stderr
    assert "shared: 3 episode(s)" in r.stdout
