"""Costs every Beam run paid, however small, removed where Beam offers no option.

- **Threads per bundle.** Every bundle started a thread that samples which step runs
  (for per-step execution times and the lull warnings of a worker status service), and
  ending the bundle joined it, which waited out the thread's current sleep (2 ms growing
  to 200). Nothing reads those samples here: the runner has no status service and no
  one reads execution times. The sampler now only tracks the current step, which user
  metrics need (`_sampler_without_thread`). And every new stage's bundle processor
  built its operations in a thread of its own, started and joined for the purpose
  (`ExecutionTreeCreator`), only to abandon an unpickling stuck for an hour; it is
  built in the calling thread. Both: ~1.7 ms per stage in-process, a 24-stage run's 40
  ms (of an incremental run's ~1.1 s).
- **DoFn introspection.** `userstate.get_dofn_specs` inspects the signature of every
  method of a DoFn (about 30) to find state and timer parameters, and pipeline
  construction calls it about 8 times per DoFn, and each worker again for every stage:
  15,000 signatures, ~0.3 s a run. A DoFn class without state or timers (all of ours,
  and Beam's own plain ones) is remembered as such; any other is inspected every time,
  as before.
- **Side inputs sized.** The in-process worker caches the side inputs it reads, and
  sizes each value for its cache with `objsize`, which walks the whole value after
  first collecting every loaded module's globals to leave out: ~6 ms a run however
  small, ~20 ms at 20k trajectories, for values each stage reads once (in-process a
  stage is one bundle). Its cache is sized 0, which Beam reads as none: side inputs
  are decoded as they are read.
- **Option views.** `PipelineOptions.view_as` builds an argument parser of the view's
  class (a hundred-odd arguments) and parses the flags again on every call, and
  construction calls it ~325 times: 75 ms a run. Views of one options object share its
  values, so one view per class is remembered and serves every caller.

Together about 0.6 s of a small incremental `process` run (docs/benchmarks.md). Applied
in the submitting process (`runner.LocalRunner`) and in each worker (`sdk_worker`): not
to workers a portable runner (Flink, Spark, Dataflow) starts, which keep Beam's own.
"""

from __future__ import annotations

import concurrent.futures
import threading
import types
import weakref


def tune_beam() -> None:
    """Idempotent."""
    from apache_beam.options.pipeline_options import PipelineOptions
    from apache_beam.runners.portability.fn_api_runner import worker_handlers
    from apache_beam.runners.worker import bundle_processor, statesampler
    from apache_beam.transforms import core, userstate

    worker_handlers.STATE_CACHE_SIZE_MB = 0  # the in-process worker's, read when it starts

    if not getattr(statesampler.StateSampler.start, "threadless", False):
        _sampler_without_thread(statesampler)
    bundle_processor.concurrent = _INLINE_CONCURRENT
    if not getattr(userstate.get_dofn_specs, "remembers", False):
        userstate.get_dofn_specs = _remembering(userstate.get_dofn_specs)
    if not getattr(PipelineOptions.view_as, "remembers", False):
        PipelineOptions.view_as = _remembering_views(PipelineOptions.view_as)
    if not getattr(core.get_function_args_defaults, "remembers", False):
        core.get_function_args_defaults = _remembering_args(core.get_function_args_defaults)
    if core._check_fn_use_yield_and_return is not _no_source_lint:
        _no_source_lint.beams = core._check_fn_use_yield_and_return
        core._check_fn_use_yield_and_return = _no_source_lint


def _sampler_without_thread(statesampler) -> None:
    """`StateSampler.start`/`stop` as Beam's, less the sampling thread: the tracker is
    set (metrics find the current step's container through it) and the state changes
    are counted; no time is sampled."""

    def start(self) -> None:
        self.tracked_thread = threading.current_thread()
        statesampler.set_current_tracker(self)
        self.started = True

    def stop(self) -> None:
        statesampler.set_current_tracker(None)
        self.finished = True

    start.threadless = True
    statesampler.StateSampler.start, statesampler.StateSampler.stop = start, stop


class _InlineExecutor:
    """What `BundleProcessor.__init__` asks of `concurrent.futures.ThreadPoolExecutor`,
    run in the calling thread (an exception comes back through the future, as before)."""

    def __init__(self, *args, **kwargs) -> None:
        pass

    def __enter__(self) -> _InlineExecutor:
        return self

    def __exit__(self, *exc) -> None:
        return None

    def submit(self, fn, *args, **kwargs) -> concurrent.futures.Future:
        future: concurrent.futures.Future = concurrent.futures.Future()
        try:
            future.set_result(fn(*args, **kwargs))
        except BaseException as exc:
            future.set_exception(exc)
        return future


class _InlineFutures:
    """`concurrent.futures` with `_InlineExecutor` for its thread pool (anything else
    `bundle_processor` may take from it is the real module's)."""

    ThreadPoolExecutor = _InlineExecutor

    def __getattr__(self, name: str):
        return getattr(concurrent.futures, name)


_INLINE_CONCURRENT = types.SimpleNamespace(futures=_InlineFutures())
"""`bundle_processor`'s `concurrent` module as it sees it: its one use is the execution
tree's thread."""


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


def _remembering_args(args_defaults):
    """Each worker builds every stage's operations, and each operation's method wrappers
    ask for the signature of the same few dozen methods: ~1,000 `inspect.signature`
    calls a worker (~15 ms). A plain function's (or a method's) arguments and defaults
    are remembered by function; other callables are asked every time."""
    known: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()

    def get_function_args_defaults(f):
        bound = isinstance(f, types.MethodType)
        fn = f.__func__ if bound else f
        if not isinstance(fn, types.FunctionType):
            return args_defaults(f)
        seen = known.setdefault(fn, {})
        if bound not in seen:
            seen[bound] = args_defaults(f)
        args, defaults = seen[bound]
        return list(args), list(defaults)  # callers own the lists they get

    get_function_args_defaults.remembers = True
    return get_function_args_defaults


def _no_source_lint(fn) -> bool:
    """Beam reads the source of every DoFn's `process` when a ParDo is built, to warn of
    a method that both yields and returns values (~20 ms of every run's construction).
    The pipeline here is fixed and none of its methods does
    (`tests/pipelines/test_tuning.py`), so the answer is no without reading."""
    return False
