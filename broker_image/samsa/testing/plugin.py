"""pytest plugin (registered by the samsa package): the ``samsa_broker`` and ``samsa_cluster``
fixtures."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from samsa.local_cluster.cluster import LocalCluster
from samsa.testing.cluster import replicated_cluster
from samsa.testing.inprocess import InProcessBroker


@pytest.fixture
def samsa_broker(tmp_path: Path) -> Iterator[InProcessBroker]:
    """A real broker on a free 127.0.0.1 port, its data in the test's tmp dir."""
    with InProcessBroker(tmp_path / "broker", http=True) as b:
        yield b


@pytest.fixture(scope="session")
def samsa_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """A real 3-broker cluster (ZooKeeper and broker processes on 127.0.0.1), replication
    factor 3 and min.insync.replicas 2, shared by every test of the session: each test makes
    its own topics and groups."""
    with replicated_cluster(tmp_path_factory.mktemp("samsa-cluster")) as cluster:
        yield cluster
