"""kafka-verifiable-producer and kafka-verifiable-consumer, the tools of Kafka's own system
tests, against a 3-broker Samsa cluster (RF 3, min.insync.replicas 2) while the leader of a
partition is killed with kill -9: nothing the producer saw acknowledged (acks=all) is lost.

The tools print JSON events (each acknowledged send with its partition and offset; each
consumed record with --verbose); the test reads them, and reads the topic back itself.
"""

from __future__ import annotations

import signal
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from java_support import EventTool
from kafka_support import wait_until

from samsa.local_cluster.cluster import LocalCluster

MESSAGES = 6000
PARTITIONS = 3
# What a send may fail with while a partition's leader is dead and another is elected.
RETRIABLE = {
    "NotLeaderOrFollowerException",
    "NetworkException",
    "TimeoutException",
    "DisconnectException",
    "NotEnoughReplicasException",
    "NotEnoughReplicasAfterAppendException",
}


@pytest.fixture
def tools() -> Iterator[list[EventTool]]:
    started: list[EventTool] = []
    yield started
    for t in started:
        t.stop()


def read_all(bootstrap: str, topic: str) -> dict[tuple[int, int], str]:
    """Every record of the topic, by partition and offset, up to each high watermark."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "verifier",
                         "enable.auto.commit": False})  # fmt: skip
    try:
        ends = {
            p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
            for p in range(PARTITIONS)
        }
        consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
        found: dict[tuple[int, int], str] = {}

        def done() -> bool:
            for m in consumer.consume(500, timeout=0.5):
                if m.error() is None:
                    found[(m.partition(), m.offset())] = (m.value() or b"").decode()
            return all(
                sum(1 for q, _ in found if q == p) >= end for p, end in ends.items()
            )  # fmt: skip

        wait_until(done, timeout=60, what="the whole topic read back")
        return found
    finally:
        consumer.close()


@pytest.mark.slow
def test_verifiable_producer_and_consumer_lose_nothing_acknowledged_through_a_leader_kill(
    own_cluster: LocalCluster, topic: str, group: str, tmp_path: Path, tools: list[EventTool]
) -> None:
    bootstrap = own_cluster.bootstrap_servers
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, PARTITIONS, 3)])[topic].result(timeout=30)

    def leader(partition: int) -> int:
        described = admin.list_topics(topic, timeout=10).topics[topic].partitions[partition]
        return int(described.leader)

    wait_until(lambda: leader(0) >= 0, what="a leader for partition 0")
    consumer = EventTool("kafka-verifiable-consumer", ["--bootstrap-server", bootstrap,
                         "--topic", topic, "--group-id", group, "--reset-policy", "earliest",
                         "--verbose"], tmp_path / "consumer.log")  # fmt: skip
    tools.append(consumer)
    wait_until(lambda: consumer.named("partitions_assigned"), timeout=60, what="consumer joined")
    # The checks below need records acknowledged on every partition, the victim's above all.
    # For keyless records the Java producer (KIP-794) sticks to a partition drawn at random
    # for each batch.size (16 KB) of records: about a dozen draws in this run, and a full
    # `make test` saw one whose 6,000 records all went to partitions 1 and 2 (none failed;
    # the logs held 3,303 and 2,697 records, partition 0 none). Round robin puts every third
    # record on each partition that has a leader.
    producer_config = tmp_path / "producer.properties"
    producer_config.write_text(
        "partitioner.class=org.apache.kafka.clients.producer.RoundRobinPartitioner\n"
    )
    producer = EventTool("kafka-verifiable-producer", ["--bootstrap-server", bootstrap,
                         "--topic", topic, "--max-messages", str(MESSAGES), "--throughput",
                         "400", "--acks", "-1", "--producer.config", str(producer_config)],
                         tmp_path / "producer.log")  # fmt: skip
    tools.append(producer)

    wait_until(
        lambda: len(producer.named("producer_send_success")) >= MESSAGES // 4,
        timeout=60,
        what="a quarter of the records acknowledged",
    )
    victim = leader(0)
    own_cluster.kill_broker(victim)
    assert producer.wait_exit(timeout=180) == 0, producer.events[-3:]
    own_cluster.start_broker(victim)

    acked = {
        (e["partition"], e["offset"]): e["value"] for e in producer.named("producer_send_success")
    }
    # As in Kafka's system tests the producer does not retry (retries=0): a send caught by the
    # kill fails with a retriable error and is not acknowledged; the rest must all be kept.
    failed = Counter(
        e["exception"].rsplit(".", 1)[-1] for e in producer.named("producer_send_error")
    )
    assert set(failed) <= RETRIABLE, failed
    (summary,) = producer.named("tool_data")
    assert (
        summary["sent"] == MESSAGES and summary["acked"] == len(acked) == MESSAGES - failed.total()
    )
    assert len(acked) >= MESSAGES // 2, failed
    assert {p for p, _ in acked} == set(range(PARTITIONS))

    def consumed() -> dict[tuple[int, int], str]:
        return {(e["partition"], e["offset"]): e["value"] for e in consumer.named("record_data")}

    wait_until(
        lambda: consumed().keys() >= acked.keys(),
        timeout=90,
        what="the consumer has every acknowledged record",
    )
    consumer.process.send_signal(signal.SIGTERM)
    consumer.wait_exit(timeout=60)
    assert consumer.named("shutdown_complete"), consumer.events[-3:]
    seen = consumed()
    assert {k: seen[k] for k in acked} == acked, "each acknowledged record where it was acked"

    stored = read_all(bootstrap, topic)
    lost = {k: v for k, v in acked.items() if stored.get(k) != v}
    assert lost == {}, f"{len(lost)} acknowledged records lost or changed, e.g. {list(lost)[:5]}"
    # The killed broker comes back and catches up: every replica in its ISR again.
    own_cluster.wait_ready(timeout=90)
