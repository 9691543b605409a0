"""Hunt 1207b, collection: what a user met with the real CLI and a real engine.

1. A job naming an image this machine lacks (sandboxes are never pulled from a
   registry here) burnt every episode's `retries` on it, each attempt saying the same
   `SandboxError: cannot create the sandbox: image ...`: a configuration mistake no retry
   mends. Now `collect` and `jobs submit` (`--dry-run` too) refuse the job before anything
   runs, one line naming the image and how to build or pull it, and an image gone after
   the job was queued (or while a pool runs) fails each episode once, not retried, as
   a SandboxConfigError. An engine that does not answer is still retried.
2. A task's set-up that printed a 20-character prefix of a handed-over value (`echo
   $API_KEY | cut -c1-20`) kept it in the attempt's error: only our own output cap's cut
   was redacted as a prefix. A prefix or suffix of a handed-over value, 8 characters or
   more, reading as generated and standing as a word of its own, is now redacted wherever
   the value would be, and benign text sharing a value's start (a URL's host, a word) is
   kept.
"""

from __future__ import annotations

import contextlib
import json
import uuid
from pathlib import Path

import pytest
from worldtrace.sandboxes.base import SandboxConfigError
from worldtrace.sandboxes.docker import ContainerPool, DockerConfig
from worldtrace.schemas import Store
from worldtrace.schemas.redact import written_forms
from worldtrace.schemas.store import read_records

from ..conftest import wt

EXIT_PROBLEMS = 1
EXIT_EPISODES_FAILED = 3
KEY = "wtk_Zq8Lm3vX9pR2wN7tY4bQ6sD1fG5hJ0kE"
"""A handed-over value (as a gateway's key looks): random letters and digits."""


def job_file(tmp_path: Path, image: str, **extra) -> Path:
    job = {
        "name": "hunt",
        "sandbox": {"kind": "terminal", "docker": {"image": image, "warm": 0}},
        "policy": "scripted",
        "episodes": 2,
        "retries": 2,
        "max_turns": 3,
        "tasks": [{"id": "t", "instruction": "list", "actions": ["ls\n"]}],
        **extra,
    }
    path = tmp_path / "job.yaml"
    path.write_text(json.dumps(job, indent=1))  # YAML reads JSON: one key a line
    return path


def image_line(path: Path, image: str) -> str:
    """What the refusal says: the file, the line of `image`, the key, how to mend it."""
    line = next(n for n, t in enumerate(path.read_text().splitlines(), 1) if '"image"' in t)
    return (
        f"{path}:{line}: sandbox.docker.image: image '{image}' is not on this machine "
        f"(worldtrace does not pull images): build it (infra/images/build.sh builds "
        f"worldtrace/debian and worldtrace/busybox), pull it where a registry answers "
        f"(docker pull {image}), or name one `docker images` lists"
    )


