"""A real 3-broker cluster in network namespaces under partitions, a one-way cut and added
latency, with an idempotent acks=all producer in the root namespace: leadership moves away
from a cut-off leader, acknowledgements keep coming, and nothing acknowledged is missing when
the partition is read back after healing."""

from __future__ import annotations

import random
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer

from chaos.faults import network as network_faults
from chaos.faults.base import Environment
from chaos.netns import Netns, broker_node
from chaos.netns_cluster import NetnsCluster
from chaos.tests.netns_support import (
    LoadProducer,
    cluster_report,
    create_topic,
    read_partition,
    wait_for,
)
from chaos.tests.test_netns import require_netns

pytestmark = pytest.mark.slow

# Generous: two busy cores shared by several engineers' clusters.
ELECTION_WAIT = 90.0
REJOIN_WAIT = 120.0


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[NetnsCluster]:
    require_netns()
    with Netns(["zk", "b0", "b1", "b2"]) as net, NetnsCluster(net, tmp_path) as c:
        yield c


def leader_and_isr(cluster: NetnsCluster, topic: str) -> tuple[int, list[int]]:
    state = cluster.partition_state(topic, 0)
    isr = state["isr"]
    assert isinstance(isr, list)
    return int(str(state["leader"])), sorted(int(b) for b in isr)


def wait_full_isr(cluster: NetnsCluster, topic: str, timeout: float) -> int:
    def probe() -> int | None:
        leader, isr = leader_and_isr(cluster, topic)
        return leader + 1 if isr == cluster.brokers and leader >= 0 else None

    return wait_for(f"{topic}: every broker in the ISR", probe, timeout) - 1


def probe_write(bootstrap: str, topic: str) -> str:
    """The outcome of one acks=all write without retries: "ok" or the error's name."""
    producer = Producer(
        {"bootstrap.servers": bootstrap, "acks": "all", "retries": 0, "message.timeout.ms": 30000}
    )
    outcome: list[str] = []
    producer.produce(
        topic,
        value=b"probe",
        on_delivery=lambda err, msg: outcome.append("ok" if err is None else err.name()),
    )
    producer.flush(60)
    assert outcome, "the probe write was not answered"
    return outcome[0]


def check_nothing_acknowledged_lost(
    cluster: NetnsCluster, topic: str, loads: list[LoadProducer]
) -> None:
    records = read_partition(cluster.bootstrap_servers, topic)
    values = [v for _, v in records]
    acks = [a for load in loads for a in load.acks]
    missing = {a.value for a in acks} - set(values)
    assert not missing, f"{len(missing)} acknowledged records lost, e.g. {sorted(missing)[:5]}"
    assert len(values) == len(set(values)), "duplicates from idempotent producers"
    # Each record sits at the offset its acknowledgement named.
    at = dict(records)
    moved = [a for a in acks if at.get(a.offset) != a.value]
    assert not moved, f"{len(moved)} acknowledged records not at their offsets"
    # Each producer's own order is kept.
    for load in loads:
        numbers = [int(v[len(load.prefix) :]) for v in values if v.startswith(load.prefix)]
        assert numbers == sorted(numbers), f"records of {load.prefix!r} reordered"


