"""One measurement per process: `python -m benchmarks.measure MODULE TASK ARGS...` prints JSON."""

from __future__ import annotations

import importlib
import json
import logging
import sys

if __name__ == "__main__":
    logging.getLogger().setLevel(logging.ERROR)
    module = importlib.import_module(f"benchmarks.{sys.argv[1]}")
    print(json.dumps(module.TASKS[sys.argv[2]](*sys.argv[3:])))
