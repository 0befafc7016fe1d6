"""A replicated Samsa cluster for tests: a real ZooKeeper and broker processes on 127.0.0.1
(``LocalCluster``), with replication factor 3 and min.insync.replicas 2 by default, as users
run it, and failure timeouts short enough for tests on two busy cores.

With pytest, the ``samsa_cluster`` fixture gives one such cluster per test session.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from samsa.local_cluster.cluster import LocalCluster

# Timeouts short enough for tests, long enough for two busy cores.
FAST = {
    "zookeeper.session.timeout.ms": "4000",
    "replica.lag.time.max.ms": "3000",
    "replica.fetch.backoff.ms": "200",
    "controlled.shutdown.retry.backoff.ms": "200",
    "controlled.shutdown.max.retries": "10",
    "group.initial.rebalance.delay.ms": "0",
    "offsets.topic.num.partitions": "6",
    "log.flush.offset.checkpoint.interval.ms": "1000",
}

REPLICATED = {
    "default.replication.factor": "3",
    "min.insync.replicas": "2",
    "offsets.topic.replication.factor": "3",
}


@contextmanager
def replicated_cluster(
    data_dir: Path, brokers: int = 3, overrides: dict[str, str] | None = None
) -> Iterator[LocalCluster]:
    """A running cluster of ``brokers`` processes (FAST and REPLICATED, then ``overrides``),
    stopped on exit."""
    cluster = LocalCluster(data_dir, brokers, {**FAST, **REPLICATED, **(overrides or {})})
    cluster.up(timeout=120)
    try:
        yield cluster
    finally:
        cluster.down(timeout=10)
