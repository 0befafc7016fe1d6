# Samsa: everything a developer or CI runs.  `make setup` then `make test` on a fresh Debian.
SHELL := /bin/bash
UV ?= uv
PYTEST ?= $(UV) run pytest
export UV_LINK_MODE ?= copy

.PHONY: setup setup-apt setup-python test test-fast lint format demo bench bench-quick docs clean help

help:
	@echo "make setup   install system packages (apt) and the Python workspace (uv)"
	@echo "make test    lint, then every test (slow fault tests included)"
	@echo "make lint    ruff, mypy, import-linter contracts"
	@echo "make demo    a local broker, a topic, records produced and consumed"
	@echo "make bench   Samsa beside NATS JetStream and Redis Streams; rewrites docs/benchmarks.md"
	@echo "make bench-quick  the same, small and once (< 2 min), tables only"

setup: setup-apt setup-python

# zookeeper: the real server for cluster tests; kcat: a real client; a JRE for both;
# nats-server and redis-server: the peers `make bench` runs beside Samsa.
APT_PACKAGES := zookeeper kcat default-jre-headless nats-server redis-server

setup-apt:
	@if command -v apt-get >/dev/null; then \
	  missing=""; \
	  for p in $(APT_PACKAGES); do \
	    dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; \
	  done; \
	  if [ -n "$$missing" ]; then \
	    SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	    $$SUDO apt-get update -qq && \
	    DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq --no-install-recommends $$missing; \
	  fi; \
	else echo "no apt-get: install $(APT_PACKAGES) yourself"; fi

setup-python:
	@command -v $(UV) >/dev/null || python3 -m pip install --quiet uv || pip install --quiet uv
	$(UV) sync --all-packages --frozen

lint:
	$(UV) run ruff check .
	$(UV) run ruff format --check .
	$(UV) run mypy broker_image/samsa bench
	$(UV) run lint-imports

format:
	$(UV) run ruff format .
	$(UV) run ruff check --fix .

test: lint
	$(PYTEST) -q -p no:cacheprovider -n 2 --dist loadfile

test-fast:
	$(PYTEST) -q -x -m "not slow" -n 2 --dist loadfile

demo:
	$(UV) run python examples/demo.py

# The full run (3 repetitions, about 20 minutes) rewrites docs/benchmarks.md and its plots.
bench:
	$(UV) run python -m bench --docs docs

bench-quick:
	$(UV) run python -m bench --quick

docs:
	$(UV) run python -m samsa.handlers.docs > docs/protocol.md

clean:
	rm -rf .pytest_cache .mypy_cache .ruff_cache build dist
