"""Replication on a real 3-broker cluster: ISR, high watermark, acks=all, failover."""

from __future__ import annotations

import signal
import socket
import time
import urllib.request

import pytest
from cluster_support import (
    ClusterFactory,
    LoadProducer,
    admin,
    check_exactly_once,
    consume_all,
    controller,
    create_topic,
    isr,
    leader,
    wait_until,
)
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import NewTopic
from kafka_support import (
    LATEST,
    NONE,
    Wire,
    api_versions_request,
    list_offset,
    log_end,
    produce_request,
)

from samsa.local_cluster.cluster import LocalCluster
from samsa.protocol.record_batch import build_batch


def metrics(cluster: LocalCluster, broker_id: int) -> dict[str, float]:
    port = cluster.broker(broker_id).http_port
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        text = r.read().decode()
    return {
        line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line and not line.startswith("#")
    }


def test_records_reach_every_replica_and_survive_the_loss_of_two(cluster: LocalCluster) -> None:
    create_topic(cluster, "r3", partitions=3, rf=3, **{"min.insync.replicas": "2"})
    load = LoadProducer(cluster, "r3", idempotent=False).start()
    wait_until(lambda: load.oracle.count() > 3000, 60, what="records acknowledged")
    # The replication stages are timed on /metrics: the leaders' on each partition's leader
    # (wherever leadership is), the followers' on the others. They are checked while records
    # flow: a follower's first fetch carries batches appended before it started following,
    # which have no append time to be timed against, and a fast run may be only that.
    stage = 'kafka_server_replication_stage_time_seconds_count{{stage="{}"}}'.format

    def untimed() -> list[tuple[int, str]]:
        seen = {b: metrics(cluster, b) for b in range(3)}
        leaders = {leader(cluster, "r3", p) for p in range(3)}
        wanted = [
            (b, name)
            for b in leaders
            for name in ("produce_append", "follower_fetch", "high_watermark", "ack_wait")
        ]
        wanted += [(b, "follower_append") for b in set(range(3)) - leaders or set(range(3))]
        return [(b, name) for b, name in wanted if not seen[b][stage(name)] > 0]

    wait_until(lambda: not untimed(), 60, what="every replication stage timed")
    oracle = load.stop()
    assert not oracle.errors
    for p in range(3):
        assert isr(cluster, "r3", p) == [0, 1, 2]
    # Any single surviving replica has everything acknowledged: stop two brokers hard.
    survivor = leader(cluster, "r3", 0)
    for b in range(3):
        if b != survivor:
            cluster.kill_broker(b)
    wait_until(lambda: all(leader(cluster, "r3", p) == survivor for p in range(3)), 30)
    check_exactly_once(oracle, consume_all(cluster, "r3", 3))


def test_acks_all_is_refused_below_min_insync_and_nothing_acknowledged_is_lost(
    cluster: LocalCluster,
) -> None:
    create_topic(cluster, "minisr", partitions=1, rf=3, **{"min.insync.replicas": "2"})
    load = LoadProducer(cluster, "minisr", idempotent=False).start()
    wait_until(lambda: load.oracle.count() > 1000, 60)
    oracle = load.stop()
    the_leader = leader(cluster, "minisr", 0)
    others = [b for b in range(3) if b != the_leader]
    for b in others:
        cluster.stop_broker(b)
    wait_until(lambda: isr(cluster, "minisr", 0) == [the_leader], 30, what="ISR of one")
    errors: list[KafkaError] = []
    p = Producer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "acks": "all",
            "enable.idempotence": False,
            "message.timeout.ms": 3000,
            "retries": 0,
        }
    )
    p.produce("minisr", value=b"refused", on_delivery=lambda err, msg: errors.append(err))
    p.flush(30)
    assert errors and errors[0] is not None
    assert errors[0].code() == KafkaError.NOT_ENOUGH_REPLICAS
    for b in others:
        cluster.start_broker(b)
    cluster.wait_ready(60)
    wait_until(lambda: isr(cluster, "minisr", 0) == [0, 1, 2], 60, what="full ISR again")
    got = consume_all(cluster, "minisr", 1)
    check_exactly_once(oracle, got)
    assert b"refused" not in [v for _, v in got[0]]