def leader_cut_off(cluster: NetnsCluster, topic: str, old: int, zookeeper_only: bool) -> None:
    """Cut the partition's leader ``old`` from ZooKeeper (and, unless ``zookeeper_only``, from
    the other brokers) under an idempotent acks=all producer, then heal; check what users see.

    Its ZooKeeper session expires, so the controller (another broker) elects a new leader
    and counts ``old`` as gone. ``old`` is not told (a controller only talks to live brokers)
    and, as a Kafka broker in ZooKeeper mode does, still calls itself the leader: a producer
    whose metadata comes from it alone hears nothing until healing (librdkafka asks its one
    connection). What must hold: a producer asking the majority side is acknowledged by the
    new leader within a bounded wait; after healing ``old`` follows again and rejoins the
    ISR, the first producer is acknowledged again; and nothing acknowledged by anyone (the
    cut-off leader included) is missing or moved."""
    old_epoch = int(str(cluster.partition_state(topic, 0)["leader_epoch"]))
    early = LoadProducer(cluster.bootstrap_servers, topic, prefix=b"e")
    loads = [early]
    try:
        wait_for("first acknowledgements", lambda: early.acked() >= 200, 60)
        majority = [b for b in cluster.brokers if b != old]
        cut_at = time.monotonic()
        far = ["zk"] if zookeeper_only else ["zk", *(broker_node(b) for b in majority)]
        cluster.network.partition([broker_node(old)], far)

        def new_leader() -> int | None:
            state = cluster.partition_state(topic, 0)
            leader = int(str(state["leader"]))
            fresh = int(str(state["leader_epoch"])) > old_epoch
            return leader + 1 if fresh and leader not in (old, -1) else None

        leader = wait_for("a new leader", new_leader, ELECTION_WAIT) - 1
        elected_at = time.monotonic()
        late = LoadProducer(",".join(cluster.bootstrap(b) for b in majority), topic, prefix=b"l")
        loads.append(late)
        wait_for("acks from the new leader", lambda: late.acked() >= 200, 120)
        first_ack = min(a.acked for a in late.acks)
        healed_at = time.monotonic()
        cluster.network.heal()
        during = len(early.acked_between(cut_at + 1, healed_at))
        print(
            f"\nleader {old} cut off ({'ZooKeeper' if zookeeper_only else 'everyone'}): "
            f"new leader {leader} after {elected_at - cut_at:.1f} s, "
            f"first acknowledgement from it {first_ack - cut_at:.1f} s after the cut; "
            f"the first producer had {during} acknowledgements meanwhile"
        )
        wait_for("acks again for the early producer", lambda: early.acks_since(healed_at), 120)
        wait_for(
            f"broker {old} registered again",
            lambda: old in cluster.registered_brokers(),
            REJOIN_WAIT,
        )
        wait_full_isr(cluster, topic, REJOIN_WAIT)
        print(
            f"broker {old} back in the ISR, the early producer acknowledged again, "
            f"{time.monotonic() - healed_at:.1f} s after healing"
        )
    except AssertionError as exc:
        # Read before healing ends the state that failed (a cut-off broker's view included).
        raise AssertionError(f"{exc}\n{cluster_report(cluster, topic, loads)}") from None
    finally:
        cluster.network.heal()
        for load in loads:
            load.stop()
    for load in loads:
        assert not load.errors, load.errors[:5]
    check_nothing_acknowledged_lost(cluster, topic, loads)


def test_a_leader_cut_off_from_brokers_and_zookeeper_loses_leadership_and_loses_nothing(
    cluster: NetnsCluster,
):
    topic = "cut-leader"
    create_topic(cluster.bootstrap_servers, topic, {"min.insync.replicas": "2"})
    leader_cut_off(cluster, topic, wait_full_isr(cluster, topic, 60), zookeeper_only=False)


def test_the_controller_and_leader_cut_off_from_zookeeper_hands_both_over(
    cluster: NetnsCluster,
):
    """The controller, also the partition's leader, loses ZooKeeper but not the brokers."""
    topic = "controller-cut"
    controller = cluster.controller()
    others = [b for b in cluster.brokers if b != controller]
    create_topic(
        cluster.bootstrap_servers, topic, {"min.insync.replicas": "2"}, [controller, *others]
    )
    assert wait_full_isr(cluster, topic, 60) == controller
    leader_cut_off(cluster, topic, controller, zookeeper_only=True)
    assert cluster.controller() != controller


