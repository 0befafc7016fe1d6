"""Transactions on replicated partitions: a marker sent to a follower is refused with
NOT_LEADER_OR_FOLLOWER, and followers track the transactions from the records they
replicate, so after the leader is killed the new leader still holds the LSO at the open
transaction and still names the aborted one to read_committed consumers."""

from __future__ import annotations

import pytest
from cluster_support import ClusterFactory, create_topic, isr, leader, wait_until
from kafka_support import Wire
from txn_support import (
    NONE,
    NOT_LEADER_OR_FOLLOWER,
    READ_COMMITTED,
    Marker,
    assert_reads,
    fetch,
    list_offset,
    plain,
    produce,
    txn_batch,
    write_markers,
)

pytestmark = pytest.mark.timeout(300)


def test_followers_track_transactions_and_refuse_markers(start_cluster: ClusterFactory) -> None:
    # The test is the transaction coordinator (its own producer ids and markers), so the
    # leaders must not ask the real one (KIP-890 verification).
    cluster = start_cluster(3, transaction_partition_verification_enable="false")
    topic = "txn-replicated"
    create_topic(cluster, topic, 1, 3, **{"min.insync.replicas": "2"})
    wait_until(lambda: len(isr(cluster, topic, 0)) == 3, 60, what="a full ISR")
    first = leader(cluster, topic, 0)
    follower = next(b for b in isr(cluster, topic, 0) if b != first)
    with Wire(cluster.broker(first).port, timeout=60) as wire:
        assert produce(wire, topic, txn_batch(100, 0, [b"x1", b"x2"])) == (NONE, 0)
        assert produce(wire, topic, txn_batch(200, 0, [b"o1"])) == (NONE, 2)
        assert write_markers(wire, [Marker(100, False, {topic: [0]})]) == {(100, topic, 0): NONE}
        assert list_offset(wire, topic, READ_COMMITTED) == 2
    with Wire(cluster.broker(follower).port, timeout=60) as wire:
        refused = write_markers(wire, [Marker(200, True, {topic: [0]})])
        assert refused == {(200, topic, 0): NOT_LEADER_OR_FOLLOWER}

    cluster.kill_broker(first)
    wait_until(
        lambda: leader(cluster, topic, 0) not in (first, -1), 60, what="a new leader elected"
    )
    second = leader(cluster, topic, 0)
    with Wire(cluster.broker(second).port, timeout=60) as wire:
        wait_until(
            lambda: fetch(wire, topic, 0, READ_COMMITTED).high_watermark == 4,
            60,
            what="the new leader's high watermark",
        )
        assert list_offset(wire, topic, READ_COMMITTED) == 2, "the open transaction holds"
        assert fetch(wire, topic, 0, READ_COMMITTED).aborted == [(100, 0)]
        assert write_markers(wire, [Marker(200, True, {topic: [0]})]) == {(200, topic, 0): NONE}
        assert produce(wire, topic, plain(b"end")) == (NONE, 5)
    assert_reads(cluster.bootstrap_servers, topic, [b"o1", b"end"], [b"x1", b"x2", b"o1", b"end"])
