"""`pipelines/tuning.py` trims Beam's per-run costs without changing what a pipeline does."""

from __future__ import annotations

import threading
from pathlib import Path

import apache_beam as beam
import pytest
from apache_beam.coders import VarIntCoder
from apache_beam.metrics import Metrics
from apache_beam.metrics.metric import MetricsFilter
from apache_beam.options.pipeline_options import PipelineOptions, StandardOptions
from apache_beam.runners.worker.statesampler import StateSampler as Sampler
from apache_beam.testing.util import assert_that, equal_to
from apache_beam.transforms import userstate
from apache_beam.transforms.userstate import BagStateSpec
from worldtrace.pipelines import dedup, state, transforms
from worldtrace.pipelines.runner import LocalRunner
from worldtrace.pipelines.tuning import _no_source_lint, _remembering, tune_beam


class RunningTotal(beam.DoFn):
    """Stateful: the introspection the tuning remembers must still find its state."""

    SEEN = BagStateSpec("seen", VarIntCoder())

    def process(self, item, seen=beam.DoFn.StateParam(SEEN)):
        key, value = item
        seen.add(value)
        yield key, sum(seen.read())


class Plain(beam.DoFn):
    def process(self, item):
        yield item


def test_stateful_dofns_keep_their_state_and_plain_ones_are_remembered():
    tune_beam()
    tune_beam()  # idempotent: one wrapper
    assert userstate.get_dofn_specs.remembers
    stateful, plain = RunningTotal(), Plain()
    for _ in range(2):
        assert userstate.get_dofn_specs(stateful) == ({RunningTotal.SEEN}, set())
        assert userstate.get_dofn_specs(plain) == (set(), set())
    options = PipelineOptions(["--direct_running_mode=in_memory"])
    with LocalRunner(options) as runner, beam.Pipeline(runner=runner, options=options) as p:
        out = (
            p
            | beam.Create([("a", 1), ("a", 2), ("b", 5), ("a", 3)])
            | beam.ParDo(plain)
            | beam.ParDo(stateful)
            | beam.combiners.Top.LargestPerKey(1)
            | beam.Map(lambda kv: (kv[0], kv[1][0]))
        )
        assert_that(out, equal_to([("a", 6), ("b", 5)]))


class Counted(beam.DoFn):
    def process(self, item):
        Metrics.counter("test", "seen").inc(item)
        yield item


class Unpicklable(beam.DoFn):
    """Fails where the worker builds a stage's operations (unpickling its DoFns)."""

    def __setstate__(self, state):
        raise ValueError("cannot rebuild this DoFn")

    def process(self, item):
        yield item


def in_process() -> PipelineOptions:
    return PipelineOptions(["--direct_running_mode=in_memory"])


def test_bundles_start_no_threads_and_metrics_still_count(monkeypatch):
    """Each bundle started a sampling thread and each stage an `ExecutionTreeCreator`
    thread, both joined at once (~1.7 ms a stage); the counters that ride on the
    sampler's step tracking still count."""
    tune_beam()
    started: list[threading.Thread] = []
    real_start = threading.Thread.start

    def start(thread):
        started.append(thread)
        real_start(thread)

    monkeypatch.setattr(threading.Thread, "start", start)
    options = in_process()
    with LocalRunner(options) as runner:
        p = beam.Pipeline(runner=runner, options=options)
        out = (
            p
            | beam.Create([1, 2, 3, 4])
            | "Count" >> beam.ParDo(Counted())
            | beam.GroupBy(lambda x: x % 2)
            | beam.MapTuple(lambda k, vs: (k, sorted(vs)))
        )
        assert_that(out, equal_to([(0, [2, 4]), (1, [1, 3])]))
        result = p.run()
        result.wait_until_finish()
    sampling = [t for t in started if isinstance(getattr(t._target, "__self__", None), Sampler)]
    assert sampling == []  # one per bundle before
    assert not [t for t in started if t.name.startswith("ExecutionTreeCreator")]  # one per stage
    [seen] = result.metrics().query(MetricsFilter().with_name("seen"))["counters"]
    assert seen.committed == 10 and seen.key.step.endswith("Count")


def test_side_inputs_read_in_process_are_not_sized_for_a_cache(monkeypatch):
    """The in-process worker sized every side input it read for its state cache, with
    `objsize`: ~6 ms a run however small (every module's globals collected first), ~20 ms
    at 20k trajectories, for values each stage reads once. The values are the same."""
    from apache_beam.runners.worker import statecache

    sized: list[int] = []
    real = statecache.get_deep_size

    def get_deep_size(*objs):
        sized.append(len(objs))
        return real(*objs)

    monkeypatch.setattr(statecache, "get_deep_size", get_deep_size)
    options = in_process()
    with LocalRunner(options) as runner:
        p = beam.Pipeline(runner=runner, options=options)
        table = p | "Table" >> beam.Create([("a", 1), ("b", 2)])
        listed = p | "Listed" >> beam.Create([10, 20])
        out = (
            p
            | beam.Create(["a", "b", "a"])
            | beam.Map(
                lambda k, t, extra: (k, t[k] + sum(extra)),
                beam.pvalue.AsDict(table),
                beam.pvalue.AsList(listed),
            )
        )
        assert_that(out, equal_to([("a", 31), ("b", 32), ("a", 31)]))
        p.run().wait_until_finish()
    assert sized == []


