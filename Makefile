SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c

# Extra flags for go test, e.g. make test TESTFLAGS='-race -run TestFoo'
TESTFLAGS ?=
SERVICES := bash scripts/services.sh
# Prefix for recipes that need SWITCHYARD_* URLs of the local services.
WITH_ENV := eval "$$($(SERVICES) env)";

.PHONY: all services services-stop build test demo fmt vet lint-openapi clean clean-services
.PHONY: web test-e2e
.PHONY: chaos chaos-short
.PHONY: bench bench-quick

all: build

services:
	$(SERVICES) start

services-stop:
	$(SERVICES) stop

build:
	go build -o bin/switchyard ./cmd/switchyard

test: services
	$(WITH_ENV) go test -count=1 $(TESTFLAGS) ./...

# Server in the background, producer in the foreground; the EXIT trap stops the
# server with SIGTERM (and waits for it) whether the demo ends or is interrupted.
# Run from a terminal, a demo that finished keeps the server (and so the
# dashboard) up until Ctrl-C; without a terminal, or under CI, it stops at once.
# The demo's API token; the dashboard and CLI examples printed below use it.
DEMO_TOKEN ?= switchyard-demo-token
DEMO_PORT ?= 8080

demo: services build
	$(WITH_ENV) \
	export SWITCHYARD_API_TOKENS="demo:admin:$(DEMO_TOKEN)"; \
	mkdir -p .local; \
	bin/switchyard migrate up; \
	bin/switchyard serve --demo-handlers --http-addr 127.0.0.1:$(DEMO_PORT) >.local/serve.log 2>&1 & \
	pid=$$!; echo "$$pid" >.local/serve.pid; \
	trap 'exit 130' INT TERM; \
	stay() { [[ -t 0 && -t 1 && -z "$${CI:-}" ]] || return 0; trap : INT TERM; echo; echo "demo: done; the dashboard stays up at http://127.0.0.1:$(DEMO_PORT)/ (token $(DEMO_TOKEN)); Ctrl-C stops the server"; wait $$pid || true; }; \
	trap 'rc=$$?; if [[ $$rc == 0 ]]; then stay; fi; kill -TERM $$pid 2>/dev/null || true; wait $$pid || true; rm -f .local/serve.pid' EXIT; \
	echo "demo: server pid $$pid, log .local/serve.log, API http://127.0.0.1:$(DEMO_PORT) (token $(DEMO_TOKEN))"; \
	echo "demo: dashboard http://127.0.0.1:$(DEMO_PORT)/ (sign in with the token $(DEMO_TOKEN))"; \
	bin/switchyard demo; \
	echo; echo "The server's view, through the HTTP API (switchyard queue list / workers):"; \
	export SWITCHYARD_URL=http://127.0.0.1:$(DEMO_PORT) SWITCHYARD_TOKEN=$(DEMO_TOKEN); \
	bin/switchyard queue list; echo; bin/switchyard workers

fmt:
	go fmt ./...

vet:
	go vet ./...

# Lint the API's OpenAPI document with Redocly CLI, pinned (rules in
# redocly.yaml). npx fetches the CLI into npm's cache once. Where npx is
# missing, Node.js and npm are installed from Debian (as root; Debian 12's
# Node.js 18 is older than the >= 20.19 the CLI asks for, so prefer a
# machine that ships Node.js 20, as this project's do).
REDOCLY_CLI := @redocly/cli@2.77.0

lint-openapi:
	if ! command -v npx >/dev/null 2>&1; then \
		echo "lint-openapi: npx not found; installing nodejs npm"; \
		export DEBIAN_FRONTEND=noninteractive; \
		apt-get update -q && apt-get install -y -q --no-install-recommends nodejs npm; \
	fi
	REDOCLY_TELEMETRY=off REDOCLY_SUPPRESS_UPDATE_NOTICE=true npx --yes $(REDOCLY_CLI) lint api/openapi.yaml

# The dashboard (package web) has no build step: web/static is the source,
# embedded as it is by go build. This checks the module parses and builds
# bin/switchyard with the assets.
web:
	node --check web/static/app.js
	go build -o bin/switchyard ./cmd/switchyard