def test_a_follower_cut_one_way_from_the_leader_leaves_the_isr_and_rejoins(
    cluster: NetnsCluster,
):
    topic = "one-way"
    create_topic(cluster.bootstrap_servers, topic, {"min.insync.replicas": "2"})
    leader = wait_full_isr(cluster, topic, 60)
    # Not the controller: cut one way from the leader, the controller could not answer the
    # leader's AlterPartition, and the ISR would stay as it is (as in Kafka).
    controller = cluster.controller()
    follower = next(b for b in cluster.brokers if b not in (leader, controller))
    load = LoadProducer(cluster.bootstrap_servers, topic)
    try:
        wait_for("first acknowledgements", lambda: load.acked() >= 200, 60)
        cut_at = time.monotonic()
        # The follower's fetches never reach the leader; the leader's packets still reach it.
        cluster.network.one_way(broker_node(follower), broker_node(leader))

        def shrunk() -> bool:
            now_leader, isr = leader_and_isr(cluster, topic)
            return now_leader == leader and follower not in isr and len(isr) == 2

        wait_for(f"broker {follower} out of the ISR", shrunk, 60)
        shrunk_at = time.monotonic()
        # The two brokers left are enough for min.insync.replicas=2: writes go on.
        wait_for("acks with the ISR shrunk", lambda: len(load.acks_since(shrunk_at)) >= 200, 60)
        print(f"\nfollower {follower} out of the ISR {shrunk_at - cut_at:.1f} s after the cut")
        cluster.network.heal()
        healed_at = time.monotonic()
        wait_full_isr(cluster, topic, REJOIN_WAIT)
        print(f"back in the ISR {time.monotonic() - healed_at:.1f} s after healing")
    finally:
        cluster.network.heal()
        load.stop()
    assert not load.errors, load.errors[:5]
    check_nothing_acknowledged_lost(cluster, topic, [load])


