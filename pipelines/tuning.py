"""Two Beam costs every run paid, however small, removed where Beam offers no option.

- **Bundle ends.** Every bundle starts a thread that samples which step runs; ending the
  bundle joins it, which waits out the thread's current sleep. The sleep starts at 2 ms
  and grows by 1.2x up to `sampling_period_ms` (200 by default), so each bundle waited
  about a sixth of its own length, up to 200 ms, before the next stage could start. A
  10 ms ceiling bounds that wait; sampling every 10 ms costs nothing measurable.
- **DoFn introspection.** `userstate.get_dofn_specs` inspects the signature of every
  method of a DoFn (about 30) to find state and timer parameters, and pipeline
  construction calls it about 8 times per DoFn, and each worker again for every stage:
  15,000 signatures, ~0.3 s a run. A DoFn class without state or timers (all of ours,
  and Beam's own plain ones) is remembered as such; any other is inspected every time,
  as before.
- **Option views.** `PipelineOptions.view_as` builds an argument parser of the view's
  class (a hundred-odd arguments) and parses the flags again on every call, and
  construction calls it ~325 times: 75 ms a run. Views of one options object share its
  values, so one view per class is remembered and serves every caller.

Together about 0.55 s of a small incremental `process` run (docs/benchmarks.md). Applied
in the submitting process (`runner.LocalRunner`) and in each worker (`sdk_worker`).
"""

from __future__ import annotations

import types
import weakref

SAMPLING_MS = 10


def tune_beam() -> None:
    """Idempotent."""
    from apache_beam.options.pipeline_options import PipelineOptions
    from apache_beam.runners.worker import statesampler
    from apache_beam.transforms import userstate

    statesampler.StateSampler.__init__.__defaults__ = (SAMPLING_MS,)
    if not getattr(userstate.get_dofn_specs, "remembers", False):
        userstate.get_dofn_specs = _remembering(userstate.get_dofn_specs)
    if not getattr(PipelineOptions.view_as, "remembers", False):
        PipelineOptions.view_as = _remembering_views(PipelineOptions.view_as)


def _remembering_views(view_as):
    # options object -> {view class: its view}, for as long as the options object lives
    views: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()

    def remembered_view_as(self, cls):
        known = views.setdefault(self, {})
        view = known.get(cls)
        if view is None:
            view = known[cls] = view_as(self, cls)
        return view

    remembered_view_as.remembers = True
    return remembered_view_as


def _remembering(get_specs):
    """Specs are found on the bound methods `dir(dofn)` lists: the class's functions (with
    their defaults, where state and timer parameters are declared), unless an instance
    attribute holds a bound method of its own. A class seen without state or timers is
    remembered for every instance that adds no such method: a worker unpickles new
    instances of every DoFn for every stage, so remembering instances helped only
    pipeline construction (each worker still inspected ~1,300 signatures, ~60 ms)."""
    plain: weakref.WeakSet = weakref.WeakSet()

    def get_dofn_specs(dofn):
        own = getattr(dofn, "__dict__", None)
        by_class = own is not None and not any(
            isinstance(v, types.MethodType) for v in own.values()
        )
        if by_class and type(dofn) in plain:
            return set(), set()
        specs = get_specs(dofn)
        if by_class and not any(specs):
            plain.add(type(dofn))
        return specs

    get_dofn_specs.remembers = True
    return get_dofn_specs