# Browser tests of the dashboard (web/e2e, node's test runner): Debian's
# Chromium, driven by playwright-core (pinned in web/e2e/package-lock.json),
# against a `switchyard serve` the tests start on a fresh database. They also
# refresh docs/dashboard-overview.png and docs/dashboard-workflow.png.
# Chromium, the Inter font of the screenshots and Node.js are installed from
# Debian when missing (as root).
test-e2e: services build
	missing=(); \
	command -v chromium >/dev/null 2>&1 || missing+=(chromium); \
	fc-list : family 2>/dev/null | grep -q '^Inter' || missing+=(fonts-inter); \
	command -v npm >/dev/null 2>&1 || missing+=(nodejs npm); \
	if (( $${#missing[@]} )); then \
		echo "test-e2e: installing $${missing[*]}"; \
		export DEBIAN_FRONTEND=noninteractive; \
		apt-get update -q && apt-get install -y -q --no-install-recommends "$${missing[@]}"; \
	fi
	cd web/e2e && npm ci --no-audit --no-fund
	$(WITH_ENV) cd web/e2e && SWITCHYARD_BIN="$(CURDIR)/bin/switchyard" node --test --test-concurrency=1

clean:
	rm -rf bin

clean-services: services-stop
	rm -rf .local

# The chaos suite (package chaos; README, "Delivery guarantee and recovery"):
# worker pods as real processes against the suite's own Postgres and Redis
# (scripts/chaos-services.sh: .local/chaos, ports 25442 and 26389, never the
# shared instances), pods SIGKILLed and Redis and Postgres restarted under
# load, then a check in the database that nothing was lost or completed twice
# (non-zero exit otherwise). The EXIT trap stops the suite's services, and any
# pod a crashed run left behind, however the run ends.
CHAOS_DURATION ?= 10m
CHAOS_SHORT_DURATION ?= 90s
CHAOS_PODS ?= 3
CHAOS_RATE ?= 50
CHAOS_WORKFLOW_RATE ?= 2
CHAOS_KILL_EVERY ?= 20s
CHAOS_REDIS_RESTART_EVERY ?= 45s
CHAOS_PG_RESTART_EVERY ?= 90s
CHAOS_PAUSE_EVERY ?= 0
CHAOS_SEED ?= 0
CHAOS_FLAGS ?=
CHAOS_RUN = trap 'bash scripts/chaos-services.sh stop >/dev/null 2>&1 || true' EXIT; \
	bin/switchyard chaos --pods $(CHAOS_PODS) --rate $(CHAOS_RATE) --workflow-rate $(CHAOS_WORKFLOW_RATE) --seed $(CHAOS_SEED)

# Random fault times (mean intervals above), 10 minutes by default. Pauses
# (SIGSTOP of a pod for 6s, then SIGCONT) are opt-in: CHAOS_PAUSE_EVERY=30s.
chaos: build
	$(CHAOS_RUN) --duration $(CHAOS_DURATION) --kill-every $(CHAOS_KILL_EVERY) \
		--redis-restart-every $(CHAOS_REDIS_RESTART_EVERY) --pg-restart-every $(CHAOS_PG_RESTART_EVERY) \
		--pause-every $(CHAOS_PAUSE_EVERY) $(CHAOS_FLAGS)

# CI's run: 90s of production on a fixed schedule with every fault kind
# (kills at 10s, 32s, 53s, 72s; Redis restarts at 19s, 49s, 79s; Postgres
# restarts at 28s, 68s), then the drain and the checks: about two minutes.
chaos-short: build
	$(CHAOS_RUN) --duration $(CHAOS_SHORT_DURATION) --fixed --kill-every 20s \
		--redis-restart-every 30s --pg-restart-every 40s $(CHAOS_FLAGS)

# Benchmarks against raw River in the same run (README, "Performance"), on the
# local Postgres and Redis, each scenario in databases of its own (created and
# dropped by the run). BENCH_FLAGS adds flags, e.g. BENCH_FLAGS='--json
# bench.json' or '--scenarios throughput,latency'. About ten minutes; the
# quick set about two.
BENCH_FLAGS ?=

bench: services build
	$(WITH_ENV) bin/switchyard bench $(BENCH_FLAGS)

bench-quick: services build
	$(WITH_ENV) bin/switchyard bench --quick $(BENCH_FLAGS)
