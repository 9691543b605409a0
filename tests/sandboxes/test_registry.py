"""Sandbox kinds as plugins: an entry point adds a kind that the whole path then uses."""

from __future__ import annotations

import asyncio
import textwrap
from contextlib import asynccontextmanager

import anyio
import pytest
from worldtrace.sandboxes import base
from worldtrace.sandboxes.aio import AsyncRunner, AsyncTimeout

PLUGIN = textwrap.dedent(
    '''
    from dataclasses import dataclass
    from worldtrace.schemas import Observation
    from worldtrace.schemas.parsing import configclass
    from worldtrace.sandboxes.base import ToolSpec, Unpicklable

    @configclass
    class EchoConfig:
        """An echo environment."""
        prefix: str = ">"

    @configclass
    class EchoTask:
        """The task payload of the echo kind."""
        greeting: str = "hello"

    SPACE = [ToolSpec("say", "echo the text", {"type": "object", "properties":
             {"text": {"type": "string"}}, "required": ["text"], "additionalProperties": False})]

    class EchoSandbox(Unpicklable):
        kind = "echo-test"
        domain = "mcp"
        config_class = EchoConfig
        task_class = EchoTask

        @classmethod
        def static_action_space(cls, config):
            return SPACE

        def __init__(self, config):
            self.config = config
            self.greeting = None

        def reset(self, task):
            self.greeting = task.params.greeting
            return Observation(self.greeting)

        def step(self, action):
            import json
            text = json.loads(action.arguments_json)["text"]
            if text == "boom":
                raise RuntimeError("the echo backend crashed")
            return Observation(f"{self.config.prefix} {text}")

        def describe(self):
            return {"backend": "echo", "action_space": [t.to_dict() for t in SPACE],
                    "initial_state": self.greeting or ""}

        def close(self):
            pass
    '''
)


@pytest.fixture
def echo_kind(tmp_path, monkeypatch):
    """A pip-installed-looking package that registers a kind through the entry-point group."""
    pkg = tmp_path / "site"
    (pkg / "wtplugin").mkdir(parents=True)
    (pkg / "wtplugin" / "__init__.py").write_text(PLUGIN)
    dist = pkg / "wtplugin-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: wtplugin\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(
        f"[{base.ENTRY_POINT_GROUP}]\necho-test = wtplugin:EchoSandbox\n"
        "terminal = wtplugin:EchoSandbox\n"
    )
    monkeypatch.syspath_prepend(str(pkg))
    base.registry.cache_clear()
    yield "echo-test"
    base.registry.cache_clear()


def test_entry_point_adds_a_kind_but_never_replaces_a_builtin(echo_kind):
    assert echo_kind in base.kinds()
    assert base.registry()["terminal"] == base.BUILTIN_KINDS["terminal"]
    cls = base.load(echo_kind)
    assert cls.kind == "echo-test" and cls.config_class.__name__ == "EchoConfig"
    with pytest.raises(KeyError, match=r"unknown sandbox kind 'nope'.*echo-test"):
        base.load("nope")


def test_plugin_kind_runs_a_job_end_to_end(echo_kind, store):
    from worldtrace.collectors.jobs import run_job
    from worldtrace.collectors.jobspec import JobSpec

    job = {
        "name": "echo",
        "sandbox": {"kind": echo_kind, "prefix": "=>"},
        "retries": 0,
        "tasks": [
            {
                "id": "t1",
                "greeting": "hi",
                "actions": [{"tool": "say", "arguments": {"text": "x"}}],
            },
            {"id": "t2", "actions": [{"tool": "say", "arguments": {"text": "boom"}}]},
        ],
    }
    spec = JobSpec.from_dict(job)
    assert spec.domain == "mcp" and spec.task("t1").params.greeting == "hi"
    ok, failed = run_job(spec, store.raw).trajectories
    assert ok.outcome.status == "success" and ok.turns[0].observation.text == "=> x"
    assert ok.system.initial_state == "hi"
    # our failure is the attempt's error, never an observation
    assert failed.outcome.status == "error" and failed.turns == []
    assert failed.outcome.error == "RuntimeError: the echo backend crashed"


def test_tool_spec_accepts_mcp_and_openai_shapes_and_checks_arguments():
    mcp = base.ToolSpec.from_dict(
        {
            "name": "f",
            "inputSchema": {"type": "object", "required": ["a"]},
            "annotations": {"readOnlyHint": True},
        }
    )
    oai = base.ToolSpec.from_dict(
        {"type": "function", "function": {"name": "g", "parameters": {"type": "object"}}}
    )
    assert mcp.annotations == {"readOnlyHint": True} and oai.name == "g"
    assert mcp.check({"a": 1}) is None
    assert mcp.check({}) == "f: 'a' is a required property"
    assert base.ToolSpec.from_dict(mcp.to_dict()) == mcp


def test_async_runner_times_out_and_holds_a_context_in_one_task():
    with AsyncRunner() as runner:
        never = asyncio.Event

        async def wait_forever():
            await never().wait()

        with pytest.raises(AsyncTimeout):
            runner.run(wait_forever(), timeout=0.2)
        assert runner.run(asyncio.sleep(0, result=7), timeout=5) == 7

        tasks = []

        @asynccontextmanager
        async def scoped():
            # anyio cancel scopes must be exited by the task that entered them
            with anyio.CancelScope():
                tasks.append(asyncio.current_task())
                yield "value"
                tasks.append(asyncio.current_task())

        value, release = runner.hold(scoped, timeout=5)
        assert value == "value"
        release()
        assert len(tasks) == 2 and tasks[0] is tasks[1]
