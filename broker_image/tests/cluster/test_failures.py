"""Faults around replication: a diverged leader, ZooKeeper lost and found, bad requests."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from cluster_support import (
    ClusterFactory,
    LoadProducer,
    admin,
    check_no_loss,
    consume_all,
    create_topic,
    isr,
    leader,
    wait_until,
)
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import NewTopic

from samsa.client import BrokerConnection
from samsa.local_cluster.cluster import LocalCluster
from samsa.protocol.errors import ErrorCode
from samsa.protocol.messages import build, request_type


def log_bytes(cluster: LocalCluster, broker_id: int, topic: str, partition: int) -> bytes:
    segments = sorted((cluster.broker_dir(broker_id) / f"{topic}-{partition}").glob("*.log"))
    return b"".join(s.read_bytes() for s in segments)


def test_a_leader_that_wrote_past_the_high_watermark_is_truncated_when_it_returns(
    start_cluster: ClusterFactory,
) -> None:
    # Slow failure detection, so the followers stay in the ISR (and in ZooKeeper) while frozen,
    # however slow a busy machine makes the steps below.
    cluster: LocalCluster = start_cluster(
        3,
        replica_lag_time_max_ms=60000,
        zookeeper_session_timeout_ms=15000,
        replica_fetch_wait_max_ms=500,
    )
    create_topic(cluster, "diverge", partitions=1, rf=3, **{"min.insync.replicas": "1"})
    committed = LoadProducer(cluster, "diverge", idempotent=False)
    for i in range(200):
        committed.producer.produce(
            "diverge", value=b"c%05d" % i, on_delivery=committed.oracle.on_delivery
        )
    oracle = committed.stop()
    old = leader(cluster, "diverge", 0)
    followers = [b for b in range(3) if b != old]
    for b in followers:
        cluster.signal_broker(b, signal.SIGSTOP)
    try:
        # The frozen followers' last fetches are parked at the leader; once their wait
        # (replica.fetch.wait.max.ms) has run out they are answered empty, and no fetch is left
        # to carry what follows to a follower.
        time.sleep(1.5)
        # acks=1: the leader appends these alone; they never reach the high watermark.
        p = Producer(
            {"bootstrap.servers": cluster.broker(old).bootstrap, "acks": 1, "linger.ms": 0}
        )
        for i in range(50):
            p.produce("diverge", value=b"x%05d" % i)
        assert p.flush(10) == 0
        cluster.kill_broker(old)
    finally:
        for b in followers:
            cluster.signal_broker(b, signal.SIGCONT)
    wait_until(lambda: leader(cluster, "diverge", 0) in followers, 120, what="a new leader")
    new = leader(cluster, "diverge", 0)
    after = LoadProducer(cluster, "diverge", idempotent=False)
    for i in range(100):
        after.producer.produce("diverge", value=b"n%05d" % i, on_delivery=after.oracle.on_delivery)
    after_oracle = after.stop()
    cluster.start_broker(old)
    cluster.wait_ready(60)
    wait_until(lambda: isr(cluster, "diverge", 0) == [0, 1, 2], 60)
    got = consume_all(cluster, "diverge", 1)
    check_no_loss(oracle, got)
    check_no_loss(after_oracle, got)
    assert not [v for _, v in got[0] if v.startswith(b"x")], "the diverged tail survived"
    log_text = (cluster.data_dir / f"broker-{old}.log").read_text()
    assert "truncating diverge-0" in log_text, "the old leader never truncated"
    # Every replica ends byte for byte the same.
    wait_until(
        lambda: (
            log_bytes(cluster, 0, "diverge", 0)
            == log_bytes(cluster, 1, "diverge", 0)
            == log_bytes(cluster, 2, "diverge", 0)
        ),
        30,
        what="identical replicas",
    )
    assert new != old


def test_replication_factor_above_the_live_brokers_is_refused(cluster: LocalCluster) -> None:
    a = admin(cluster)
    future = a.create_topics([NewTopic("too-many", 1, 4)])["too-many"]
    with pytest.raises(Exception) as info:
        future.result(30)
    assert info.value.args[0].code() == KafkaError.INVALID_REPLICATION_FACTOR


async def _fetch_with_epoch(port: int, topic: str, epoch: int, version: int = 12) -> ErrorCode:
    conn = await BrokerConnection("127.0.0.1", port).connect()
    try:
        request = build(
            request_type(1, version),
            {
                "replica_id": -1,
                "max_wait": 0,
                "min_bytes": 0,
                "max_bytes": 1 << 20,
                "isolation_level": 0,
                "session_id": 0,
                "session_epoch": -1,
                "topics": [
                    {
                        "topic": topic,
                        "partitions": [
                            {
                                "partition": 0,
                                "current_leader_epoch": epoch,
                                "fetch_offset": 0,
                                "last_fetched_epoch": -1,
                                "log_start_offset": -1,
                                "partition_max_bytes": 1 << 20,
                            }
                        ],
                    }
                ],
                "forgotten_topics_data": [],
                "rack_id": "",
            },
        )
        response = await conn.request(1, version, request)
        return ErrorCode(response.responses[0].partitions[0].error_code)
    finally:
        await conn.aclose()


def test_fetch_from_a_follower_before_kip_392_or_with_an_old_epoch_is_refused(
    cluster: LocalCluster,
) -> None:
    create_topic(cluster, "epochs", partitions=1, rf=3)
    the_leader = leader(cluster, "epochs", 0)
    follower = next(b for b in range(3) if b != the_leader)
    port = cluster.broker(follower).port
    # Before v11 a consumer reads from the leader only; from v11 a follower serves it too.
    assert (
        asyncio.run(_fetch_with_epoch(port, "epochs", -1, 10)) == ErrorCode.not_leader_or_follower
    )
    assert asyncio.run(_fetch_with_epoch(port, "epochs", -1)) == ErrorCode.none
    # Move leadership twice: epoch 0 is then stale.
    cluster.stop_broker(the_leader)
    cluster.start_broker(the_leader)
    cluster.wait_ready(60)
    now = leader(cluster, "epochs", 0)
    assert (
        asyncio.run(_fetch_with_epoch(cluster.broker(now).port, "epochs", 0))
        == ErrorCode.fenced_leader_epoch
    )


def test_zookeeper_down_at_start_is_retried_not_fatal(tmp_path: Path) -> None:
    from samsa.local_cluster.zookeeper import ZooKeeperServer, free_port

    port = free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "samsa.cli",
            "broker",
            "--data-dir",
            str(tmp_path / "b"),
            "--listen",
            f"127.0.0.1:{free_port()}",
            "--override",
            f"zookeeper.connect=127.0.0.1:{port}",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        out: list[bytes] = []

        def said_retrying() -> bool:
            assert proc.poll() is None, "the broker exited instead of retrying"
            assert proc.stdout is not None
            out.append(proc.stdout.readline())
            return b"not reachable" in out[-1]

        wait_until(said_retrying, 60, interval=0, what="a retry message")
        with ZooKeeperServer(tmp_path / "zk", port):

            def registered() -> bool:
                assert proc.stdout is not None
                line = proc.stdout.readline()
                return b"registered" in line

            wait_until(registered, 60, interval=0, what="registration once ZooKeeper is up")
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.mark.slow
def test_zookeeper_lost_while_running_then_back(cluster: LocalCluster) -> None:
    """Without ZooKeeper the brokers keep replicating; when a follower also dies, the ISR
    cannot shrink (only the controller changes it, through ZooKeeper), so acks=all writes
    wait unacknowledged instead of being acknowledged by too few replicas.  When ZooKeeper
    returns the ISR shrinks, writes go on, and nothing acknowledged is lost."""
    import os

    create_topic(cluster, "zkloss", partitions=1, rf=3, **{"min.insync.replicas": "2"})
    the_leader = leader(cluster, "zkloss", 0)
    follower = next(b for b in range(3) if b != the_leader)
    load = LoadProducer(cluster, "zkloss", idempotent=False).start()
    zk_pid = cluster.state.zookeeper_pid  # type: ignore[union-attr]
    try:
        wait_until(lambda: load.oracle.count() > 500, 60)
        os.kill(zk_pid, signal.SIGSTOP)
        try:
            before = load.oracle.count()
            wait_until(lambda: load.oracle.count() > before + 200, 60, what="writes without ZK")
            cluster.kill_broker(follower)
            time.sleep(1)  # acknowledgements already in flight arrive
            stalled = load.oracle.count()
            # Longer than replica.lag.time.max.ms plus a check: an ISR that could shrink would.
            time.sleep(6)
            assert load.oracle.count() == stalled, "acks=all acknowledged without the ISR"
        finally:
            os.kill(zk_pid, signal.SIGCONT)
        wait_until(lambda: load.oracle.count() > stalled + 200, 90, what="writes to resume")
        cluster.start_broker(follower)
        cluster.wait_ready(90)
        wait_until(lambda: isr(cluster, "zkloss", 0) == [0, 1, 2], 90)
    finally:
        oracle = load.stop()
    check_no_loss(oracle, consume_all(cluster, "zkloss", 1))
