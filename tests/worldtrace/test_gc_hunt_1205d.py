"""Found (2026-12-05, d): `gc --dry-run` said nothing of a leftover it kept for being too
recent (a `.run-*` directory of a `process` killed with -9 seconds before) or open in a
live process: `garbage.find` dropped it, although the help promises each item with its
size and why. Such items are now listed as kept, saying why.

Real parts: the `worldtrace` command in a subprocess, real files, a real process holding
a file open."""

from __future__ import annotations

import re
import subprocess

from .test_gc import aged, wt


def test_gc_lists_what_it_keeps_for_its_age_or_a_live_holder(store, wt_env):
    run_dir = store.processed / ".run-20261205T100000-0123abcd"  # `process` killed with -9
    (run_dir / "trajectories").mkdir(parents=True)
    (run_dir / "trajectories" / "x.parquet").write_bytes(b"\0" * 5000)
    aged(run_dir, 3)
    held = store.raw / "s" / ".tmp-111111111111-00000.parquet"
    held.parent.mkdir(parents=True)
    held.write_bytes(b"PAR1" + b"\0" * 2000)
    aged(held, 2 * 3600)
    with open(held, "rb") as fh:  # then only the child holds it open
        holder = subprocess.Popen(["sleep", "120"], stdin=fh)
    try:
        for dry in (["--dry-run"], []):
            r = wt(wt_env, "gc", "--store", str(store.root), "--no-containers", *dry)
            assert r.returncode == 0, r.stderr
            lines = r.stdout.splitlines()
            [young] = [ln for ln in lines if f"  {run_dir}  (" in ln]
            assert young.startswith("kept") and "5.0 kB" in young, young
            assert re.search(r"\(kept: untouched for \d+s \(< --min-age 1h\)", young), young
            assert "work directory of a `process` run" in young, young
            [busy] = [ln for ln in lines if f"  {held}  (" in ln]
            assert busy.startswith("kept") and "(kept: open in a running process" in busy, busy
            assert "gc: 0 item(s)" in r.stderr or "gc: removed 0 item(s)" in r.stderr
            assert run_dir.exists() and held.exists()
    finally:
        holder.kill()
        holder.wait()