def test_a_stage_that_cannot_be_built_still_fails_the_run_with_its_error():
    """Found too (the suite left two `beam-pipeline-temp*` directories in /tmp a run):
    Beam removes a pipeline's temporary directory only in `run`; `process.pipeline`
    removes it however the block ends."""
    from worldtrace.pipelines.process import pipeline

    tune_beam()
    options = in_process()
    with (
        pytest.raises(Exception, match="cannot rebuild this DoFn"),
        LocalRunner(options) as runner,
        pipeline(runner, options) as p,
    ):
        _ = p | beam.Create([1]) | beam.ParDo(Unpicklable())
        p.run()
    assert not Path(p.local_tempdir).exists()


class Extra(PipelineOptions):
    """Options of a class the options object has not been viewed as yet."""

    @classmethod
    def _add_argparse_args(cls, parser):
        parser.add_argument("--extra_flag", type=int, default=3)


def test_one_view_per_class_serves_every_caller_and_writes_through():
    tune_beam()
    tune_beam()  # idempotent: one wrapper
    assert PipelineOptions.view_as.remembers
    options = PipelineOptions(["--runner=DirectRunner", "--extra_flag=5"])
    view = options.view_as(StandardOptions)
    assert options.view_as(StandardOptions) is view  # remembered: no parser built again
    view.streaming = True
    assert options.view_as(StandardOptions).streaming is True
    assert options.get_all_options()["streaming"] is True  # one store behind every view
    assert options.view_as(Extra).extra_flag == 5  # a new class still reads the flags
    other = PipelineOptions([])
    assert other.view_as(StandardOptions) is not view
    assert other.view_as(StandardOptions).streaming is False
    assert other.view_as(Extra).extra_flag == 3


def test_a_plain_dofn_class_is_inspected_once_unless_an_instance_brings_its_own_method():
    """Found: each worker unpickles new instances of every DoFn for every stage, so
    remembering instances left ~1,300 signature inspections per worker (~60 ms). Classes
    are remembered now; an instance holding a bound method of its own (where state could
    be declared) is inspected every time."""
    tune_beam()
    calls: list[type] = []

    def counted(dofn):
        calls.append(type(dofn))
        return userstate.get_dofn_specs(dofn)

    specs = _remembering(counted)
    assert specs(Plain()) == specs(Plain()) == (set(), set())
    assert calls == [Plain]  # the second instance: from memory
    borrowed = Plain()
    borrowed.process = RunningTotal().process  # a stateful method on a plain class
    for _ in range(2):
        assert specs(borrowed) == ({RunningTotal.SEEN}, set())
        assert userstate.get_dofn_specs(borrowed) == ({RunningTotal.SEEN}, set())
    assert specs(RunningTotal()) == specs(RunningTotal()) == ({RunningTotal.SEEN}, set())
    assert calls == [Plain, Plain, Plain, RunningTotal, RunningTotal]


def dofn_classes(modules) -> list[type]:
    """Every DoFn class the pipeline's modules define."""
    found, todo = [], list(beam.DoFn.__subclasses__())
    while todo:
        cls = todo.pop()
        todo += cls.__subclasses__()
        if cls.__module__ in {m.__name__ for m in modules}:
            found.append(cls)
    return found


def test_the_lint_left_out_of_construction_finds_nothing_in_the_pipelines_dofns(caplog):
    """The tuning answers Beam's source lint (a `process` that both yields and returns
    values, or returns None) without reading the source: it holds only while Beam's own
    lint finds nothing in any DoFn the pipeline has."""
    tune_beam()
    tune_beam()  # idempotent: Beam's lint is kept, not the tuning's
    from apache_beam.transforms import core

    lint = _no_source_lint.beams
    assert core._check_fn_use_yield_and_return is _no_source_lint and lint is not _no_source_lint
    classes = dofn_classes([dedup, state, transforms])
    assert {"_Pass1", "_Finalize", "_Verify", "ProbeIndex"} <= {c.__name__ for c in classes}
    with caplog.at_level("WARNING"):
        assert [c.__name__ for c in classes if lint(c.__new__(c).process)] == []
    assert caplog.records == []  # no "returned None" either

    class Mixed(beam.DoFn):
        def process(self, item):
            if item:
                return [item]
            yield item

    assert lint(Mixed().process)  # the lint the test relies on still finds one


def test_remembered_signatures_answer_as_beams_and_hand_out_their_own_lists():
    tune_beam()
    from apache_beam.transforms import core

    remembered = core.get_function_args_defaults
    assert remembered.remembers
    fn = Plain().process
    first = remembered(fn)
    assert first == (["item"], []) == core.get_function_arguments(Plain(), "process")
    first[0].append("spoiled")  # a caller changing its copy changes no one else's
    assert remembered(fn) == (["item"], [])
    stateful = RunningTotal().process
    args, defaults = remembered(stateful)
    assert args == ["item", "seen"] and defaults[0].state_spec is RunningTotal.SEEN
    assert remembered(RunningTotal.process)[0] == ["self", "item", "seen"]  # unbound
