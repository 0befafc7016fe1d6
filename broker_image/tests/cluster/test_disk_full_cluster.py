"""A follower whose disk fills up, on a real 3-broker cluster (its data directory a small tmpfs
of the test's own): it drops out of the ISR, acks=all producers carry on with
min.insync.replicas=2, and once space returns it catches up and rejoins the ISR without a
restart. Nothing acknowledged is lost, duplicated or reordered."""

from __future__ import annotations

import contextlib
import subprocess
import time
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
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import NewTopic
from disk_support import Ballast, small_tmpfs

from samsa.local_cluster.cluster import LocalCluster

LEADER = 0
FOLLOWER = 2


@contextlib.contextmanager
def _disk_of(tmp_path: Path, broker: int) -> Iterator[Path]:
    """The broker's data directory in the first cluster start_cluster makes, on a tmpfs that
    outlives the cluster (the fixtures using this are set up before start_cluster, so torn
    down after it)."""
    with small_tmpfs("64m") as point:
        target = tmp_path / "cluster-0" / f"broker-{broker}"
        target.mkdir(parents=True)
        subprocess.run(["mount", "--bind", str(point), str(target)], check=True)
        try:
            yield target
        finally:
            subprocess.run(["umount", str(target)], check=True)


@pytest.fixture
def follower_disk(tmp_path: Path) -> Iterator[Path]:
    with _disk_of(tmp_path, FOLLOWER) as path:
        yield path


@pytest.fixture
def leader_disk(tmp_path: Path) -> Iterator[Path]:
    with _disk_of(tmp_path, LEADER) as path:
        yield path


def _replicated_topic(cluster: LocalCluster, topic: str) -> None:
    a = admin(cluster)
    assignment = [[LEADER, 1, FOLLOWER]]
    a.create_topics([NewTopic(topic, 1, replica_assignment=assignment)])[topic].result(30)
    wait_until(lambda: isr(cluster, topic, 0) == [LEADER, 1, FOLLOWER], 30, what="a full ISR")
    assert leader(cluster, topic, 0) == LEADER


def test_a_follower_with_a_full_disk_leaves_the_isr_and_rejoins(
    follower_disk: Path, start_cluster: ClusterFactory
) -> None:
    cluster = start_cluster(3, min_insync_replicas=2)
    topic = "follower-disk"
    _replicated_topic(cluster, topic)

    load = LoadProducer(cluster, topic).start()
    wait_until(lambda: load.oracle.count() > 500, 60, what="records acknowledged")
    ballast = Ballast(follower_disk / "ballast")
    ballast.fill()
    full_since = time.monotonic()
    wait_until(lambda: isr(cluster, topic, 0) == [0, 1], 60, what="the full follower to leave")
    mark = load.oracle.count()
    wait_until(lambda: load.oracle.count() > mark + 500, 60, what="acks=all without it")
    ballast.remove()
    # The full follower tries again after replica.fetch.backoff.ms (200 ms here), not at once:
    # it must not spin on the leader, nor fill its own log with the same warning.
    full_for = time.monotonic() - full_since
    follower_log = (cluster.data_dir / f"broker-{FOLLOWER}.log").read_text()
    refusals = follower_log.count("No space left on device")
    assert refusals <= 2 * full_for / 0.2 + 10, (refusals, full_for)
    wait_until(lambda: isr(cluster, topic, 0) == [0, 1, FOLLOWER], 60, what="it to rejoin")
    oracle = load.stop()
    assert not oracle.errors, oracle.errors[:5]
    check_exactly_once(oracle, consume_all(cluster, topic, 1))


def _probe(cluster: LocalCluster, topic: str) -> int:
    """One acks=all record with no retries: the error code the leader answers (0: written)."""
    p = Producer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "acks": "all",
            "retries": 0,
            "message.timeout.ms": 10_000,
        }
    )
    codes: list[int] = []
    p.produce(
        topic,
        value=b"probe-%d" % time.monotonic_ns(),
        partition=0,
        on_delivery=lambda err, msg: codes.append(err.code() if err else 0),
    )
    p.flush(15)
    return codes[0] if codes else -1


def test_a_leader_with_a_full_disk_refuses_writes_until_there_is_room(
    leader_disk: Path, start_cluster: ClusterFactory
) -> None:
    """Samsa's deliberate difference from Kafka (which would take the log directory offline
    and move leadership): the leader stays, answers KAFKA_STORAGE_ERROR, and idempotent
    producers retry through it; once there is room everything they sent is there once."""
    cluster = start_cluster(3, min_insync_replicas=2)
    topic = "leader-disk"
    _replicated_topic(cluster, topic)
    load = LoadProducer(cluster, topic).start()
    wait_until(lambda: load.oracle.count() > 500, 60, what="records acknowledged")
    ballast = Ballast(leader_disk / "ballast")
    ballast.fill()
    wait_until(
        lambda: _probe(cluster, topic) == KafkaError.KAFKA_STORAGE_ERROR,
        60,
        what="the leader to refuse writes",
    )
    ballast.remove()
    mark = load.oracle.count()
    wait_until(lambda: load.oracle.count() > mark + 500, 60, what="writes to resume")
    oracle = load.stop()
    assert not oracle.errors, oracle.errors[:5]
    assert leader(cluster, topic, 0) == LEADER
    got = consume_all(cluster, topic, 1)
    # The probes (some written before the disk was quite full) are not the load's.
    check_exactly_once(oracle, {0: [(o, v) for o, v in got[0] if not v.startswith(b"probe")]})
