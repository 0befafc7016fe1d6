"""The transaction coordinator in a 3-broker cluster, with confluent-kafka's transactional
producer: transactions across 6 partitions read back by both isolation levels with offsets
committed in them, a zombie fenced, and the coordinator's broker killed with -9 in mid-commit,
after which every transaction is committed or aborted on all its partitions, never half."""

from __future__ import annotations

import random
import threading
import time
from collections import Counter
from pathlib import Path

import pytest
from cluster_support import ClusterFactory, create_topic, wait_until
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from eos_support import kill_loop, read
from kafka_support import Wire

from samsa.local_cluster.cluster import LocalCluster
from samsa.protocol.messages import build, request_type

pytestmark = pytest.mark.timeout(600)

PARTITIONS = 6
TXN_PARTITIONS = 3
CONFIG = {
    "transaction_state_log_num_partitions": TXN_PARTITIONS,
    "transaction_state_log_replication_factor": 3,
    "transaction_state_log_min_isr": 2,
    "offsets_topic_replication_factor": 3,
    "transaction_abort_timed_out_transaction_cleanup_interval_ms": 1000,
}


def producer(cluster: LocalCluster, txn_id: str) -> Producer:
    return Producer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "transactional.id": txn_id,
            "transaction.timeout.ms": 60_000,
            "linger.ms": 5,
        }
    )


def read_values(cluster: LocalCluster, topic: str, isolation: str, expect: int) -> list[str]:
    """Every value of the topic, read until ``expect`` have come and every partition's end
    (the last stable offset for read_committed) is reached."""
    return read(cluster.bootstrap_servers, topic, isolation, PARTITIONS, expect)


def coordinator_of(cluster: LocalCluster, txn_id: str, alive: list[int]) -> int:
    """The transactional id's coordinator, as clients find it (FindCoordinator, key type 1)."""

    def found() -> tuple[int] | None:  # a tuple: broker 0 is a coordinator too
        for b in alive:
            with Wire(cluster.broker(b).port, timeout=10) as wire:
                request = build(request_type(10, 3), {"key": txn_id, "key_type": 1})
                r = wire.request(10, 3, request)
            if r.error_code == 0:
                return (int(r.node_id),)
        return None

    return wait_until(found, 60, what="the coordinator")[0]


def test_transactions_and_fencing_across_the_cluster(start_cluster: ClusterFactory) -> None:
    cluster = start_cluster(3, **CONFIG)
    src, out = "tx-src", "tx-out"
    create_topic(cluster, src, PARTITIONS, 3, **{"min.insync.replicas": "2"})
    create_topic(cluster, out, PARTITIONS, 3, **{"min.insync.replicas": "2"})
    feeder = Producer({"bootstrap.servers": cluster.bootstrap_servers})
    for i in range(60):
        feeder.produce(src, str(i).encode(), partition=i % PARTITIONS)
    feeder.flush(30)

    # Consume-process-produce: every input read, transformed and written with its offsets.
    group = "copier"
    consumer = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
        }
    )
    p = producer(cluster, "copier-tx")
    p.init_transactions(60)
    consumer.subscribe([src])
    copied = 0
    rounds = 0
    while copied < 60:
        p.begin_transaction()
        batch = consumer.consume(25, 5)
        for msg in batch:
            if msg.error() is None:
                p.produce(out, b"c" + (msg.value() or b""), partition=msg.partition())
                copied += 1
        p.send_offsets_to_transaction(
            consumer.position(consumer.assignment()), consumer.consumer_group_metadata(), 60
        )
        # Every other round is aborted and done again: neither its output nor its offsets stay.
        if rounds % 2 == 1:
            p.abort_transaction(60)
            copied -= sum(1 for m in batch if m.error() is None)
            committed = consumer.committed(consumer.assignment(), 30)
            for tp in committed:
                consumer.seek(TopicPartition(tp.topic, tp.partition, max(tp.offset, 0)))
        else:
            p.commit_transaction(60)
        rounds += 1
    consumer.close()
    committed_values = read_values(cluster, out, "read_committed", 60)
    assert Counter(committed_values) == Counter(f"c{i}" for i in range(60))
    uncommitted = read_values(cluster, out, "read_uncommitted", len(committed_values))
    assert set(uncommitted) == set(committed_values) and len(uncommitted) >= 60

    # A zombie: a second producer with the same transactional id fences the first.
    zombie = producer(cluster, "copier-tx")  # the id the copier used
    zombie.init_transactions(60)
    with pytest.raises(KafkaException) as info:
        p.begin_transaction()
        p.produce(out, b"from-the-fenced-one", partition=0)
        p.commit_transaction(30)
    assert info.value.args[0].code() in (KafkaError._FENCED, KafkaError.PRODUCER_FENCED)


def test_coordinator_killed_mid_commit_leaves_no_half_transaction(
    start_cluster: ClusterFactory,
) -> None:
    cluster = start_cluster(3, **CONFIG)
    topic = "tx-kill"
    create_topic(cluster, topic, PARTITIONS, 3, **{"min.insync.replicas": "2"})
    txn_id = "killed-coordinator"
    rng = random.Random(17)
    per_round = 60
    outcomes: list[str] = []
    for round_no in range(3):
        p = producer(cluster, txn_id)
        p.init_transactions(120)
        p.begin_transaction()
        for i in range(per_round):
            p.produce(topic, f"r{round_no}-{i}".encode(), partition=i % PARTITIONS)
        p.flush(60)
        victim = coordinator_of(cluster, txn_id, [0, 1, 2])
        result: list[BaseException | None] = []

        def commit(prod: Producer = p, sink: list[BaseException | None] = result) -> None:
            try:
                prod.commit_transaction(120)
                sink.append(None)
            except KafkaException as exc:
                sink.append(exc)

        t = threading.Thread(target=commit)
        t.start()
        time.sleep(rng.uniform(0, 0.05))  # a random point in the commit, not a synchronisation
        cluster.kill_broker(victim)
        t.join(150)
        assert not t.is_alive(), "commit_transaction never returned"
        if result[0] is None:
            outcomes.append("committed")
        else:
            err = result[0].args[0]
            assert err.txn_requires_abort() or err.retriable(), err
            p.abort_transaction(120)
            outcomes.append("aborted")
        cluster.start_broker(victim)
        cluster.wait_ready(120)

    values = read_values(cluster, topic, "read_committed", 0)
    per = Counter(v.split("-")[0] for v in values)
    for round_no, outcome in enumerate(outcomes):
        seen = per.get(f"r{round_no}", 0)
        assert seen == (per_round if outcome == "committed" else 0), (round_no, outcome, seen)
    everything = read_values(cluster, topic, "read_uncommitted", 3 * per_round)
    assert len(everything) >= 3 * per_round


@pytest.mark.slow
def test_application_killed_20_times_on_the_cluster_every_input_once(
    start_cluster: ClusterFactory, tmp_path: Path
) -> None:
    """The exactly-once application (librdkafka) across 6 partitions (RF=3) killed with -9
    twenty times over 3,000 inputs: the suite's long kill loop, run once. Kafka's Java client
    runs the same loop with five kills (tests/clients/test_java_transactions.py), as it pays
    for a JVM on each restart."""

    cluster = start_cluster(3, **CONFIG)
    inputs = 3000
    committed, everything = kill_loop(
        cluster.bootstrap_servers, tmp_path / "app.log", inputs=inputs, kills=20, replication=3
    )
    assert committed == Counter(f"out-{i}" for i in range(inputs))
    assert set(everything) == set(committed)
    assert sum(n - 1 for n in everything.values()) > 0, "no kill landed inside a transaction"
