"""Found (tester, 2026-12-05): the SWE tools' answers were not the file's text.

`read` split lines with `str.splitlines`, which also ends a line at `\\r`, `\\f`, `\\v`,
`\\x1c`-`\\x1e`, `\\x85`, U+2028 and U+2029: a form feed made two numbered lines of one, a
lone `\\r` too, and a CRLF line lost its `\\r`. `edit`'s diff came from the same split: a
space put inside a line at a form feed, a wrong hunk range, and for a file without a final
newline two lines glued together. The truth is the container's own tools: `cat -n` and
`sed -n Np` number lines (a line ends at `\\n` only) and GNU `diff -u` writes the diff, so a
job records both, one after the other, and the answers must be equal. Real containers.
"""

from __future__ import annotations

import pytest
from worldtrace.collectors.jobs import JobSpec, run_job
from worldtrace.schemas import read_records

pytestmark = pytest.mark.docker

FILES = {
    "ff.py": b"a\fb\nc\n",
    "crlf.txt": b"line1\r\nline2\r\n",
    "cr.txt": b"x\ry\nz\n",
    "seps.txt": "v\vf\x1cg\x1dr\x1eu\x85n\u2028l\u2029p\nend\n".encode(),
    "nonl.py": b"def f(a, b):\n    return a - b",
    "tail.txt": b"x\ny\nz",
}
EDITS = [  # (path, old, new)
    ("nonl.py", "a - b", "a + b"),  # the last line, which has no newline
    ("ff.py", "c", "C"),  # after a line holding a form feed
    ("crlf.txt", "line2", "LINE2"),
    ("tail.txt", "x", "X"),  # the unchanged last line, without newline, as context
    ("seps.txt", "end", "END"),
]


def call(name: str, **arguments) -> dict:
    return {"tool": name, "arguments": arguments}


def bash(command: str) -> dict:
    return call("bash", command=command)


@pytest.fixture
def recorded(docker_engine, store, tmp_path):
    """Run a job of `actions` on a repository of FILES; the texts the store holds."""
    repo = tmp_path / "r"
    repo.mkdir()
    for name, data in FILES.items():
        (repo / name).write_bytes(data)

    def run(actions: list[dict]) -> list[str]:
        job = {
            "name": "swe-text",
            "sandbox": {"kind": "swe", "repo": str(repo), "docker": {"warm": 0}},
            "retries": 0,
            "tasks": [{"id": "t", "actions": actions}],
        }
        run_job(JobSpec.from_dict(job), store.raw)
        [t] = read_records(store.raw)
        assert t.outcome.status == "success", t.outcome
        return [turn.observation.text for turn in t.turns]

    return run


def test_read_numbers_lines_as_cat_n_and_sed_do(recorded):
    actions = []
    for name in FILES:
        actions += [call("read", path=name), bash(f"cat -n {name}")]
        actions += [call("read", path=name, start=2, end=2), bash(f"cat -n {name} | sed -n 2p")]
    texts = recorded(actions)
    for i, name in enumerate(FILES):
        read, cat, read2, sed2 = texts[4 * i : 4 * i + 4]
        assert read == cat.removesuffix("\n"), name  # no newline after the last line
        assert read2 == sed2.removesuffix("\n"), name
    assert texts[2] == "     2\tc"  # ff.py: two lines; the second is `c`
    assert texts[4] == "     1\tline1\r\n     2\tline2\r"  # crlf.txt: `\r` kept, as bash shows it


def test_edit_diff_is_what_diff_u_prints(recorded):
    actions = []
    for path, old, new in EDITS:
        actions += [
            bash(f"cp {path} /tmp/{path}.orig"),
            call("edit", path=path, old=old, new=new),
            bash(f"diff -u --label a/{path} --label b/{path} /tmp/{path}.orig {path}"),
        ]
    texts = recorded(actions)
    for i, (path, *_) in enumerate(EDITS):
        _, edit, diff = texts[3 * i : 3 * i + 3]
        assert edit == diff, path
    assert texts[1].endswith(
        "-    return a - b\n\\ No newline at end of file\n"
        "+    return a + b\n\\ No newline at end of file\n"
    )
    assert "@@ -1,2 +1,2 @@\n a\fb\n-c\n+C\n" in texts[4]