def test_latency_on_the_leader_slows_acknowledgements_until_removed(cluster: NetnsCluster):
    topic = "slow-leader"
    create_topic(cluster.bootstrap_servers, topic, {"min.insync.replicas": "2"})
    leader = wait_full_isr(cluster, topic, 60)
    load = LoadProducer(cluster.bootstrap_servers, topic)
    try:
        wait_for("first acknowledgements", lambda: load.acked() >= 200, 60)
        cluster.network.delay(broker_node(leader), 150, 50)
        delayed_at = time.monotonic()
        wait_for("acks under latency", lambda: len(load.acks_since(delayed_at)) >= 100, 120)
        slowed = load.acks_since(delayed_at)
        cluster.network.heal()
        healed_at = time.monotonic()
        wait_for("acks after healing", lambda: len(load.acks_since(healed_at)) >= 200, 60)
        after = load.acks_since(healed_at)
    finally:
        cluster.network.heal()
        load.stop()
    # Every acknowledgement sent while delayed left the leader 150 +- 50 ms late.
    assert min(a.acked - a.sent for a in slowed) >= 0.1
    # Latency below the replica lag limit does not cost the ISR anything.
    assert leader_and_isr(cluster, topic) == (leader, cluster.brokers)
    median = sorted(a.acked - a.sent for a in slowed)[len(slowed) // 2]
    median_after = sorted(a.acked - a.sent for a in after)[len(after) // 2]
    print(f"\nack latency median {median * 1000:.0f} ms delayed, {median_after * 1000:.0f} after")
    assert not load.errors, load.errors[:5]
    check_nothing_acknowledged_lost(cluster, topic, [load])


def test_a_leader_cut_off_from_the_brokers_only_shrinks_to_itself_and_acks_nothing(
    cluster: NetnsCluster,
):
    """The leader, also the controller, keeps ZooKeeper but loses both followers: it stays
    the leader and shrinks the ISR to itself; below min.insync.replicas it acknowledges no
    acks=all write until the followers are back in the ISR after healing."""
    topic = "cut-followers"
    controller = cluster.controller()
    followers = [b for b in cluster.brokers if b != controller]
    create_topic(
        cluster.bootstrap_servers, topic, {"min.insync.replicas": "2"}, [controller, *followers]
    )
    assert wait_full_isr(cluster, topic, 60) == controller
    load = LoadProducer(cluster.bootstrap_servers, topic)
    try:
        wait_for("first acknowledgements", lambda: load.acked() >= 200, 60)
        cut_at = time.monotonic()
        cluster.network.partition([broker_node(controller)], [broker_node(b) for b in followers])
        wait_for(
            "the ISR shrunk to the leader",
            lambda: leader_and_isr(cluster, topic) == (controller, [controller]),
            60,
        )
        shrunk_at = time.monotonic()
        # A write now is refused at once, as Kafka refuses it: the ISR is below
        # min.insync.replicas.
        assert probe_write(cluster.bootstrap(controller), topic) == "NOT_ENOUGH_REPLICAS"
        healed_at = time.monotonic()
        cluster.network.heal()
        early = load.acked_between(shrunk_at, healed_at)
        wait_full_isr(cluster, topic, REJOIN_WAIT)
        wait_for("acks after healing", lambda: len(load.acks_since(healed_at)) >= 200, 120)
        print(
            f"\nleader {controller} alone: ISR [{controller}] {shrunk_at - cut_at:.1f} s after "
            f"the cut, whole again {time.monotonic() - healed_at:.1f} s after healing"
        )
    finally:
        cluster.network.heal()
        load.stop()
    assert early == [], f"{len(early)} writes acknowledged by a leader alone in its ISR"
    assert not load.errors, load.errors[:5]
    check_nothing_acknowledged_lost(cluster, topic, [load])


SEED = 19
# Every kind once, in a seeded order: the short campaign (chaos/tests/test_campaign.py) draws
# each network kind again, among the others, and `make chaos` draws them for 300 faults.
ROUNDS = 1
HOLD_S = 6.0  # longer than the session timeout (4 s): cut-off brokers lose their sessions


def test_a_seeded_run_of_network_faults_under_load_loses_nothing(cluster: NetnsCluster):
    """Every network kind, drawn from a seed, one after another on the same cluster: after
    each heal the cluster is whole again (every broker registered and in the ISR, the
    producer acknowledged) within a bounded wait, and at the end nothing acknowledged is
    missing, duplicated or reordered."""
    env: Environment = cluster
    topic = "mixed"
    create_topic(cluster.bootstrap_servers, topic, {"min.insync.replicas": "2"})
    wait_full_isr(cluster, topic, 60)
    rng = random.Random(SEED)
    load = LoadProducer(cluster.bootstrap_servers, topic)
    done = []
    try:
        wait_for("first acknowledgements", lambda: load.acked() >= 200, 60)
        kinds = list(network_faults.KINDS) * ROUNDS
        rng.shuffle(kinds)
        for kind in kinds:
            fault = kind.inject(env, rng)
            # The fault's duration is the point here, not a wait for something to happen.
            time.sleep(HOLD_S)
            fault.heal()
            healed_at = time.monotonic()
            wait_for(
                "every broker registered",
                lambda: cluster.registered_brokers() == cluster.brokers,
                REJOIN_WAIT,
            )
            wait_full_isr(cluster, topic, REJOIN_WAIT)
            wait_for(
                "acks after healing",
                lambda since=healed_at: len(load.acks_since(since)) >= 50,  # type: ignore[misc]
                120,
            )
            done.append((fault.describe(), round(time.monotonic() - healed_at, 1)))
    finally:
        cluster.network.heal()
        load.stop()
    print("\n" + "\n".join(f"{d} whole again after {s} s" for d, s in done))
    assert not load.errors, load.errors[:5]
    check_nothing_acknowledged_lost(cluster, topic, [load])


def test_a_killed_broker_and_a_restarted_zookeeper_come_back_in_their_namespaces(
    cluster: NetnsCluster,
):
    """What the campaign's other kinds do to a namespaced cluster: kill -9 of the leader and
    a ZooKeeper restart; each process comes back at its node's address."""
    topic = "restarts"
    create_topic(cluster.bootstrap_servers, topic, {"min.insync.replicas": "2"})
    leader = wait_full_isr(cluster, topic, 60)
    load = LoadProducer(cluster.bootstrap_servers, topic)
    try:
        wait_for("first acknowledgements", lambda: load.acked() >= 200, 60)
        cluster.kill_broker(leader)
        assert cluster.broker_pid(leader) is None
        cluster.start_broker(leader)
        cluster.wait_ready(brokers=[leader])
        wait_full_isr(cluster, topic, REJOIN_WAIT)
        old_zookeeper = cluster.zookeeper_pid
        cluster.restart_zookeeper()
        assert cluster.zookeeper_pid != old_zookeeper
        restarted_at = time.monotonic()
        wait_for("acks after the restarts", lambda: len(load.acks_since(restarted_at)) >= 200, 120)
        assert cluster.registered_brokers() == cluster.brokers
    finally:
        load.stop()
    assert not load.errors, load.errors[:5]
    check_nothing_acknowledged_lost(cluster, topic, [load])
