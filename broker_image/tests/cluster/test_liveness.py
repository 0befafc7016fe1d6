"""Failure detection faster than the ZooKeeper session: a killed broker is replaced as soon as
nothing listens on its port, and a broker that is only slow is not."""

from __future__ import annotations

import json
import signal
import time

import pytest
from cluster_support import (
    ClusterFactory,
    LoadProducer,
    check_exactly_once,
    consume_all,
    create_topic,
    isr,
    leader,
    wait_until,
)
from kazoo.client import KazooClient

from samsa.local_cluster.cluster import LocalCluster


def _controller(zk: KazooClient) -> int:
    found = zk.exists("/controller") and zk.get("/controller")
    return int(json.loads(found[0])["brokerid"]) if found else -1


def _leaders(cluster: LocalCluster, topic: str, partitions: int) -> dict[int, int]:
    return {p: leader(cluster, topic, p) for p in range(partitions)}


def test_a_killed_leader_and_a_killed_controller_are_replaced_before_their_sessions_expire(
    start_cluster: ClusterFactory,
) -> None:
    # Sessions far longer than the test: any failover seen here came from the probes.
    cluster = start_cluster(3, zookeeper_session_timeout_ms=120_000)
    create_topic(cluster, "alive", partitions=3, rf=3, **{"min.insync.replicas": "1"})
    zk = KazooClient(cluster.zookeeper_connect)
    zk.start(10)
    try:
        wait_until(lambda: len(set(_leaders(cluster, "alive", 3).values())) == 3, 60)
        controller = _controller(zk)
        leaders = _leaders(cluster, "alive", 3)
        # First a leader that is not the controller: the controller's probes find it gone.
        victim = next(b for b in leaders.values() if b != controller)
        led = next(p for p, b in leaders.items() if b == victim)
        cluster.kill_broker(victim)
        wait_until(lambda: leader(cluster, "alive", led) not in (-1, victim), 60)
        assert zk.exists(f"/brokers/ids/{victim}") is not None, "its session expired first"
        wait_until(lambda: victim not in isr(cluster, "alive", led), 30, what="ISR without it")
        # Then the controller, which leads a partition: the others' probes find it gone, a new
        # controller is elected, and its probes find the old one gone.
        led = next(p for p, b in leaders.items() if b == controller)
        cluster.kill_broker(controller)
        wait_until(lambda: _controller(zk) not in (-1, controller), 60, what="a new controller")
        wait_until(lambda: leader(cluster, "alive", led) not in (-1, controller, victim), 60)
        assert zk.exists(f"/brokers/ids/{controller}") is not None, "its session expired first"
    finally:
        zk.stop()
        zk.close()


@pytest.mark.slow
def test_a_leader_paused_shorter_than_the_session_costs_no_acknowledged_record(
    start_cluster: ClusterFactory, record_property: object
) -> None:
    # Slowness is left to the ZooKeeper session (6 s here): a 2.5 s pause is not a death.
    cluster = start_cluster(3, zookeeper_session_timeout_ms=6000)
    create_topic(cluster, "slow", partitions=2, rf=3, **{"min.insync.replicas": "2"})
    load = LoadProducer(cluster, "slow", idempotent=True).start()
    zk = KazooClient(cluster.zookeeper_connect)
    zk.start(10)
    try:
        wait_until(lambda: load.oracle.count() > 1000, 60, what="load")
        paused = leader(cluster, "slow", 0)
        was_controller = _controller(zk) == paused
        registered = zk.exists(f"/brokers/ids/{paused}")
        assert registered is not None
        cluster.signal_broker(paused, signal.SIGSTOP)
        try:
            time.sleep(2.5)  # the fault itself: a pause of a set length
        finally:
            cluster.signal_broker(paused, signal.SIGCONT)
        before = load.oracle.count()
        wait_until(lambda: load.oracle.count() > before + 1000, 60, what="writes after")
        now = leader(cluster, "slow", 0)
        still = zk.exists(f"/brokers/ids/{paused}")
        same_session = still is not None and still.czxid == registered.czxid
    finally:
        zk.stop()
        zk.close()
        oracle = load.stop()
    lost = now != paused
    report = (
        f"broker {paused} (controller: {was_controller}) paused 2.5 s under acks=all load: "
        f"{'lost' if lost else 'kept'} leadership of slow-0 (leader now {now}); "
        f"same ZooKeeper session: {same_session}; {oracle.count()} records acknowledged"
    )
    print(report)
    record_property("slow_broker", report)  # type: ignore[operator]
    assert same_session, "a pause shorter than the session cost the broker its registration"
    check_exactly_once(oracle, consume_all(cluster, "slow", 2))
