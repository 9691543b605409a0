"""Found (12-04 Android hunt, left then): trajectories collected from the device simulator
(worldtrace's own apps: the pipeline's test data) were exported like a real device's,
counted nowhere and said by no warning, while the generator's synthetic records are
(`counts.synthetic_*`). The export counts them and says so, with the `--where` that
leaves them out (docs/android.md)."""

from __future__ import annotations

import json

from worldtrace.collectors.jobs import JobSpec, run_job
from worldtrace.pipelines.process import ProcessConfig, run
from worldtrace.sandboxes.android_sim import demo_jobs

from ..worldtrace.test_query import run_cli

NO_SIM = "json_extract_string(environment.config, '$.model') IS DISTINCT FROM 'WorldTrace Simulator'"  # fmt: skip


def test_an_export_counts_and_names_the_simulators_trajectories(sim, store, tmp_path):
    scripted, _ = demo_jobs(sim.adb, sim.serial)
    [t] = run_job(JobSpec.from_dict(scripted), store.raw).trajectories
    assert t.outcome.status == "success"
    run(ProcessConfig(inputs=[str(store.raw)], output=str(store.processed), workers=1))
    r = run_cli(store, "export", "-o", str(tmp_path / "all"))
    assert r.exit_code == 0, r.output
    m = json.loads((tmp_path / "all" / "manifest.json").read_text())
    assert m["counts"]["simulated_trajectories"] == m["counts"]["trajectories"] == 1
    assert (
        "warning: 1 of 1 trajectories come from the Android device simulator (model "
        "WorldTrace Simulator): the pipeline's test data, not a real device's answers"
    ) in r.output
    assert f'--where "{NO_SIM}" leaves them out' in r.output
    # the --where it names leaves them out: nothing from the simulator, nothing said
    r = run_cli(store, "export", "-o", str(tmp_path / "nosim"), "--where", NO_SIM)
    assert "simulator" not in r.output