def test_a_paused_follower_leaves_the_isr_and_rejoins_after(cluster: LocalCluster) -> None:
    create_topic(cluster, "paused", partitions=1, rf=3, **{"min.insync.replicas": "2"})
    the_leader = leader(cluster, "paused", 0)
    # Not the controller: a paused controller holds up the ISR shrink until its session ends.
    follower = next(b for b in range(3) if b not in (the_leader, controller(cluster)))
    load = LoadProducer(cluster, "paused", idempotent=False).start()
    try:
        wait_until(lambda: load.oracle.count() > 500, 60)
        cluster.signal_broker(follower, signal.SIGSTOP)
        started = time.monotonic()
        wait_until(lambda: follower not in isr(cluster, "paused", 0), 30, what="ISR shrink")
        shrunk_after = time.monotonic() - started
        # What an operator alerts on, on the leader's /metrics.
        seen = metrics(cluster, the_leader)
        assert seen["kafka_server_replicamanager_underreplicatedpartitions"] >= 1
        before = load.oracle.count()
        wait_until(lambda: load.oracle.count() > before + 500, 30, what="produce to continue")
        cluster.signal_broker(follower, signal.SIGCONT)
        wait_until(lambda: isr(cluster, "paused", 0) == [0, 1, 2], 60, what="ISR expansion")
        wait_until(
            lambda: (
                metrics(cluster, the_leader)[
                    "kafka_server_replicamanager_underreplicatedpartitions"
                ]
                == 0
            ),
            30,
        )
    finally:
        cluster.signal_broker(follower, signal.SIGCONT)
        oracle = load.stop()
    # replica.lag.time.max.ms is 3 s; the check runs every half of it.
    assert shrunk_after < 3 + 1.5 + 5
    assert not oracle.errors
    check_exactly_once(oracle, consume_all(cluster, "paused", 1))


@pytest.mark.slow
def test_leader_killed_and_restarted_five_times_under_load_loses_nothing(
    cluster: LocalCluster,
) -> None:
    """Five kills of partition 0's leader, each after progress, each restarted: the
    acknowledged records come back exactly once. Five, not ten: the fault campaign
    (chaos/tests/test_campaign.py, and `make chaos` with 300 faults) kills leaders among its
    other faults under the same kind of load."""
    create_topic(cluster, "chaos", partitions=2, rf=3, **{"min.insync.replicas": "2"})
    # Idempotent: every acknowledged record exactly once, in order, whatever the retries.
    load = LoadProducer(cluster, "chaos", idempotent=True).start()
    try:
        for _ in range(5):
            before = load.oracle.count()
            wait_until(lambda b=before: load.oracle.count() > b + 300, 60, what="progress")
            victim = leader(cluster, "chaos", 0)
            assert victim >= 0
            cluster.kill_broker(victim)
            wait_until(
                lambda v=victim: leader(cluster, "chaos", 0) not in (-1, v), 30, what="failover"
            )
            cluster.start_broker(victim)
            cluster.wait_ready(60)
    finally:
        oracle = load.stop()
    assert not oracle.errors, oracle.errors[:5]
    check_exactly_once(oracle, consume_all(cluster, "chaos", 2))


