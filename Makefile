# Two entry points for a fresh machine:
#   make demo   -> creates .venv, installs, runs the hello example (Python 3.11+ and make)
#   make test   -> creates .venv, installs, gets the observer test's browser (make browser)
#                  and Node.js with npm (make node), runs ruff, mypy, the test suite
#                  (every folder of tests/ but tests/serve_api and tests/ui) and the
#                  serve_api conformance suite against `hayata serve` (make test-serve)
# and one for every change: make test-quick -> tests/unit alone, in under a minute.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: demo test test-quick browser node test-ui lint typecheck pytest bench bench-memory bench-memory-500 bench-memory-floor bench-map bench-service bench-callers bench-langgraph-runner bench-serve bench-lane chaos soak soak-agents docs clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

demo: $(STAMP)
	$(PY) examples/hello.py

lint: $(STAMP)
	$(PY) -m ruff check hayata_py supervisors tests examples benchmarks

typecheck: $(STAMP)
	$(PY) -m mypy

# The observer's browser test drives Chromium through chromedriver: found on
# PATH, else (as root with apt-get) Debian's chromium and chromium-driver are
# installed, else Selenium Manager downloads them; otherwise this stops, before
# the suite, with one line saying what to install (tests/browser.py).
browser: $(STAMP)
	@$(PY) -m tests.browser

# The JS client test (tests/serve/test_js_sdk.py) runs LangGraph's JS SDK on
# Node.js: node and npm found on PATH, else (as root with apt-get) Debian's
# nodejs and npm are installed; otherwise this stops, before the suite, with
# one line saying what to install (tests/node.py). The test itself installs
# its npm packages (npm ci, skipped while node_modules matches the lock).
node: $(STAMP)
	@$(PY) -m tests.node

# The whole suite, every folder of tests/ (pyproject's testpaths): unit, runtime,
# supervisors, cli, examples, store and chaos. Two workers (pytest-xdist): the
# suite's tests mostly wait on actor processes. PYTEST_WORKERS=0 runs it in this
# one process.
PYTEST_WORKERS ?= 2
pytest: $(STAMP) browser node
	$(PY) -m pytest -n $(PYTEST_WORKERS)

# The quick suite: tests/unit, the tests that start no process and reach no
# database server (tests/unit/conftest.py fails one that does), in under a
# minute on two cores. In this one process: two workers would each import
# everything again, which costs more than they save here.
test-quick: $(STAMP)
	$(PY) -m pytest tests/unit -n 0

# The browser and node first: a machine that cannot have them stops at once.
test: browser node lint typecheck pytest test-serve

# The Agent Server API conformance suite (tests/serve_api) against LangGraph's
# own local server: starts `langgraph dev` on a loopback port from a venv of
# its own (LGDEV_VENV, made and installed if missing; never the project's),
# runs the suite with the langgraph-sdk client, stops the server. Against
# another server: `pytest tests/serve_api --server-url URL`.
LGDEV_VENV ?= .venv-langgraph-dev
# The same suite against `hayata serve` (the last step of `make test`, about a
# minute): starts it on a free loopback port with a temporary data dir, runs the
# suite, stops the server and its actors.
.PHONY: test-serve
test-serve: $(STAMP)
	$(PY) -m tests.serve.launch

# agent-chat-ui (create-agent-chat-app's vite template, from npm) against
# `hayata serve` in headless Chromium: builds the app once into tests/ui/.cache
# (rebuilt when tests/ui/app or the template version changes), serves it on
# loopback and drives it with Selenium (tests/ui). Not part of `make test`.
test-ui: $(STAMP) browser node
	$(PY) -m pytest tests/ui -n 0

.PHONY: test-serve-reference
test-serve-reference: $(STAMP)
	$(PY) -m tests.serve_api.reference --venv $(LGDEV_VENV)

bench: $(STAMP)
	$(PY) -m pip install --quiet -e '.[dev,bench]'
	$(PY) -m benchmarks

# Memory of idle agents (not part of `make test`): PSS/USS per process role,
# 50 agents after 100 runs each, and private-memory growth over 50 runs more.
bench-memory: $(STAMP)
	$(PY) -m benchmarks.bench_memory --agents 50 --runs 100 --growth-runs 50

# 500 idle 3-node agents, each then answers one run (stops early, and says so,
# if the machine runs low on memory).
bench-memory-500: $(STAMP)
	$(PY) -m benchmarks.bench_memory --scale 500

# The floor: USS/PSS of the cheapest actor process (a Thespian actor that only
# answers pings, forked like the runtime's), times an agent's processes.
bench-memory-floor: $(STAMP)
	$(PY) -m benchmarks.bench_memory_floor

# A map step of 100, 1,000 and 10,000 trivial items side by side with LangGraph
# Send (hayata_py stays linear in the item count); writes benchmarks/results/map.json.
bench-map: $(STAMP)
	$(PY) -m pip install --quiet -e '.[dev,bench]'
	$(PY) -m benchmarks.bench_map --items 100,1000,10000 --samples 2

