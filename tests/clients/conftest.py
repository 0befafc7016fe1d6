"""Fixtures of the client matrix: clients in other languages, and Apache Kafka's own tools,
against a real 3-broker Samsa cluster (ZooKeeper and broker processes on 127.0.0.1) with
replicated topics (replication factor 3, min.insync.replicas 2), as users would run it.

The cluster is the ``samsa_cluster`` fixture of samsa's pytest plugin (samsa.testing.cluster):
one serves every test of a worker process; each test makes its own topics and groups.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
for folder in ("broker_image/tests", "broker_image/tests/cluster", "broker_image/tests/security"):
    if str(REPO / folder) not in sys.path:
        sys.path.insert(0, str(REPO / folder))

from kafka_support import name_for_test  # noqa: E402

from samsa.local_cluster.cluster import LocalCluster  # noqa: E402
from samsa.testing.cluster import FAST, REPLICATED  # noqa: E402


@pytest.fixture
def own_cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    """A 3-broker cluster like the session's, of the test's own: for tests that kill brokers."""
    cluster = LocalCluster(tmp_path / "own-cluster", 3, {**FAST, **REPLICATED})
    cluster.up(timeout=120)
    try:
        yield cluster
    finally:
        cluster.down(timeout=10)


@pytest.fixture
def bootstrap(samsa_cluster: LocalCluster) -> str:
    return samsa_cluster.bootstrap_servers


@pytest.fixture
def topic(request: pytest.FixtureRequest) -> str:
    """A topic name unique to the test (not created)."""
    return name_for_test(request.node.name, "t")


@pytest.fixture
def group(request: pytest.FixtureRequest) -> str:
    """A group id unique to the test."""
    return name_for_test(request.node.name, "g")