def test_requests_behind_an_acks_all_wait_are_handled_and_answered_in_order(
    start_cluster: ClusterFactory,
) -> None:
    """A client pipelining acks=all requests is not held to one replication round trip per
    request: the requests behind one still waiting for its ISR are handled meanwhile, and the
    answers come back in request order."""
    # The ISR must not shrink while the followers are stopped: the wait lasts until SIGCONT.
    cluster = start_cluster(3, replica_lag_time_max_ms=60_000)
    create_topic(cluster, "waits", partitions=1, rf=3, **{"min.insync.replicas": "2"})
    the_leader = leader(cluster, "waits", 0)
    followers = [b for b in range(3) if b != the_leader]
    a = admin(cluster)
    a.create_topics([NewTopic("behind", 1, -1, replica_assignment=[[the_leader]])])[
        "behind"
    ].result(30)
    wait_until(lambda: leader(cluster, "behind", 0) == the_leader, 30)
    port = cluster.broker(the_leader).port
    # Another broker's metadata can name the leader before the leader has applied its
    # LeaderAndIsr (the controller's queue to each broker is its own). Stopping the followers
    # then may stop the controller before that request is written, so ask the leader itself.
    for topic in ("waits", "behind"):
        wait_until(
            lambda t=topic: list_offset(port, t, 0, LATEST)[0] == NONE,
            30,
            what=f"{topic}'s leader",
        )
    for f in followers:
        cluster.signal_broker(f, signal.SIGSTOP)
    try:
        with Wire(port, timeout=60) as wire:
            batch = build_batch([(b"k", b"v", [])])
            first = wire.send_request(0, 9, produce_request("waits", {0: batch}, acks=-1))
            second = wire.send_request(0, 9, produce_request("behind", {0: batch}, acks=-1))
            third = wire.send_request(18, 3, api_versions_request())
            # The second request was handled while the first still waits for its ISR.
            wait_until(lambda: log_end(port, "behind") == 1, 30, what="the second append")
            wire.sock.settimeout(0.5)
            with pytest.raises(TimeoutError):
                wire.sock.recv(1, socket.MSG_PEEK)
            wire.sock.settimeout(60)
            for f in followers:
                cluster.signal_broker(f, signal.SIGCONT)
            answers = [
                wire.read_response(0, 9, first),
                wire.read_response(0, 9, second),
                wire.read_response(18, 3, third),
            ]
    finally:
        for f in followers:
            cluster.signal_broker(f, signal.SIGCONT)
    for produced in answers[:2]:
        (partition,) = produced.responses[0].partition_responses
        assert (partition.error_code.value, partition.base_offset) == (0, 0)
    assert answers[2].error_code.value == 0


def test_a_follower_fetch_is_answered_for_records_not_for_the_high_watermark(
    cluster: LocalCluster,
) -> None:
    """A follower's parked fetch is answered when records are appended, and learns the high
    watermark in that answer, as in Kafka (KAFKA-9731): answered again for each step of the
    high watermark, every follower cost the leader twice the fetches per acknowledged write."""
    create_topic(cluster, "steps", partitions=1, rf=3, **{"min.insync.replicas": "2"})
    wait_until(lambda: isr(cluster, "steps", 0) == [0, 1, 2], 60, what="a full ISR")
    the_leader = leader(cluster, "steps", 0)
    fetches = 'kafka_network_request_metrics_requests_total{request="FetchFollower"}'
    producer = Producer(
        {"bootstrap.servers": cluster.bootstrap_servers, "acks": "all", "linger.ms": 0}
    )
    producer.produce("steps", b"first", partition=0)
    assert producer.flush(30) == 0
    records = 200
    before = metrics(cluster, the_leader).get(fetches, 0.0)
    started = time.monotonic()
    for i in range(records):
        producer.produce("steps", str(i).encode(), partition=0)
        assert producer.flush(30) == 0, "an acks=all write not acknowledged"
    elapsed = time.monotonic() - started
    answered = metrics(cluster, the_leader).get(fetches, 0.0) - before
    # One answer per follower per write, plus the fetches that found nothing and waited out
    # replica.fetch.wait.max.ms (500 ms): one per follower per half second at most.
    quiet = 2 * (elapsed / 0.5 + 1)
    assert answered <= 2.5 * records + quiet, (answered, records, elapsed)
