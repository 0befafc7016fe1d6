"""DeleteRecords (21) on one broker, through confluent-kafka's and kafka-python's admin clients
and on the wire: the log start offset moves, consumers start there, and it survives a restart."""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka import KafkaException, TopicPartition
from kafka import KafkaAdminClient
from kafka import TopicPartition as KpTopicPartition
from kafka.errors import OffsetOutOfRangeError
from kafka_support import (
    INVALID_TOPIC_EXCEPTION,
    NONE,
    OFFSET_OUT_OF_RANGE,
    POLICY_VIOLATION,
    UNKNOWN_TOPIC_OR_PARTITION,
    admin,
    consume,
    create_topic,
    delete_records,
    log_start,
    produce,
)

from samsa.testing import InProcessBroker


def test_confluent_delete_records_moves_the_log_start(broker: InProcessBroker, topic: str) -> None:
    create_topic(broker.bootstrap_servers, topic, partitions=2)
    produce(broker.bootstrap_servers, topic, [b"v%d" % i for i in range(10)], partition=0)
    produce(broker.bootstrap_servers, topic, [b"w%d" % i for i in range(4)], partition=1)
    client = admin(broker.bootstrap_servers)
    futures = client.delete_records(
        [TopicPartition(topic, 0, 6), TopicPartition(topic, 1, -1)], operation_timeout=5
    )
    got = {tp.partition: f.result(15).low_watermark for tp, f in futures.items()}
    assert got == {0: 6, 1: 4}
    assert log_start(broker.port, topic, 0) == 6
    assert [r.offset for r in consume(broker.bootstrap_servers, topic, 0, start=6)] == [6, 7, 8, 9]
    # A consumer with no position starts at the new log start.
    assert [r.value for r in consume(broker.bootstrap_servers, topic, 0, start=0)][:1] == [b"v6"]
    # Beyond the high watermark: OFFSET_OUT_OF_RANGE, and nothing moves.
    (future,) = client.delete_records([TopicPartition(topic, 0, 11)]).values()
    with pytest.raises(KafkaException) as err:
        future.result(15)
    assert err.value.args[0].code() == OFFSET_OUT_OF_RANGE
    assert log_start(broker.port, topic, 0) == 6


def test_kafka_python_delete_records(broker: InProcessBroker, topic: str) -> None:
    create_topic(broker.bootstrap_servers, topic)
    produce(broker.bootstrap_servers, topic, [b"x"] * 5)
    client = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
    try:
        result = client.delete_records({KpTopicPartition(topic, 0): 3}, timeout_ms=5000)
        assert [(tp.partition, r["low_watermark"]) for tp, r in result.items()] == [(0, 3)]
        with pytest.raises(OffsetOutOfRangeError):
            client.delete_records({KpTopicPartition(topic, 0): 6}, timeout_ms=5000)
    finally:
        client.close()
    assert log_start(broker.port, topic, 0) == 3


@pytest.mark.parametrize("version", [0, 1, 2])
def test_delete_records_errors_on_the_wire(
    broker: InProcessBroker, topic: str, version: int
) -> None:
    create_topic(broker.bootstrap_servers, topic)
    compacted = f"{topic}-compacted"
    create_topic(broker.bootstrap_servers, compacted, config={"cleanup.policy": "compact"})
    produce(broker.bootstrap_servers, topic, [b"x"] * 3)
    got = delete_records(
        broker.port,
        {
            (topic, 0): 2,
            (topic, 7): 1,
            ("no-such-topic", 0): 1,
            (compacted, 0): 0,
            ("__consumer_offsets", 0): 0,
        },
        version,
    )
    assert got == {
        (topic, 0): (NONE, 2),
        (topic, 7): (UNKNOWN_TOPIC_OR_PARTITION, -1),
        ("no-such-topic", 0): (UNKNOWN_TOPIC_OR_PARTITION, -1),
        (compacted, 0): (POLICY_VIOLATION, -1),
        ("__consumer_offsets", 0): (INVALID_TOPIC_EXCEPTION, -1),
    }
    # Offsets below the log start change nothing; negative ones other than -1 are refused.
    assert delete_records(broker.port, {(topic, 0): 1}, version) == {(topic, 0): (NONE, 2)}
    assert delete_records(broker.port, {(topic, 0): -2}, version) == {
        (topic, 0): (OFFSET_OUT_OF_RANGE, -1)
    }


def test_the_log_start_survives_a_restart(tmp_path: Path) -> None:
    with InProcessBroker(tmp_path) as b:
        create_topic(b.bootstrap_servers, "kept")
        produce(b.bootstrap_servers, "kept", [b"x"] * 8)
        assert delete_records(b.port, {("kept", 0): 5}) == {("kept", 0): (NONE, 5)}
    with InProcessBroker(tmp_path) as b:
        assert log_start(b.port, "kept", 0) == 5
        assert [r.offset for r in consume(b.bootstrap_servers, "kept", 0, start=5)] == [5, 6, 7]
