SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c

# Extra flags for go test, e.g. make test TESTFLAGS='-race -run TestFoo'
TESTFLAGS ?=
SERVICES := bash scripts/services.sh
# Prefix for recipes that need SWITCHYARD_* URLs of the local services.
WITH_ENV := eval "$$($(SERVICES) env)";

.PHONY: all services services-stop build test demo fmt vet lint-openapi clean clean-services

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
	trap 'kill -TERM $$pid 2>/dev/null || true; wait $$pid || true; rm -f .local/serve.pid' EXIT; \
	trap 'exit 130' INT TERM; \
	echo "demo: server pid $$pid, log .local/serve.log, API http://127.0.0.1:$(DEMO_PORT) (token $(DEMO_TOKEN))"; \
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

clean:
	rm -rf bin

clean-services: services-stop
	rm -rf .local
