"""A clock step on a real 3-broker cluster (the brokers' clock offset file, read through
SAMSA_CLOCK_OFFSET_FILE, moves an hour back): a follower that stops fetching still leaves the
ISR after replica.lag.time.max.ms, because replica lag is measured on monotonic time. Measured
on the wall clock, as before, the lag came out negative for an hour and acks=all producers
waited on the paused follower all that time."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest
from cluster_support import (
    ClusterFactory,
    LoadProducer,
    admin,
    check_exactly_once,
    consume_all,
    controller,
    isr,
    leader,
    wait_until,
)
from confluent_kafka.admin import NewTopic

from samsa import faults

HOUR_MS = 3_600_000


def test_a_step_back_does_not_keep_a_stalled_follower_in_the_isr(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, start_cluster: ClusterFactory
) -> None:
    offset_file = tmp_path / "clock-offset-ms"
    offset_file.write_text("0")
    monkeypatch.setenv(
        faults.CLOCK_OFFSET_FILE_ENV, str(offset_file)
    )  # the broker processes inherit it
    # A long session: the paused follower must leave the ISR by its lag alone, not because
    # ZooKeeper expired it.
    cluster = start_cluster(3, min_insync_replicas=2, zookeeper_session_timeout_ms=30_000)
    # The paused follower must not be the controller: the leader's request to shrink the ISR
    # goes to the controller, and a paused controller answers nothing until its session
    # expires (in Apache Kafka too).
    wait_until(lambda: controller(cluster) >= 0, 30, what="a controller")
    elected = controller(cluster)
    leader_id, follower = (b for b in range(3) if b != elected)
    everyone = sorted([leader_id, elected, follower])
    topic = "clock-lag"
    a = admin(cluster)
    assignment = [[leader_id, elected, follower]]
    # The leader's clock goes an hour back: the producer's records would be more than Kafka's
    # default message.timestamp.after.max.ms (an hour) ahead of it and refused, so the topic
    # accepts any time ahead, as an operator whose clocks may step would set it.
    any_time_ahead = {"message.timestamp.after.max.ms": str(2**63 - 1)}
    new = NewTopic(topic, 1, replica_assignment=assignment, config=any_time_ahead)
    a.create_topics([new])[topic].result(30)
    wait_until(lambda: isr(cluster, topic, 0) == everyone, 30, what="a full ISR")
    assert leader(cluster, topic, 0) == leader_id

    load = LoadProducer(cluster, topic).start()
    wait_until(lambda: load.oracle.count() > 200, 60, what="acks=all load")
    offset_file.write_text(str(-HOUR_MS))
    wait_until(lambda: load.oracle.count() > 400, 60, what="load after the step")
    cluster.signal_broker(follower, signal.SIGSTOP)
    try:
        rest = sorted([leader_id, elected])
        wait_until(lambda: isr(cluster, topic, 0) == rest, 30, what="the paused follower out")
        mark = load.oracle.count()
        wait_until(lambda: load.oracle.count() > mark + 200, 60, what="acks=all without it")
    finally:
        cluster.signal_broker(follower, signal.SIGCONT)
    wait_until(lambda: isr(cluster, topic, 0) == everyone, 60, what="it to rejoin")
    oracle = load.stop()
    assert not oracle.errors, oracle.errors[:5]
    check_exactly_once(oracle, consume_all(cluster, topic, 1))
