# Samsa: everything a developer or CI runs.  `make setup` then `make test` on a fresh Debian.
SHELL := /bin/bash
UV ?= uv
PYTEST ?= $(UV) run pytest
export UV_LINK_MODE ?= copy

.PHONY: setup setup-apt setup-python test test-fast lint format demo bench bench-quick docs spark-image e2e clean help

help:
	@echo "make setup   install system packages (apt) and the Python workspace (uv)"
	@echo "make test    lint, then every test (slow fault tests included)"
	@echo "make lint    ruff, mypy, import-linter contracts"
	@echo "make demo    a local broker, a topic, records produced and consumed"
	@echo "make bench   benchmarks (figures printed, never asserted)"
	@echo "make spark-image  the Spark image with samsa_spark (needs Docker)"

setup: setup-apt setup-python

# zookeeper: the real server for cluster tests; kcat: a real client; a JRE for both.
setup-apt:
	@if command -v apt-get >/dev/null; then \
	  missing=""; \
	  for p in zookeeper kcat default-jre-headless; do \
	    dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; \
	  done; \
	  if [ -n "$$missing" ]; then \
	    SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	    $$SUDO apt-get update -qq && \
	    DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq --no-install-recommends $$missing; \
	  fi; \
	else echo "no apt-get: install zookeeper, kcat and a JRE yourself"; fi

setup-python:
	@command -v $(UV) >/dev/null || python3 -m pip install --quiet uv || pip install --quiet uv
	$(UV) sync --all-packages --frozen

lint:
	$(UV) run ruff check .
	$(UV) run ruff format --check .
	$(UV) run mypy broker_image/samsa spark-on-k8s/samsa_spark spark-on-k8s/pyspark_samsa
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

bench:
	$(UV) run python -m bench

bench-quick:
	$(UV) run python -m bench --quick

# The kind suite: needs Docker, kind, kubectl and helm; skipped (with a message) without them.
e2e:
	$(PYTEST) -q -rs tests/e2e

SPARK_IMAGE_TAG ?= samsa-spark:0.1.0
spark-image:
	@command -v docker >/dev/null || { echo "make spark-image: docker is not installed"; exit 1; }
	docker build -f spark-on-k8s/Dockerfile -t $(SPARK_IMAGE_TAG) .

docs:
	$(UV) run python -m samsa.handlers.docs > docs/protocol.md

clean:
	rm -rf .pytest_cache .mypy_cache .ruff_cache build dist
