"""DeleteRecords on a 3-broker cluster: the followers follow the leader's log start offset
(reported in their fetches), and the answer waits for them, as Kafka's DelayedDeleteRecords."""

from __future__ import annotations

import signal

from cluster_support import create_topic, leader, wait_until
from confluent_kafka import TopicPartition
from kafka_support import NONE, REQUEST_TIMED_OUT, admin, delete_records, log_start, produce

from samsa.local_cluster.cluster import LocalCluster


def test_followers_follow_the_log_start_and_a_stopped_one_times_the_request_out(
    cluster: LocalCluster,
) -> None:
    create_topic(cluster, "trimmed", partitions=1, rf=3)
    produce(cluster.bootstrap_servers, "trimmed", [b"x"] * 10, acks="all")
    client = admin(cluster.bootstrap_servers)
    (future,) = client.delete_records(
        [TopicPartition("trimmed", 0, 6)], operation_timeout=20
    ).values()
    # The low watermark is the smallest log start offset of the live replicas: every one moved.
    assert future.result(30).low_watermark == 6

    first = leader(cluster, "trimmed", 0)
    follower = next(b for b in range(3) if b != first)
    port = cluster.broker(first).port
    cluster.signal_broker(follower, signal.SIGSTOP)
    try:
        got = delete_records(port, {("trimmed", 0): 8}, timeout_ms=1000)
        # The leader moved; the stopped follower did not report it in time.
        assert got == {("trimmed", 0): (REQUEST_TIMED_OUT, 6)}
        assert log_start(port, "trimmed") == 8
    finally:
        cluster.signal_broker(follower, signal.SIGCONT)
    # Once it fetches again, the low watermark catches up.
    wait_until(
        lambda: (
            delete_records(port, {("trimmed", 0): 8}, timeout_ms=5000)
            == {("trimmed", 0): (NONE, 8)}
        ),
        30,
        what="the resumed follower's log start offset",
    )
    # Leadership moves: the new leader starts where the old one did.
    cluster.stop_broker(first)
    wait_until(lambda: leader(cluster, "trimmed", 0) not in (-1, first), 30, what="a new leader")
    new = cluster.broker(leader(cluster, "trimmed", 0)).port
    assert wait_until(lambda: log_start(new, "trimmed"), 30) == 8
