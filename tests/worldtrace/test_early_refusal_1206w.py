"""`process` on a store another command holds is refused before it loads Beam (left by
the 12-06 notes): the refusal came from the run's own lock, after the imports of the
pipeline, 3-9 s under load of a user waiting to hear "run again later". The console
script is run under `-X importtime`, which lists every module the command loaded."""

from __future__ import annotations

import os

import pytest
from worldtrace.schemas import Store
from worldtrace.schemas import fields as F
from worldtrace.schemas.publish import reading
from worldtrace.schemas.tempfiles import try_lock

from .test_no_pandas_1206w import loaded_by


def beam(loaded: set[str]) -> set[str]:
    """The modules of Beam among `loaded` (`loaded_by`)."""
    return {m for m in loaded if m.split(".")[0] == "apache_beam"}


@pytest.mark.parametrize("holder", ["export", "process"])
def test_a_held_store_refuses_process_before_beam_loads(wt_env, holder):
    store = Store.at(wt_env["WORLDTRACE_STORE"])
    store.processed.mkdir(parents=True)
    lock = store.processed / F.PROCESS_LOCK
    if holder == "export":  # as an export holds it while it reads
        held = reading(store.processed)
        said = f"a `worldtrace export` is reading this store (pid {os.getpid()}:"
    else:
        fh = try_lock(lock)
        fh.write(f"pid {os.getpid()} on this host, since now\n")
        fh.flush()
        held = fh
        said = f"another `worldtrace process` is writing this store (pid {os.getpid()} on"
    with held:
        r, loaded = loaded_by(wt_env, "process")
    assert r.returncode == 1, r.stderr[-2000:]
    assert said in r.stderr and "run again when it has finished" in r.stderr, r.stderr[-2000:]
    assert "worldtrace.schemas.publish" in loaded  # the listing is the command's own
    assert not beam(loaded)
    # and the store is free again: the run goes on to Beam (refused then for no input)
    r, loaded = loaded_by(wt_env, "process")
    assert "apache_beam" in loaded, r.stderr[-2000:]
