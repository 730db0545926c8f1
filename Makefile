# One task runner. `make demo` and `make test` do all set-up on a fresh machine.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: setup demo test test-browser browser-deps test-unit test-clocks drills fuzz-api lint typecheck bench bench-http bench-lifecycle bench-policy-check engine-start engine-stop clean

setup: $(STAMP) local_engine/target/classpath.txt

$(STAMP): pyproject.toml
	@command -v java >/dev/null || { echo "Java 17 is required: apt-get install -y openjdk-17-jdk-headless maven"; exit 1; }
	@command -v mvn >/dev/null || { echo "Maven is required: apt-get install -y maven"; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q -U pip
	$(BIN)/pip install -q -e '.[dev]'
	touch $(STAMP)

local_engine/target/classpath.txt: local_engine/pom.xml $(wildcard local_engine/src/main/java/dev/govsearch/engine/*.java)
	cd local_engine && mvn -B -q package -DskipTests && touch target/classpath.txt

demo: setup
	$(BIN)/govsearch demo

test: setup browser-deps
	$(BIN)/pytest

# The console in Debian's chromium through chromedriver (Selenium; nothing downloaded at run
# time). Also part of `make test`. Its screenshots go to a temporary directory; refresh the
# documentation's with `GOVSEARCH_CONSOLE_SHOTS=docs/console make test-browser`.
test-browser: setup browser-deps
	$(BIN)/pytest -q -m browser

browser-deps:
	@command -v chromium >/dev/null && command -v chromedriver >/dev/null || \
	  { apt-get update -qq && apt-get install -y -qq chromium chromium-driver; }

test-unit: setup
	$(BIN)/pytest -m "not engine"

# schemathesis over the served OpenAPI document, no key and an admin key, on the real
# engine: no 5xx (also part of `make test`). GOVSEARCH_FUZZ_EXAMPLES raises the bound.
fuzz-api: setup
	$(BIN)/pytest -q -m fuzz tests/api/test_schemathesis.py

# The suite under moved wall clocks (time-machine): the pure tests with no engine reachable
# (an unmarked engine test would fail), then the policy suites and the time drills on the
# engine. Fixtures pin their own instant, so every run must pass.
CLOCKS ?= 2026-12-25T12:00:00Z 2027-01-10T12:00:00Z
test-clocks: setup
	@for at in $(CLOCKS); do \
	  echo "== wall clock at $$at"; \
	  GOVSEARCH_TEST_TRAVEL=$$at GOVSEARCH_ENGINE_URL=http://127.0.0.1:9 $(BIN)/pytest -q -m "not engine and not drill" || exit 1; \
	  GOVSEARCH_TEST_TRAVEL=$$at $(BIN)/pytest -q tests/policies tests/lifecycle/test_time_as_input.py || exit 1; \
	done

# The drills (races, tampering, killed or paused engines, chunked bodies, three nodes), with
# their figures written to bench/results/drills/<name>.json.
drills: setup
	GOVSEARCH_DRILL_RESULTS=1 $(BIN)/pytest -q -m drill

lint: setup
	$(BIN)/ruff check control_plane agent_gateway tests bench

typecheck: setup
	$(BIN)/mypy control_plane agent_gateway bench

# The figure sheet (bench/README.md): every part in one run against one engine, one JSON in
# bench/results/, the plot next to it, the Markdown sheet with issue 14's targets on stdout.
# SIZES: policy-set sizes of percolation and tooling (default 1000,10000,100000 and 10000,100000),
# e.g. SIZES=1000,10000; PARTS: a subset of compose,governed,http,percolation,tooling.
SIZES ?=
PARTS ?=
bench: setup
	$(BIN)/python -m bench.run $(if $(SIZES),--sizes $(SIZES)) $(if $(PARTS),--parts $(PARTS))

bench-http: setup
	$(BIN)/python -m bench.http

bench-lifecycle: setup
	$(BIN)/python -m bench.lifecycle

bench-policy-check: setup
	$(BIN)/python -m bench.policy_check

engine-start: setup
	$(BIN)/govsearch engine start

engine-stop:
	$(BIN)/govsearch engine stop

clean:
	rm -rf $(VENV) local_engine/target .govsearch
