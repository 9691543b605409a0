"""The local Beam runner: Beam's FnApiRunner, asked for by name.

Beam's `DirectRunner` first tries the Prism runner. With network it downloads a Go
binary from GitHub and runs the pipeline on it, so the runner would depend on the
machine's network. Without network it falls back to the FnApiRunner, but leaves a gRPC
worker pool listening on every interface and temporary directories behind, one set per
run. `process` therefore asks for the FnApiRunner itself: the same runner everywhere,
nothing left running after a run.

With more than one worker the workers are processes started through
`worldtrace.pipelines.sdk_worker`, which keeps Beam's start-up log lines off the user's
terminal (the workers' logs still reach the runner over the Fn API logging service).
"""

from __future__ import annotations

import sys

from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.portability import python_urns
from apache_beam.portability.api import beam_provision_api_pb2
from apache_beam.runners.portability.fn_api_runner import fn_runner

LOCAL_RUNNERS = ("DirectRunner", "direct")
"""The `--runner` names `process` runs with `LocalRunner`."""
WORKER_MODULE = "worldtrace.pipelines.sdk_worker"


class LocalRunner(fn_runner.FnApiRunner):
    """FnApiRunner whose worker processes start through `WORKER_MODULE`."""

    def __init__(self, options: PipelineOptions):
        from apache_beam.runners.portability.portable_runner import JobServiceHandle

        # what the DirectRunner hands the FnApiRunner: the options the workers read
        encoded = JobServiceHandle.encode_pipeline_options(options.get_all_options())
        info = beam_provision_api_pb2.ProvisionInfo(pipeline_options=encoded)
        super().__init__(provision_info=fn_runner.ExtendedProvisionInfo(info))

    def run_via_runner_api(self, pipeline_proto, options):
        command = f"{sys.executable} -m {WORKER_MODULE}".encode()
        for env in pipeline_proto.components.environments.values():
            if env.urn == python_urns.SUBPROCESS_SDK:
                env.payload = command
        return super().run_via_runner_api(pipeline_proto, options)
