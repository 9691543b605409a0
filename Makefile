# worldtrace: `make demo` and `make test` each run the (idempotent) set-up first.
VENV := .venv
PY := $(VENV)/bin/python
WT := $(VENV)/bin/worldtrace
PYTEST_WORKERS ?= -n 2 --dist worksteal
PYTEST_ARGS ?= --durations=25

.PHONY: setup demo test lint format bench clean

setup:
	bash infra/setup.sh

demo: setup
	$(WT) demo

test: setup
	$(PY) -m pytest $(PYTEST_WORKERS) $(PYTEST_ARGS)

lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

format:
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .

bench: setup
	$(PY) -m benchmarks.run --output bench-results.md

clean:
	rm -rf worldtrace-data worldtrace-demo bench-results.md .pytest_cache
