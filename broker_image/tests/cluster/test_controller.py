"""The controller: election through ZooKeeper, the epoch fence against split brain,
controlled shutdown, preferred leaders and reassignment."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time

from cluster_support import (
    ClusterFactory,
    LoadProducer,
    admin,
    check_no_loss,
    consume_all,
    create_topic,
    isr,
    leader,
    partition_info,
    wait_until,
)
from confluent_kafka import ElectionType, TopicPartition
from confluent_kafka.admin import NewTopic
from kafka import TopicPartition as KafkaTopicPartition
from kafka.admin import KafkaAdminClient
from kafka_support import produce
from kazoo.client import KazooClient

from samsa.client import BrokerConnection
from samsa.local_cluster.cluster import LocalCluster
from samsa.protocol import controller_apis as apis
from samsa.protocol.errors import ErrorCode


def _zk(cluster: LocalCluster) -> KazooClient:
    zk = KazooClient(cluster.zookeeper_connect)
    zk.start(10)
    return zk


def controller_and_epoch(cluster: LocalCluster) -> tuple[int, int]:
    zk = _zk(cluster)
    try:
        data, _ = zk.get("/controller")
        epoch, _ = zk.get("/controller_epoch")
        return int(json.loads(data)["brokerid"]), int(epoch)
    finally:
        zk.stop()
        zk.close()


def registration(cluster: LocalCluster, broker_id: int) -> int:
    """The czxid of a broker's registration: it changes when the broker registers anew."""
    zk = _zk(cluster)
    try:
        stat = zk.exists(f"/brokers/ids/{broker_id}")
        return -1 if stat is None else int(stat.czxid)
    finally:
        zk.stop()
        zk.close()


async def _send_stale(port: int, epoch: int) -> ErrorCode:
    conn = await BrokerConnection("127.0.0.1", port).connect()
    try:
        response = await conn.request(
            apis.UPDATE_METADATA,
            apis.UPDATE_METADATA_VERSION,
            apis.UpdateMetadataRequest(
                controller_id=99, controller_epoch=epoch, topic_states=(), live_brokers=()
            ),
        )
        return ErrorCode(response.error_code)
    finally:
        await conn.aclose()


def test_split_brain_old_controller_is_fenced_by_every_broker(
    start_cluster: ClusterFactory,
) -> None:
    cluster = start_cluster(3)
    create_topic(cluster, "fence", partitions=3, rf=3)
    old, old_epoch = controller_and_epoch(cluster)
    old_registration = registration(cluster, old)
    # The controller's process lives, but its ZooKeeper session expires while it is frozen.
    cluster.signal_broker(old, signal.SIGSTOP)
    try:
        new, new_epoch = wait_until(
            lambda: (c := controller_and_epoch(cluster))[0] != old and c,
            60,
            what="a new controller",
        )
    finally:
        cluster.signal_broker(old, signal.SIGCONT)
    assert new_epoch > old_epoch
    # Thawed, it finds its session gone and registers again, as an ordinary broker.
    wait_until(lambda: registration(cluster, old) not in (-1, old_registration), 60)
    cluster.wait_ready(60)
    wait_until(lambda: all(isr(cluster, "fence", p) == [0, 1, 2] for p in range(3)), 60)
    for b in cluster.state.brokers:  # type: ignore[union-attr]
        assert asyncio.run(_send_stale(b.port, old_epoch)) == ErrorCode.stale_controller_epoch
    # The old controller came back as an ordinary broker; the cluster works.
    assert controller_and_epoch(cluster) == (new, new_epoch)
    load = LoadProducer(cluster, "fence", idempotent=False).start()
    wait_until(lambda: load.oracle.count() > 300, 60)
    check_no_loss(load.stop(), consume_all(cluster, "fence", 3))


def test_a_controller_cut_off_from_zookeeper_then_back_in_its_session_leaves_one_elected(
    start_cluster: ClusterFactory,
) -> None:
    """A controller that loses ZooKeeper resigns at once (it cannot know it still is one);
    if ZooKeeper comes back while its session lives, it still holds /controller, and the
    cluster must not be left without a controller: a topic created afterwards gets leaders."""
    # A session long enough to outlive the pause: the brokers drop their connections after
    # two thirds of it, and ZooKeeper is resumed right after the controller resigns.
    cluster = start_cluster(3, zookeeper_session_timeout_ms=10_000)
    old, old_epoch = controller_and_epoch(cluster)
    log_file = cluster.data_dir / f"broker-{old}.log"
    zk_pid = cluster.state.zookeeper_pid  # type: ignore[union-attr]
    os.kill(zk_pid, signal.SIGSTOP)
    try:
        wait_until(
            lambda: "resigning as controller" in log_file.read_text(), 30, what="resignation"
        )
    finally:
        os.kill(zk_pid, signal.SIGCONT)
    wait_until(lambda: controller_and_epoch(cluster)[1] > old_epoch, 30, what="an election")
    assert "Session has expired" not in log_file.read_text(), "the session should survive"
    create_topic(cluster, "after-the-pause", partitions=3, rf=3)
    produce(cluster.bootstrap_servers, "after-the-pause", [b"written"], partition=0)


