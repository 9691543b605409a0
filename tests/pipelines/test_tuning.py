"""`pipelines/tuning.py` trims Beam's per-run costs without changing what a pipeline does."""

from __future__ import annotations

import apache_beam as beam
from apache_beam.coders import VarIntCoder
from apache_beam.options.pipeline_options import PipelineOptions, StandardOptions
from apache_beam.testing.util import assert_that, equal_to
from apache_beam.transforms import userstate
from apache_beam.transforms.userstate import BagStateSpec
from worldtrace.pipelines.runner import LocalRunner
from worldtrace.pipelines.tuning import SAMPLING_MS, _remembering, tune_beam


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
    from apache_beam.runners.worker import statesampler

    assert statesampler.StateSampler("t", None).sampling_period_ms == SAMPLING_MS
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
