"""Consumer groups on the replicated cluster: offsets in the replicated __consumer_offsets,
and a coordinator that moves with its partition's leader."""

from __future__ import annotations

import threading

from cluster_support import admin, create_topic, wait_until
from confluent_kafka import (
    Consumer,
    ConsumerGroupTopicPartitions,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)

from samsa.local_cluster.cluster import LocalCluster

RECORDS = 20_000
# Commit errors that mean "ask again": the coordinator moved, is loading, or is rebalancing.
RETRY_COMMIT = {
    KafkaError.NOT_COORDINATOR,
    KafkaError.COORDINATOR_NOT_AVAILABLE,
    KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
    KafkaError.REQUEST_TIMED_OUT,
    KafkaError.REBALANCE_IN_PROGRESS,
    KafkaError._TIMED_OUT,
    KafkaError._TRANSPORT,
}


def coordinator_of(cluster: LocalCluster, group: str) -> int:
    client = admin(cluster)  # kept alive until the answer is in: librdkafka drops it otherwise
    description = client.describe_consumer_groups([group])[group].result(30)
    return int(description.coordinator.id)


def committed(cluster: LocalCluster, group: str, topic: str, partitions: int) -> dict[int, int]:
    request = ConsumerGroupTopicPartitions(
        group, [TopicPartition(topic, p) for p in range(partitions)]
    )
    client = admin(cluster)
    result = client.list_consumer_group_offsets([request])[group].result(10)
    return {tp.partition: tp.offset for tp in result.topic_partitions}


def test_group_survives_the_loss_of_its_coordinator(cluster: LocalCluster) -> None:
    create_topic(cluster, "orders", partitions=6, rf=3, **{"min.insync.replicas": "2"})
    p = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all", "linger.ms": 5})
    for i in range(RECORDS):
        p.produce("orders", key=b"%d" % i, value=b"%08d" % i)
    assert p.flush(60) == 0
    seen: dict[tuple[int, int], int] = {}
    lock = threading.Lock()
    stop = threading.Event()
    errors: list[str] = []

    def consume(name: str) -> None:
        c = Consumer(
            {
                "bootstrap.servers": cluster.bootstrap_servers,
                "group.id": "billing",
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
                "session.timeout.ms": 10000,
            }
        )
        c.subscribe(["orders"])
        uncommitted = False
        try:
            while not stop.is_set():
                m = c.poll(0.2)
                if m is None:
                    # A quiet moment: commit what was consumed since the last commit.
                    if uncommitted:
                        uncommitted = not commit(c, name)
                    continue
                if m.error():
                    errors.append(str(m.error()))
                    continue
                with lock:
                    seen[(m.partition(), m.offset())] = seen.get((m.partition(), m.offset()), 0) + 1
                uncommitted = True
                if m.offset() % 50 == 0:
                    uncommitted = not commit(c, name)
        finally:
            c.close()

    def commit(c: Consumer, name: str) -> bool:
        """Commit the consumer's positions; False if the commit must be made again.

        A commit can fail with a retriable error while the coordinator moves or its acks=all
        write to __consumer_offsets times out, and a commit that failed is not applied, as in
        Kafka; the application commits again at its next quiet moment. A consumer whose
        partitions a rebalance has just revoked has nothing to commit (_NO_OFFSET): their new
        owner starts from the last commit, consumes again and commits. The consumers run
        until every offset is committed: once, they stopped as soon as the restarted broker
        was ready, and a rebalance still under way then left the end of a revoked partition
        consumed but never committed."""
        try:
            done = c.commit(asynchronous=False)
        except KafkaException as exc:
            error = exc.args[0]
            if error.code() == KafkaError._NO_OFFSET:
                return True
            errors.append(f"{name} commit: {error}")
            if not error.retriable() and error.code() not in RETRY_COMMIT:
                raise
            return False
        refused = [f"{tp.partition}: {tp.error}" for tp in done or [] if tp.error]
        if refused:
            errors.append(f"{name} commit refused for {refused}")
        return not refused

    last: dict[int, int] = {}

    def all_committed() -> bool:
        last.clear()
        last.update(committed(cluster, "billing", "orders", 6))
        return sum(last.values()) == RECORDS

    def wait_all_committed(what: str) -> None:
        try:
            wait_until(all_committed, 60, what=what)
        except AssertionError as exc:
            raise AssertionError(f"{exc}: committed {last}, errors {errors[-10:]}") from None

    threads = [threading.Thread(target=consume, args=(f"c{i}",)) for i in range(2)]
    for t in threads:
        t.start()
    try:
        wait_until(lambda: len(seen) > RECORDS // 4, 120, what="consumption to start")
        victim = coordinator_of(cluster, "billing")
        cluster.kill_broker(victim)
        wait_until(
            lambda: coordinator_of(cluster, "billing") != victim, 60, what="a new coordinator"
        )
        wait_until(lambda: len(seen) >= RECORDS, 180, what="every record consumed")
        cluster.start_broker(victim)
        cluster.wait_ready(60)
        wait_all_committed("every offset committed by the running consumers")
    finally:
        stop.set()
        for t in threads:
            t.join(30)
    assert len(seen) == RECORDS
    # Redelivery is possible only for records consumed but not yet committed at the kill.
    redelivered = sum(n - 1 for n in seen.values())
    assert redelivered < RECORDS // 10
    # The commits survive the coordinator's loss, its restart and the consumers' leaving.
    wait_all_committed("every offset still committed once the consumers left")