# -- 1. an image this machine lacks ---------------------------------------------------------
@pytest.mark.docker
def test_a_missing_image_is_refused_before_anything_runs(docker_engine, tmp_path, wt_env):
    image = f"worldtrace/hunt-1207b-{uuid.uuid4().hex[:8]}:1"
    path = job_file(tmp_path, image)
    for command in (["collect"], ["jobs", "submit", "--dry-run"], ["jobs", "submit"]):
        r = wt(wt_env, *command, str(path))
        assert r.returncode == EXIT_PROBLEMS, (command, r.stdout, r.stderr)
        assert r.stderr.splitlines() == [image_line(path, image)], (command, r.stderr)
        assert "t-e0" not in r.stdout  # no episode listed, none run
    store = Store.at(Path(wt_env["WORLDTRACE_STORE"]))
    assert not list(store.raw.rglob("*.parquet")) and not list(store.raw.rglob("*.jsonl"))
    r = wt(wt_env, "jobs", "list", "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["jobs"] == [], r.stdout + r.stderr


@pytest.fixture
def tagged(docker_engine):
    """A tag of worldtrace/busybox of this test's own, which the test removes (only the
    tag: the image keeps its other names); removed at the end if it is still there."""
    repo, tag = f"worldtrace/hunt-1207b-{uuid.uuid4().hex[:8]}", "gone"
    assert docker_engine.images.get("worldtrace/busybox:latest").tag(repo, tag)
    name = f"{repo}:{tag}"
    try:
        yield name
    finally:
        import docker.errors

        with contextlib.suppress(docker.errors.ImageNotFound):
            docker_engine.images.remove(name)


@pytest.mark.docker
def test_an_image_gone_after_the_job_was_queued_fails_each_episode_once(
    docker_engine, tagged, tmp_path, wt_env
):
    r = wt(wt_env, "jobs", "submit", str(job_file(tmp_path, tagged)))
    assert r.returncode == 0, r.stderr  # the image was there when the job was queued
    job_id = r.stdout.split()[0]
    docker_engine.images.remove(tagged)
    r = wt(wt_env, "worker")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "2 episode attempt(s) run (2 failed)" in r.stdout, r.stdout  # not 6: no retry
    r = wt(wt_env, "jobs", "show", job_id, "--json")
    attempts = json.loads(r.stdout)["attempts"]
    assert [(a["episode_id"], a["attempt"], a["status"]) for a in attempts] == [
        ("t-e0", 1, "failed"),
        ("t-e1", 1, "failed"),
    ], attempts
    said = (
        f"SandboxConfigError: cannot create the sandbox: image '{tagged}' is not on this "
        "machine (worldtrace does not pull images): build it"
    )
    assert all(a["error"].startswith(said) for a in attempts), attempts
    records = read_records(Store.at(Path(wt_env["WORLDTRACE_STORE"])).raw)
    assert sorted(t.outcome.error.startswith(said) for t in records) == [True, True]


@pytest.mark.docker
def test_an_image_removed_while_its_pool_runs_is_the_jobs_mistake(docker_engine, tagged):
    """The pool looked at the image when it started; a start after the image went (a pull
    reaches no registry here: the engine's 500) says so, not retried."""
    pool = ContainerPool(DockerConfig(image=tagged, warm=0))
    try:
        docker_engine.images.remove(tagged)
        with pytest.raises(SandboxConfigError, match=f"image '{tagged}' is not on this machine"):
            pool.acquire()
    finally:
        pool.close()


@pytest.mark.docker
def test_an_engine_that_does_not_answer_is_still_retried(docker_engine, tmp_path, wt_env):
    """Not the job's mistake: the engine may be back for the next attempt. The check
    before the run cannot ask it, and says nothing."""
    path = job_file(tmp_path, "worldtrace/debian:latest", episodes=1, retries=1)
    env = {**wt_env, "DOCKER_HOST": f"unix://{tmp_path}/no-engine.sock"}
    r = wt(env, "collect", str(path))
    assert r.returncode == EXIT_EPISODES_FAILED, r.stdout + r.stderr
    records = read_records(Store.at(Path(wt_env["WORLDTRACE_STORE"])).raw)
    assert sorted(t.source.attempt for t in records) == [1, 2]  # retries: 1
    for t in records:
        assert t.outcome.error.startswith(
            "SandboxError: cannot create the sandbox: no docker engine answers"
        ), t.outcome.error


# -- 2. a piece of a handed-over value -------------------------------------------------------
@pytest.mark.docker
def test_a_setup_printing_a_piece_of_a_handed_over_value_leaves_none_of_it(
    docker_engine, tmp_path, wt_env
):
    tasks = [
        {"id": "head", "setup": ["echo $API_KEY | cut -c1-20; exit 3"], "actions": ["ls\n"]},
        {"id": "tail", "setup": ["echo $API_KEY | tail -c 13 >&2; exit 4"], "actions": ["ls\n"]},
        {
            "id": "shown",
            "actions": [
                "echo $API_KEY | cut -c1-12\n",
                'echo "${API_KEY%????????????????}..."\n',  # the key less its last 16
                "echo https://hooks.example.com/services/other Password: wtk_\n",
            ],
        },
    ]
    docker = {"image": "worldtrace/debian:latest", "warm": 0, "env": ["API_KEY", "HOOK"]}
    path = job_file(
        tmp_path, "-", episodes=1, retries=0, tasks=tasks, max_turns=5,
        sandbox={"kind": "terminal", "docker": docker},
    )  # fmt: skip
    hook = "https://hooks.example.com/services/T0ABC9xyzQ/B1aZ7kLmN2pQ"
    env = {**wt_env, "API_KEY": KEY, "HOOK": hook}
    r = wt(env, "collect", str(path))
    assert r.returncode == EXIT_EPISODES_FAILED, r.stdout + r.stderr
    for piece in (KEY[:20], KEY[-12:], KEY[:12], KEY[:-16]):
        assert piece not in r.stdout + r.stderr, (piece, r.stdout)
        for f in Path(wt_env["WORLDTRACE_STORE"]).rglob("*"):  # the job store's rows too
            assert not f.is_file() or piece.encode() not in f.read_bytes(), (piece, f)
    got = {t.task.task_id: t for t in read_records(Store.at(Path(wt_env["WORLDTRACE_STORE"])).raw)}
    head, tail, shown = got["head"].outcome.error, got["tail"].outcome.error, got["shown"]
    assert head == (
        "SandboxError: task setup failed (3): echo $API_KEY | cut -c1-20; exit 3: "
        "<secret:env_value>"
    ), head
    assert tail.endswith(": <secret:env_value>") and KEY[-12:] not in tail, tail
    texts = [turn.observation.text for turn in shown.turns]
    held = json.dumps([t.observation.state_json for t in shown.turns]) + "".join(texts)
    for piece in (KEY[:12], KEY[:-16], KEY[-12:]):
        assert piece not in held, piece
    assert "<secret:env_value>\n" in texts[0] and "<secret:env_value>...\n" in texts[1], texts
    # benign text that shares the start of a handed-over value, or is no generated piece
    assert "https://hooks.example.com/services/other Password: wtk_\n" in texts[2], texts[2]
    assert shown.outcome.status == "success"


def pieces(text: str, *values: str) -> str:
    """`text` with the pieces `handed_pieces` finds replaced, as `Redactor.pieces` does."""
    from worldtrace.schemas.redact import handed_pieces

    forms = [f for v in values for f in written_forms(v)]
    out, pos = [], 0
    for start, end in handed_pieces(text, forms):
        out += [text[pos:start], "<secret:env_value>"]
        pos = end
    return "".join([*out, text[pos:]])


def test_a_piece_is_a_generated_word_of_eight_characters_or_more():
    p = "<secret:env_value>"
    assert pieces(f"key {KEY[:8]}\n", KEY) == f"key {p}\n"
    assert pieces(f"key {KEY[:7]}\n", KEY) == f"key {KEY[:7]}\n"  # under 8: a hint, kept
    assert pieces(f"...{KEY[-8:]}", KEY) == f"...{p}"
    assert pieces(f"{KEY[:10]}***{KEY[-9:]}", KEY) == f"{p}***{p}"
    assert pieces(f"[{KEY[:24]}]", KEY) == f"[{p}]"
    # a word that goes on past where the value and the text part: not the value's piece
    assert pieces(f"{KEY[:9]}Xq", KEY) == f"{KEY[:9]}Xq"
    assert pieces(f"Aq{KEY[-9:]}", KEY) == f"Aq{KEY[-9:]}"
    # what a value starts or ends with that reads as no generated text
    url = "https://api.example.com/v1/hooks?token=Zq8Lm3vX9pR2wN7t"
    for benign in ("https://api.example.com/v1/hooks", "see api.example.com/v1", "Password"):
        assert pieces(benign, url, "Password123!", "release-2024-12-07") == benign
    assert pieces("left: hooks?token=Zq8Lm3vX9pR2wN7t", url) == f"left: {p}"
    # a value as a program prints it escaped (`declare -p`): its pieces too
    quoted = 'Zq8"Lm$3vX9pR!w2N7t'
    assert pieces('declare -x K="Zq8\\"Lm\\$3vX9"', quoted) == f'declare -x K="{p}"'
    # a piece at a line's start in a raw stream kept as JSON (`\\n` before it), or after
    # a colour (`grep --color`)
    assert pieces(json.dumps(f"a\r\n{KEY[-12:]}\r\n"), KEY) == f'"a\\r\\n{p}\\r\\n"'
    assert pieces(f"\x1b[01;31m\x1b[K{KEY[-12:]}\x1b[m", KEY) == f"\x1b[01;31m\x1b[K{p}\x1b[m"
