# Stormwatch: `make run` runs the product, `make test` runs every test.
SHELL := /bin/bash
PY := .venv/bin/python
export PYTHONPATH := $(CURDIR)/backend

.PHONY: run test fmt lint bench bench-ingest bench-agent bench-query bench-ui bench-rollups bench-advisors bench-alerts bench-demo bench-throughput bench-storage bench-paths client bootstrap soak

run:
	@scripts/run.sh

test:
	@scripts/test.sh

bootstrap:
	@scripts/bootstrap.sh test

# The full stack under a fault injector for SOAK_MINUTES (docs/operations.md, "Soak run");
# SOAK_SEED replays a run's faults.
SOAK_MINUTES ?= 30
soak: bootstrap
	$(PY) -m stormwatch.devtools.soak --minutes $(SOAK_MINUTES) $(if $(SOAK_SEED),--seed $(SOAK_SEED))

fmt: bootstrap
	$(PY) -m ruff format backend migrations bench
	$(PY) -m ruff check --fix backend migrations bench
	cd agents && gofmt -w .

# The same gate as the lint suite of `make test`.
lint: bootstrap
	@scripts/lint.sh

# Regenerates the typed UI client from the API's OpenAPI schema.
client: bootstrap
	$(PY) -c "import json; from stormwatch.main import app; print(json.dumps(app.openapi(), indent=1))" > frontend/openapi.json
	cd frontend && npm run client

bench: bench-ingest bench-agent bench-query bench-ui bench-rollups bench-advisors bench-alerts bench-throughput

bench-ingest: bootstrap
	$(PY) bench/ingest/run.py

bench-agent:
	bench/agent/run.sh

# The agent's TCP throughput probe beside nuttcp on loopback, with the mesh running (docs/agents.md).
bench-throughput:
	bench/throughput/run.sh

bench-rollups: bootstrap
	$(PY) bench/rollups/backlog.py

bench-query: bootstrap
	bench/query/run.sh

bench-ui: bootstrap
	bench/ui/run.sh

bench-advisors: bootstrap
	$(PY) bench/advisors/run.py

bench-alerts: bootstrap
	$(PY) bench/alerts/run.py

# Bytes per raw sample on each engine installed, for an hour of StormCloud's base workload
# (issue 19); BENCH_STORAGE_ARGS="--minutes 10" for a shorter load.
bench-storage: bootstrap
	$(PY) bench/storage/run.py $(BENCH_STORAGE_ARGS)

# What path tracing costs the mesh, on a routed chain of network namespaces (docs/paths.md).
bench-paths:
	bench/paths/run.sh

# The demo fleet's cost over 5 minutes of a steady `make run` (docs/demo.md).
bench-demo: bootstrap
	bench/demo/run.sh
