"""Fixtures of the cluster tests: a real ZooKeeper and broker processes on 127.0.0.1."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from cluster_support import FAST, ClusterFactory, wait_until

from samsa.local_cluster.cluster import LocalCluster

__all__ = ["wait_until"]


@pytest.fixture
def start_cluster(tmp_path: Path) -> Iterator[ClusterFactory]:
    """Start clusters of broker processes (fast timeouts); all torn down at the end."""
    started: list[LocalCluster] = []

    def start(brokers: int = 3, **overrides: object) -> LocalCluster:
        props = {**FAST, **{k.replace("_", "."): str(v) for k, v in overrides.items()}}
        cluster = LocalCluster(tmp_path / f"cluster-{len(started)}", brokers, props)
        started.append(cluster)
        return cluster.up(timeout=120)

    yield start
    for cluster in started:
        for b in cluster.state.brokers if cluster.state else []:
            cluster.kill_broker(b.broker_id)
        cluster.down(timeout=5)


@pytest.fixture
def cluster(start_cluster: ClusterFactory) -> LocalCluster:
    return start_cluster(3)