# LangGraph graphs through hayata_py.langgraph side by side with LangGraph's own
# runtime (SqliteSaver, durability="sync"): seq3, fanout8, a ReAct loop, and
# 1,000 threads through an async 200 ms model node; writes
# benchmarks/results/langgraph_runner.json. E.g. BENCH_LG_RUNNER_ARGS=--quick.
BENCH_LG_RUNNER_ARGS ?=
bench-langgraph-runner: $(STAMP)
	$(PY) -m pip install --quiet -e '.[dev,bench]'
	$(PY) -m benchmarks.bench_langgraph_runner $(BENCH_LG_RUNNER_ARGS)

# Agents as services: C conversations at once on one agent
# (max_invocations=C) vs one compiled LangGraph graph (AsyncSqliteSaver),
# C = 100, 1,000, 10,000 with a 200 ms llm step and 1,000 with 0 ms; writes
# benchmarks/results/service.json. E.g. BENCH_SERVICE_ARGS=--quick.
BENCH_SERVICE_ARGS ?=
bench-service: $(STAMP)
	$(PY) -m pip install --quiet -e '.[dev,bench]'
	$(PY) -m benchmarks.bench_service $(BENCH_SERVICE_ARGS)

# Many blocking callers at once: C threads each calling agent.invoke beside C
# invoke calls of the asyncio API (asyncio.gather), C = 1,000 and 3,000, an
# async 200 ms llm step; writes benchmarks/results/callers.json.
# E.g. BENCH_CALLERS_ARGS="--callers 1000 --runs 1".
BENCH_CALLERS_ARGS ?=
bench-callers: $(STAMP)
	$(PY) -m benchmarks.bench_callers $(BENCH_CALLERS_ARGS)

# A message hop between two actor processes: Thespian's send against a Unix
# socket of their own watched in the same actor loop (a lever measured, not
# built); writes benchmarks/results/lane.json.
bench-lane: $(STAMP)
	$(PY) -m benchmarks.bench_lane

# The same graph served by `langgraph dev` (from LGDEV_VENV, made if missing)
# and by `hayata serve`, the same langgraph-sdk load on both, rounds
# alternating: 1,000 streamed runs, 10,000 background runs, then a kill -9 of
# each server mid-load and a restart (runs lost, nodes run twice, streams
# resumed); writes benchmarks/results/serve/bench_serve.json and .txt.
# E.g. BENCH_SERVE_ARGS=--quick, or --runs 1000 --rounds 1.
BENCH_SERVE_ARGS ?=
bench-serve: $(STAMP)
	$(PY) -m pip install --quiet -e '.[dev,bench,serve]'
	$(PY) -m benchmarks.bench_serve --venv $(LGDEV_VENV) $(BENCH_SERVE_ARGS)

# The long chaos campaign (>= 1,000 faults on SQLite and PostgreSQL); figures in
# benchmarks/results/chaos/. FAULTS_PER_KIND=100 gives 5 kinds x 2 stores x 100;
# then the concurrent mode (8-32 invocations of one service agent in flight per
# fault; CONCURRENT_FAULTS_PER_KIND=30: 5 kinds x 2 stores x 30) and the
# whole-system kill drill with DRILL_INVOCATIONS in flight on both stores.
FAULTS_PER_KIND ?= 100
CONCURRENT_FAULTS_PER_KIND ?= 30
DRILL_INVOCATIONS ?= 1000
chaos: $(STAMP)
	$(PY) -m benchmarks.chaos --faults-per-kind $(FAULTS_PER_KIND)
	$(PY) -m benchmarks.chaos --concurrent --faults-per-kind $(CONCURRENT_FAULTS_PER_KIND)
	$(PY) -m benchmarks.chaos --drill $(DRILL_INVOCATIONS)

# Soak: one service agent, 500 conversations with 100 in flight at a time, for
# SOAK_MINUTES; memory, fds and processes sampled every 10 s must stay flat after
# warm-up (benchmarks/results/soak_service.json). soak-agents: 200 agents from
# threads, asyncio and the CLI at once (benchmarks/results/chaos/soak.json).
SOAK_MINUTES ?= 10
soak: $(STAMP)
	$(PY) -m benchmarks.soak_service --minutes $(SOAK_MINUTES)

soak-agents: $(STAMP)
	$(PY) -m benchmarks.soak --agents 200 --minutes $(SOAK_MINUTES)

# The reference docs in site/ (MkDocs + mkdocstrings); --strict turns every
# warning (a broken link, a renamed function) into a failure. (Not --quiet:
# it hides the warnings from the strict count.)
docs: $(STAMP)
	$(PY) -m pip install --quiet -e '.[docs]'
	$(PY) -m mkdocs build --strict

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache site
