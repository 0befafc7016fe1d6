"""A follower whose disk fills up, on a real 3-broker cluster (its data directory a small tmpfs
of the test's own): it drops out of the ISR, acks=all producers carry on with
min.insync.replicas=2, and once space returns it catches up and rejoins the ISR without a
restart. Nothing acknowledged is lost, duplicated or reordered."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from cluster_support import (
    ClusterFactory,
    LoadProducer,
    admin,
    check_exactly_once,
    consume_all,
    isr,
    leader,
    wait_until,
)
from confluent_kafka.admin import NewTopic
from disk_support import Ballast, small_tmpfs

FOLLOWER = 2


@pytest.fixture
def follower_disk(tmp_path: Path) -> Iterator[Path]:
    """Broker 2's data directory of the first cluster start_cluster makes, on a tmpfs that
    outlives the cluster (this fixture is set up before start_cluster, so torn down after)."""
    with small_tmpfs("64m") as point:
        target = tmp_path / "cluster-0" / f"broker-{FOLLOWER}"
        target.mkdir(parents=True)
        subprocess.run(["mount", "--bind", str(point), str(target)], check=True)
        try:
            yield target
        finally:
            subprocess.run(["umount", str(target)], check=True)


def test_a_follower_with_a_full_disk_leaves_the_isr_and_rejoins(
    follower_disk: Path, start_cluster: ClusterFactory
) -> None:
    cluster = start_cluster(3, min_insync_replicas=2)
    topic = "follower-disk"
    a = admin(cluster)
    a.create_topics([NewTopic(topic, 1, replica_assignment=[[0, 1, FOLLOWER]])])[topic].result(30)
    wait_until(lambda: isr(cluster, topic, 0) == [0, 1, FOLLOWER], 30, what="a full ISR")
    assert leader(cluster, topic, 0) == 0

    load = LoadProducer(cluster, topic).start()
    wait_until(lambda: load.oracle.count() > 500, 60, what="records acknowledged")
    ballast = Ballast(follower_disk / "ballast")
    ballast.fill()
    wait_until(lambda: isr(cluster, topic, 0) == [0, 1], 60, what="the full follower to leave")
    mark = load.oracle.count()
    wait_until(lambda: load.oracle.count() > mark + 500, 60, what="acks=all without it")
    ballast.remove()
    wait_until(lambda: isr(cluster, topic, 0) == [0, 1, FOLLOWER], 60, what="it to rejoin")
    oracle = load.stop()
    assert not oracle.errors, oracle.errors[:5]
    check_exactly_once(oracle, consume_all(cluster, topic, 1))