def test_an_isr_change_in_flight_when_the_controller_loses_zookeeper_is_refused_cleanly(
    start_cluster: ClusterFactory,
) -> None:
    """A leader's AlterPartition waits at the controller on a ZooKeeper that stopped
    answering, until the controller's session has expired: the leader gets an error to retry
    on (NOT_CONTROLLER), not a connection closed on it, and the controller logs no error."""
    cluster = start_cluster(3, zookeeper_session_timeout_ms=6000, replica_lag_time_max_ms=1000)
    elected, _ = controller_and_epoch(cluster)
    the_leader, follower = (b for b in range(3) if b != elected)
    a = admin(cluster)
    assignment = [[the_leader, elected, follower]]
    a.create_topics([NewTopic("inflight", 1, replica_assignment=assignment)])["inflight"].result(30)
    everyone = sorted([the_leader, elected, follower])
    wait_until(lambda: isr(cluster, "inflight", 0) == everyone, 30, what="a full ISR")
    leader_log = cluster.data_dir / f"broker-{the_leader}.log"
    controller_log = cluster.data_dir / f"broker-{elected}.log"
    zk_pid = cluster.state.zookeeper_pid  # type: ignore[union-attr]
    os.kill(zk_pid, signal.SIGSTOP)
    paused = time.monotonic()
    cluster.signal_broker(follower, signal.SIGSTOP)
    try:
        # A record the stopped follower cannot fetch: it falls behind, and out of sync.
        produce(cluster.broker(the_leader).bootstrap, "inflight", [b"behind"], acks="1")
        wait_until(
            lambda: "inflight-0: replicas" in leader_log.read_text(), 30, what="an ISR shrink"
        )
        # The fault itself: ZooKeeper silent for longer than the sessions last.
        time.sleep(max(0.0, 9.0 - (time.monotonic() - paused)))
    finally:
        os.kill(zk_pid, signal.SIGCONT)
        cluster.signal_broker(follower, signal.SIGCONT)
    wait_until(lambda: isr(cluster, "inflight", 0) == everyone, 90, what="the ISR whole again")
    errors = [
        line
        for line in controller_log.read_text().splitlines()
        if " ERROR " in line and "kazoo" not in line
    ]
    assert errors == []


def test_controlled_shutdown_moves_leadership_before_the_broker_stops(
    cluster: LocalCluster,
) -> None:
    create_topic(cluster, "moving", partitions=6, rf=3, **{"min.insync.replicas": "2"})
    victim = leader(cluster, "moving", 0)
    load = LoadProducer(cluster, "moving", idempotent=False).start()
    try:
        wait_until(lambda: load.oracle.count() > 500, 60)
        cluster.stop_broker(victim)
        assert all(leader(cluster, "moving", p) not in (-1, victim) for p in range(6))
        before = load.oracle.count()
        wait_until(lambda: load.oracle.count() > before + 500, 60)
        cluster.start_broker(victim)
        cluster.wait_ready(60)
    finally:
        oracle = load.stop()
    assert not oracle.errors, oracle.errors[:3]
    check_no_loss(oracle, consume_all(cluster, "moving", 6))


def test_preferred_leader_election_restores_first_replica_leadership(
    cluster: LocalCluster,
) -> None:
    create_topic(cluster, "pref", partitions=3, rf=3)
    preferred = {p: partition_info(cluster, "pref", p).replicas[0] for p in range(3)}
    victim = preferred[0]
    cluster.stop_broker(victim)
    cluster.start_broker(victim)
    cluster.wait_ready(60)
    wait_until(lambda: isr(cluster, "pref", 0) == [0, 1, 2], 60)
    assert leader(cluster, "pref", 0) != victim
    a = admin(cluster)
    partitions = [TopicPartition("pref", p) for p in range(3)]
    a.elect_leaders(ElectionType.PREFERRED, partitions).result(30)
    del a
    wait_until(lambda: all(leader(cluster, "pref", p) == preferred[p] for p in range(3)), 30)


