"""`python -m worldtrace.pipelines.worker_pool --service_port=N [--host H]`: Beam's SDK
worker pool (`apache_beam.runners.worker.worker_pool_main`) bound to one interface.

A worker pool starts an SDK worker for whoever asks, connected to the control endpoint
the caller names, which then runs the pipeline code the caller sends. Beam binds the
pool to every interface, so any host that reaches the port could run code here. This
one binds loopback (`--host localhost`, the default); give another address only on a
private network, where the runner's hosts must reach it (infra/runners.md).
"""

from __future__ import annotations

import argparse
import sys

from apache_beam.runners.worker import worker_pool_main

from .runner import BoundGrpc


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--host", default="localhost")
    args, rest = parser.parse_known_args(sys.argv[1:] if argv is None else argv)
    worker_pool_main.grpc = BoundGrpc(worker_pool_main.grpc, args.host)
    worker_pool_main.main(rest)


if __name__ == "__main__":
    main()
