"""confluent-kafka's transactional producer against a standalone broker: commit and abort
read back with read_committed and read_uncommitted consumers, zombie fencing, offsets
committed in the transaction, a timed-out transaction, and bad input."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka_support import wait_until

from samsa.testing import InProcessBroker

pytestmark = pytest.mark.timeout(120)

PARTITIONS = 3


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def create_topic(broker: InProcessBroker, name: str, partitions: int = PARTITIONS) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    for f in admin.create_topics([NewTopic(name, partitions, 1)]).values():
        f.result(30)


def txn_producer(broker: InProcessBroker, txn_id: str, **extra: object) -> Producer:
    return Producer(
        {
            "bootstrap.servers": broker.bootstrap_servers,
            "transactional.id": txn_id,
            "transaction.timeout.ms": 10_000,
            "linger.ms": 5,
            **extra,
        }
    )


def read_all(
    broker: InProcessBroker, topic: str, isolation: str, expect: int, timeout_s: float = 20
) -> list[str]:
    """Every value of ``topic`` from the start, waiting until ``expect`` have come or the
    partitions' ends are reached past the deadline's first half."""
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap_servers,
            "group.id": _name("reader"),
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "isolation.level": isolation,
            "enable.partition.eof": True,
        }
    )
    try:
        consumer.subscribe([topic])
        values: list[str] = []
        eof: set[int] = set()
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() == KafkaError._PARTITION_EOF:
                    eof.add(msg.partition())
                    if len(values) >= expect and len(eof) == PARTITIONS:
                        break
                    continue
                raise KafkaException(msg.error())
            values.append(msg.value().decode())
        return sorted(values)
    finally:
        consumer.close()


@pytest.fixture
def topic(broker: InProcessBroker) -> Iterator[str]:
    name = _name("txn")
    create_topic(broker, name)
    yield name


def test_committed_and_aborted_transactions_as_each_isolation_level_reads_them(
    broker: InProcessBroker, topic: str
) -> None:
    p = txn_producer(broker, _name("tx"))
    p.init_transactions(30)
    p.begin_transaction()
    for i in range(30):
        p.produce(topic, f"committed-{i}".encode(), partition=i % PARTITIONS)
    p.commit_transaction(30)
    p.begin_transaction()
    for i in range(12):
        p.produce(topic, f"aborted-{i}".encode(), partition=i % PARTITIONS)
    p.flush(30)
    p.abort_transaction(30)
    p.begin_transaction()
    p.produce(topic, b"committed-last", partition=0)
    p.commit_transaction(30)

    committed = sorted([f"committed-{i}" for i in range(30)] + ["committed-last"])
    assert read_all(broker, topic, "read_committed", len(committed)) == committed
    uncommitted = read_all(broker, topic, "read_uncommitted", 43)
    assert uncommitted == sorted(committed + [f"aborted-{i}" for i in range(12)])


def test_a_second_producer_with_the_same_id_fences_the_first(
    broker: InProcessBroker, topic: str
) -> None:
    txn_id = _name("zombie")
    first = txn_producer(broker, txn_id)
    first.init_transactions(30)
    first.begin_transaction()
    first.produce(topic, b"from-the-zombie", partition=0)
    first.flush(30)

    second = txn_producer(broker, txn_id)
    second.init_transactions(30)  # aborts the first one's transaction
    second.begin_transaction()
    second.produce(topic, b"from-the-new-one", partition=1)
    second.commit_transaction(30)

    with pytest.raises(KafkaException) as info:
        first.produce(topic, b"late", partition=0)
        first.commit_transaction(30)
    assert info.value.args[0].code() in (KafkaError._FENCED, KafkaError.PRODUCER_FENCED)
    assert info.value.args[0].fatal()
    assert read_all(broker, topic, "read_committed", 1) == ["from-the-new-one"]


def test_consume_process_produce_commits_offsets_in_the_transaction(
    broker: InProcessBroker,
) -> None:
    source, sink, group = _name("in"), _name("out"), _name("app")
    create_topic(broker, source)
    create_topic(broker, sink)
    feeder = Producer({"bootstrap.servers": broker.bootstrap_servers})
    for i in range(20):
        feeder.produce(source, str(i).encode(), partition=i % PARTITIONS)
    feeder.flush(30)

    def run(limit: int, commit: bool) -> int:
        consumer = Consumer(
            {
                "bootstrap.servers": broker.bootstrap_servers,
                "group.id": group,
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
                "isolation.level": "read_committed",
            }
        )
        producer = txn_producer(broker, f"{group}-tx")
        producer.init_transactions(30)
        consumer.subscribe([source])
        producer.begin_transaction()
        seen = 0
        deadline = time.monotonic() + 30
        while seen < limit and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None or msg.error():
                continue
            producer.produce(sink, b"x" + msg.value(), partition=msg.partition())
            seen += 1
        producer.send_offsets_to_transaction(
            consumer.position(consumer.assignment()), consumer.consumer_group_metadata(), 30
        )
        if commit:
            producer.commit_transaction(30)
        else:
            producer.abort_transaction(30)
        consumer.close()
        return seen

    assert run(8, commit=True) == 8
    assert run(5, commit=False) == 5  # aborted: neither its output nor its offsets count
    assert run(12, commit=True) == 12  # resumes after the first eight
    out = read_all(broker, sink, "read_committed", 20)
    assert out == sorted(f"x{i}" for i in range(20))

    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    from confluent_kafka import ConsumerGroupTopicPartitions

    listed = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])
    offsets = listed[group].result(30).topic_partitions
    assert sum(tp.offset for tp in offsets if tp.topic == source) == 20


def test_a_transaction_left_open_past_its_timeout_is_aborted(
    broker: InProcessBroker, topic: str
) -> None:
    p = txn_producer(broker, _name("slow"), **{"transaction.timeout.ms": 1_000})
    p.init_transactions(30)
    p.begin_transaction()
    p.produce(topic, b"never-visible", partition=2)
    p.flush(30)
    # The coordinator aborts it: the partition's last stable offset moves past the record and
    # its abort marker, and read_committed readers get past it without the record.
    watcher = Consumer(
        {
            "bootstrap.servers": broker.bootstrap_servers,
            "group.id": _name("lso"),
            "isolation.level": "read_committed",
        }
    )
    try:
        wait_until(
            lambda: (
                watcher.get_watermark_offsets(TopicPartition(topic, 2), 5, cached=False)[1] >= 2
            ),
            20,
            what="the timed-out transaction aborted",
        )
    finally:
        watcher.close()
    assert read_all(broker, topic, "read_committed", 0, timeout_s=8) == []
    with pytest.raises(KafkaException):
        p.commit_transaction(30)
    assert read_all(broker, topic, "read_uncommitted", 1) == ["never-visible"]


def test_offsets_of_the_committed_transaction_only(broker: InProcessBroker) -> None:
    """OffsetFetch with require_stable sees pending transactional offsets as unstable until
    the marker, then the committed ones."""
    src, group = _name("src"), _name("grp")
    create_topic(broker, src, 1)
    producer = txn_producer(broker, _name("offs"))
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce(src, b"v", partition=0)
    meta = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": group})
    producer.send_offsets_to_transaction(
        [TopicPartition(src, 0, 7)], meta.consumer_group_metadata(), 30
    )
    producer.abort_transaction(30)
    producer.begin_transaction()
    producer.send_offsets_to_transaction(
        [TopicPartition(src, 0, 3)], meta.consumer_group_metadata(), 30
    )
    producer.commit_transaction(30)
    got = meta.committed([TopicPartition(src, 0)], 30)
    assert got[0].offset == 3
    meta.close()
