"""Apache Kafka's Java client in a transactional consume-process-produce loop
(tests/clients/java/EosApp.java, its own JVM) across 6 partitions of the 3-broker cluster
(replication factor 3), killed with -9 at random points 5 times and started again: the
output read with read_committed holds every input exactly once, and read_uncommitted readers
also see the records of the transactions the kills aborted.

Five kills over 1,000 inputs, not twenty: each restart pays for a JVM, and the long loop (20
kills, 3,000 inputs) runs once, with librdkafka on the same kind of cluster
(broker_image/tests/cluster/test_cluster_txn_coordinator.py)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from eos_support import kill_loop
from java_support import JAVA

from samsa.local_cluster.cluster import LocalCluster
from samsa_dev.kafka import java_program

pytestmark = [pytest.mark.timeout(900), pytest.mark.slow]

INPUTS = 1000


def test_java_eos_loop_killed_5_times_every_input_once(
    samsa_cluster: LocalCluster, tmp_path: Path
) -> None:
    app = java_program(JAVA / "EosApp.java", [], heap="128m")
    committed, everything = kill_loop(
        samsa_cluster.bootstrap_servers,
        tmp_path / "app.log",
        inputs=INPUTS,
        kills=5,
        replication=3,
        app=app,
    )
    assert committed == Counter(f"out-{i}" for i in range(INPUTS))
    assert set(everything) == set(committed)
    # What the kills interrupted was written and aborted: only read_uncommitted shows it.
    assert sum(n - 1 for n in everything.values()) > 0, "no kill landed inside a transaction"