def test_reassignment_moves_a_partition_to_new_brokers_under_load(
    start_cluster: ClusterFactory,
) -> None:
    cluster = start_cluster(4)
    create_topic(cluster, "moved", partitions=1, rf=3, **{"min.insync.replicas": "2"})
    # Pin the assignment to brokers 0, 1, 2 first.
    kadmin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers)
    try:
        kadmin.alter_partition_reassignments({KafkaTopicPartition("moved", 0): [0, 1, 2]})
        wait_until(lambda: sorted(partition_info(cluster, "moved", 0).replicas) == [0, 1, 2], 60)
        load = LoadProducer(cluster, "moved", idempotent=False).start()
        try:
            wait_until(lambda: load.oracle.count() > 1000, 60)
            kadmin.alter_partition_reassignments({KafkaTopicPartition("moved", 0): [1, 2, 3]})
            started = time.monotonic()
            wait_until(
                lambda: sorted(partition_info(cluster, "moved", 0).replicas) == [1, 2, 3],
                120,
                what="the reassignment to finish",
            )
            assert time.monotonic() - started < 120
            wait_until(lambda: not kadmin.list_partition_reassignments(), 30)
            before = load.oracle.count()
            wait_until(lambda: load.oracle.count() > before + 500, 60)
        finally:
            oracle = load.stop()
    finally:
        kadmin.close()
    assert not oracle.errors, oracle.errors[:3]
    assert isr(cluster, "moved", 0) == [1, 2, 3]
    # Broker 0 no longer holds the partition's log.
    wait_until(lambda: not (cluster.broker_dir(0) / "moved-0").exists(), 30)
    check_no_loss(oracle, consume_all(cluster, "moved", 1))


def test_auto_leader_rebalance_returns_leadership_to_the_preferred_replica(
    start_cluster: ClusterFactory,
) -> None:
    cluster = start_cluster(
        3, auto_leader_rebalance_enable="true", leader_imbalance_check_interval_seconds=1
    )
    create_topic(cluster, "auto-pref", partitions=3, rf=3)
    preferred = {p: partition_info(cluster, "auto-pref", p).replicas[0] for p in range(3)}
    victim = preferred[0]
    cluster.stop_broker(victim)
    wait_until(lambda: leader(cluster, "auto-pref", 0) not in (-1, victim), 30)
    cluster.start_broker(victim)
    # No ElectLeaders: the controller's imbalance check moves leadership back by itself.
    wait_until(
        lambda: all(leader(cluster, "auto-pref", p) == preferred[p] for p in range(3)),
        60,
        what="leadership back on the preferred replicas",
    )


def test_a_replica_out_of_sync_leads_only_by_unclean_election(cluster: LocalCluster) -> None:
    """The leader dies while the only other replica is out of the ISR: the partition stays
    offline (no acknowledged record can be lost), unless its topic allows unclean leader
    election or an operator asks for one; the records only the old leader had are then gone."""
    the_leader, follower = 0, 1
    a = admin(cluster)
    for name, unclean in (("clean-only", "false"), ("unclean-ok", "true")):
        a.create_topics(
            [
                NewTopic(
                    name,
                    1,
                    -1,
                    replica_assignment=[[the_leader, follower]],
                    config={"unclean.leader.election.enable": unclean},
                )
            ]
        )[name].result(30)
        wait_until(lambda name=name: isr(cluster, name, 0) == [0, 1], 30)
        # acks=all: both replicas have these before the follower stops.
        produce(cluster.bootstrap_servers, name, [b"both-%d" % i for i in range(10)], acks="all")
    cluster.stop_broker(follower)
    for name in ("clean-only", "unclean-ok"):
        wait_until(lambda name=name: isr(cluster, name, 0) == [the_leader], 30)
        produce(cluster.bootstrap_servers, name, [b"leader-only-%d" % i for i in range(10)])
    cluster.kill_broker(the_leader)
    cluster.start_broker(follower)
    wait_until(lambda: leader(cluster, "unclean-ok", 0) == follower, 60, what="unclean election")
    assert leader(cluster, "clean-only", 0) == -1

    def elected() -> bool:
        # An operator's fresh admin client, as `kafka-leader-election.sh` would be: the
        # one above may still wait for the controller it knew, if that was the old leader.
        fresh = admin(cluster)
        fresh.elect_leaders(ElectionType.UNCLEAN, [TopicPartition("clean-only", 0)]).result(10)
        return leader(cluster, "clean-only", 0) == follower

    wait_until(elected, 60, what="ElectLeaders(UNCLEAN)")
    both = [b"both-%d" % i for i in range(10)]
    for name in ("clean-only", "unclean-ok"):
        wait_until(
            lambda name=name: [v for _, v in consume_all(cluster, name, 1).get(0, [])] == both,
            30,
            what=f"the records both replicas had, alone, on {name}",
        )
        produce(cluster.bootstrap_servers, name, [b"after"], acks="all")
