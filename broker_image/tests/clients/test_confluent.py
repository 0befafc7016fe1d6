"""confluent-kafka (librdkafka) against Samsa, unmodified: produce, consume, offsets, admin."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

import pytest
from clients_support import (
    ACKS,
    CODECS,
    MAX_TS_OFFSETS,
    N_RECORDS,
    PARTITIONS,
    TS_RECORDS,
    Got,
    Sent,
    check_compressed,
    check_consumed,
    fetch_requests,
    make_records,
    max_ts_plan,
    now_ms,
    ts_plan,
    ts_queries,
)
from confluent_kafka import (
    OFFSET_BEGINNING,
    TIMESTAMP_CREATE_TIME,
    TIMESTAMP_LOG_APPEND_TIME,
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicCollection,
    TopicPartition,
)
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
    OffsetSpec,
)
from kafka_support import wait_until

from samsa.testing import InProcessBroker

pytestmark = pytest.mark.timeout(120)


def admin(broker: InProcessBroker) -> AdminClient:
    return AdminClient({"bootstrap.servers": broker.bootstrap_servers})


def create(broker: InProcessBroker, name: str, partitions: int = PARTITIONS, **config: str) -> None:
    a = admin(broker)  # kept alive until the result is in
    a.create_topics([NewTopic(name, partitions, 1, config=config)])[name].result(10)


def producer(broker: InProcessBroker, **config: Any) -> Producer:
    return Producer(
        {
            "bootstrap.servers": broker.bootstrap_servers,
            "enable.idempotence": False,
            "linger.ms": 5,
            **config,
        }
    )


def consumer(broker: InProcessBroker, **config: Any) -> Consumer:
    # A group.id is required by the client; with assign() and no commits no coordinator is used.
    # A short fetch.wait.max.ms: watermark queries wait behind a pending fetch on the connection.
    return Consumer(
        {
            "bootstrap.servers": broker.bootstrap_servers,
            "group.id": "unused",
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "fetch.wait.max.ms": 100,
            **config,
        }
    )


def produce(
    p: Producer, topic: str, records: Sequence[Sent], timestamps: Sequence[int] | None = None
) -> dict[int, tuple[int, int]]:
    """Send records; return index -> (partition, offset) from the delivery reports."""
    delivered: dict[int, tuple[int, int]] = {}
    errors: list[KafkaError] = []

    def report(index: int) -> Callable[[KafkaError | None, Message], None]:
        def on_delivery(err: KafkaError | None, msg: Message) -> None:
            if err is not None:
                errors.append(err)
            else:
                delivered[index] = (msg.partition(), msg.offset())

        return on_delivery

    for i, s in enumerate(records):
        kwargs: dict[str, Any] = {}
        if timestamps is not None:
            kwargs["timestamp"] = timestamps[i]
        p.produce(
            topic,
            value=s.value,
            key=s.key,
            headers=list(s.headers),
            on_delivery=report(s.index),
            **kwargs,
        )
        p.poll(0)
    assert p.flush(30) == 0, "messages still undelivered after 30s"
    assert errors == []
    assert len(delivered) == len(records)
    return delivered


def assign_from(c: Consumer, topic: str, partitions: int, offset: int = OFFSET_BEGINNING) -> None:
    c.assign([TopicPartition(topic, p, offset) for p in range(partitions)])


def consume(c: Consumer, n: int, timeout: float = 60) -> list[Message]:
    """Up to n messages, failing on any error; at most timeout seconds."""
    out: list[Message] = []
    deadline = time.monotonic() + timeout
    while len(out) < n and time.monotonic() < deadline:
        for m in c.consume(min(1000, n - len(out)), 0.5):
            assert m.error() is None, m.error()
            out.append(m)
    return out


def as_got(messages: Sequence[Message]) -> list[Got]:
    return [
        Got(m.partition(), m.offset(), m.key(), m.value(), tuple(m.headers() or ()))
        for m in messages
    ]


def consume_all(
    broker: InProcessBroker, topic: str, n: int, partitions: int = PARTITIONS, **config: Any
) -> list[Got]:
    c = consumer(broker, **config)
    try:
        assign_from(c, topic, partitions)
        got = as_got(consume(c, n))
        # Nothing more than was sent: the log end offsets add up to n.
        ends = [c.get_watermark_offsets(TopicPartition(topic, p), 10)[1] for p in range(partitions)]
        assert sum(ends) == n, f"log end offsets {ends} for {n} records"
        return got
    finally:
        c.close()


# --- 1. produce and consume 10,000 records with every codec -----------------------------------


@pytest.mark.parametrize("codec", CODECS)
def test_roundtrip_every_codec(broker: InProcessBroker, topic: str, codec: str) -> None:
    create(broker, topic)
    sent = make_records()
    delivered = produce(producer(broker, **{"compression.type": codec, "acks": "all"}), topic, sent)
    got = consume_all(broker, topic, N_RECORDS)
    check_consumed(sent, got, delivered)
    check_compressed(broker, topic, codec, sent)


# --- acks, isolation, long poll, LogAppendTime ------------------------------------------------


@pytest.mark.parametrize("acks", ACKS)
def test_every_acks_setting_delivers(broker: InProcessBroker, topic: str, acks: str) -> None:
    create(broker, topic)
    sent = make_records(300)
    delivered = produce(producer(broker, acks=acks), topic, sent)
    got = consume_all(broker, topic, len(sent))
    # With acks=0 the producer never learns the offsets.
    check_consumed(sent, got, delivered if acks != "0" else None)


@pytest.mark.parametrize("isolation", ["read_committed", "read_uncommitted"])
def test_isolation_levels_see_records(broker: InProcessBroker, topic: str, isolation: str) -> None:
    create(broker, topic)
    sent = make_records(300)
    delivered = produce(producer(broker), topic, sent)
    got = consume_all(broker, topic, len(sent), **{"isolation.level": isolation})
    check_consumed(sent, got, delivered)


def test_long_poll_wakes_on_produce(broker: InProcessBroker, topic: str) -> None:
    create(broker, topic, 1)
    c = consumer(broker, **{"fetch.wait.max.ms": 10_000})
    p = producer(broker, **{"linger.ms": 0})
    try:
        before = fetch_requests(broker)
        assign_from(c, topic, 1)
        # Nothing there yet: the consumer's fetch waits at the broker.
        assert c.poll(1.5) is None
        start = time.monotonic()
        p.produce(topic, value=b"late", key=b"k")
        assert p.flush(10) == 0
        msgs = consume(c, 1, timeout=10)
        latency = time.monotonic() - start
        assert [m.value() for m in msgs] == [b"late"]
        # Long-polling: answered when the record arrived, not at fetch.wait.max.ms...
        assert latency < 3, f"record took {latency:.1f}s to arrive"
        # ... and the idle consumer's fetch was held, not answered empty over and over.
        fetches = fetch_requests(broker) - before
        assert fetches <= 4, f"{fetches} fetches for one record"
    finally:
        c.close()


def test_log_append_time_topic(broker: InProcessBroker, topic: str) -> None:
    create(broker, topic, 1, **{"message.timestamp.type": "LogAppendTime"})
    p = producer(broker)
    reports: list[tuple[int, int]] = []
    old = now_ms() - 86_400_000
    before = now_ms()
    for i in range(5):
        p.produce(
            topic,
            value=b"%d" % i,
            timestamp=old,
            on_delivery=lambda err, msg: reports.append(msg.timestamp()),
        )
    assert p.flush(10) == 0
    after = now_ms()
    # The delivery reports carry the broker's append time.
    assert len(reports) == 5
    for ts_type, ts in reports:
        assert ts_type == TIMESTAMP_LOG_APPEND_TIME
        assert before - 1 <= ts <= after + 1
    c = consumer(broker)
    try:
        assign_from(c, topic, 1)
        msgs = consume(c, 5)
    finally:
        c.close()
    assert len(msgs) == 5
    for m in msgs:
        ts_type, ts = m.timestamp()
        assert ts_type == TIMESTAMP_LOG_APPEND_TIME, m.timestamp()
        assert before - 1 <= ts <= after + 1, (ts, before, after)


# --- 2. ListOffsets ---------------------------------------------------------------------------


def produce_timestamped(broker: InProcessBroker, topic: str, stamps: Sequence[int]) -> None:
    """One record per timestamp, in four flushes so that the log has several batches."""
    p = producer(broker)
    sent = make_records(len(stamps), headers=False)
    chunk = (len(stamps) + 3) // 4
    delivered: dict[int, tuple[int, int]] = {}
    for start in range(0, len(stamps), chunk):
        part = sent[start : start + chunk]
        delivered.update(produce(p, topic, part, stamps[start : start + chunk]))
    assert sorted(delivered.values()) == [(0, i) for i in range(len(stamps))]


def test_offsets_for_times(broker: InProcessBroker, topic: str) -> None:
    create(broker, topic, 1)
    base = now_ms() - 600_000
    stamps = ts_plan(base)
    produce_timestamped(broker, topic, stamps)
    c = consumer(broker)
    try:
        for target, expected in ts_queries(base):
            [tp] = c.offsets_for_times([TopicPartition(topic, 0, target)], 10)
            assert tp.error is None
            assert tp.offset == (expected if expected is not None else -1), target
        assert c.get_watermark_offsets(TopicPartition(topic, 0), 10) == (0, TS_RECORDS)
        # Seeking to a time: the first record read is the first at or after it.
        target = base + 10 * 400 + 3
        [tp] = c.offsets_for_times([TopicPartition(topic, 0, target)], 10)
        c.assign([tp])
        [m] = consume(c, 1)
        assert m.offset() == 802
        assert m.timestamp() == (TIMESTAMP_CREATE_TIME, stamps[802])
    finally:
        c.close()


def test_admin_list_offsets(broker: InProcessBroker, topic: str) -> None:
    create(broker, topic, 1)
    base = now_ms() - 600_000
    stamps = ts_plan(base)
    produce_timestamped(broker, topic, stamps)
    a = admin(broker)
    tp = TopicPartition(topic, 0)

    def one(spec: OffsetSpec) -> tuple[int, int]:
        info = a.list_offsets({tp: spec}, request_timeout=10)[tp].result(10)
        return info.offset, info.timestamp

    assert one(OffsetSpec.earliest())[0] == 0
    assert one(OffsetSpec.latest())[0] == TS_RECORDS
    for target, expected in ts_queries(base):
        offset, ts = one(OffsetSpec.for_timestamp(target))
        if expected is None:
            assert offset == -1, target
        else:
            assert (offset, ts) == (expected, stamps[expected]), target
    # The max timestamp is shared by the last two records: the first of them.
    assert one(OffsetSpec.max_timestamp()) == (TS_RECORDS - 2, stamps[-1])


def test_max_timestamp_with_out_of_order_times(broker: InProcessBroker, topic: str) -> None:
    create(broker, topic, 1)
    base = now_ms() - 600_000
    stamps = max_ts_plan(base)
    p = producer(broker, **{"linger.ms": 100})  # one batch
    delivered = produce(p, topic, make_records(len(stamps), headers=False), stamps)
    assert sorted(o for _, o in delivered.values()) == MAX_TS_OFFSETS
    a = admin(broker)
    tp = TopicPartition(topic, 0)
    info = a.list_offsets({tp: OffsetSpec.max_timestamp()}, request_timeout=10)[tp].result(10)
    assert (info.offset, info.timestamp) == (1, base + 3000)
    # The first offset whose timestamp is at least the target, in log order.
    info = a.list_offsets({tp: OffsetSpec.for_timestamp(base + 2200)})[tp].result(10)
    assert info.offset == 1


# --- 3. admin: topics and configs -------------------------------------------------------------


def describe(a: AdminClient, topic: str) -> dict[str, ConfigEntry]:
    res = ConfigResource(ConfigResource.Type.TOPIC, topic)
    return a.describe_configs([res])[res].result(10)


def error_of(fut: Any) -> int:
    with pytest.raises(KafkaException) as info:
        fut.result(10)
    return info.value.args[0].code()


def test_topic_configs_lifecycle(broker: InProcessBroker, topic: str) -> None:
    a = admin(broker)
    configs = {
        "retention.ms": "3600000",
        "cleanup.policy": "compact",
        "max.message.bytes": "2000000",
    }
    a.create_topics([NewTopic(topic, 2, 1, config=configs)])[topic].result(10)

    entries = describe(a, topic)
    for name, value in configs.items():
        assert entries[name].value == value
        assert entries[name].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
        assert not entries[name].is_default
    assert entries["segment.bytes"].value == "1073741824"
    assert entries["segment.bytes"].source == ConfigSource.DEFAULT_CONFIG.value
    assert entries["segment.bytes"].is_default
    assert entries["message.timestamp.type"].value == "CreateTime"

    res = ConfigResource(
        ConfigResource.Type.TOPIC,
        topic,
        incremental_configs=[
            ConfigEntry("retention.ms", "7200000", incremental_operation=AlterConfigOpType.SET),
            ConfigEntry("max.message.bytes", None, incremental_operation=AlterConfigOpType.DELETE),
            ConfigEntry("cleanup.policy", "delete", incremental_operation=AlterConfigOpType.APPEND),
        ],
    )
    a.incremental_alter_configs([res])[res].result(10)
    entries = describe(a, topic)
    assert entries["retention.ms"].value == "7200000"
    assert entries["retention.ms"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert entries["max.message.bytes"].value == "1048588"
    assert entries["max.message.bytes"].source == ConfigSource.DEFAULT_CONFIG.value
    assert entries["cleanup.policy"].value == "compact,delete"

    # The legacy AlterConfigs replaces the whole set of overrides.
    res = ConfigResource(ConfigResource.Type.TOPIC, topic, set_config={"segment.ms": "86400000"})
    a.alter_configs([res])[res].result(10)
    entries = describe(a, topic)
    assert entries["segment.ms"].value == "86400000"
    assert entries["segment.ms"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert entries["retention.ms"].value == "604800000"
    assert entries["retention.ms"].source == ConfigSource.DEFAULT_CONFIG.value
    assert entries["cleanup.policy"].value == "delete"

    # Invalid values are refused and change nothing.
    bad = ConfigResource(
        ConfigResource.Type.TOPIC,
        topic,
        incremental_configs=[
            ConfigEntry("retention.ms", "soon", incremental_operation=AlterConfigOpType.SET)
        ],
    )
    assert error_of(a.incremental_alter_configs([bad])[bad]) == KafkaError.INVALID_CONFIG
    assert describe(a, topic)["retention.ms"].value == "604800000"


def test_broker_configs(broker: InProcessBroker) -> None:
    a = admin(broker)
    res = ConfigResource(ConfigResource.Type.BROKER, "0")
    entries = a.describe_configs([res])[res].result(10)
    assert entries["num.partitions"].value == "1"
    assert entries["num.partitions"].source == ConfigSource.DEFAULT_CONFIG.value
    assert entries["listeners"].source == ConfigSource.STATIC_BROKER_CONFIG.value
    # As configured (the in-process broker asks for port 0).
    assert entries["listeners"].value == "PLAINTEXT://127.0.0.1:0"


def partition_count(a: AdminClient, topic: str) -> int:
    md = a.list_topics(topic, timeout=10).topics[topic]
    return 0 if md.error is not None else len(md.partitions)


def topic_error(a: AdminClient, topic: str) -> int | None:
    """The error describe_topics gives for the topic, None if it exists."""
    fut = a.describe_topics(TopicCollection([topic]), request_timeout=10)[topic]
    try:
        fut.result(10)
    except KafkaException as exc:
        return exc.args[0].code()
    return None


def test_list_all_topics(broker: InProcessBroker, topic: str) -> None:
    create(broker, topic, 2)
    a = admin(broker)
    md = a.list_topics(timeout=10)
    assert len(md.topics[topic].partitions) == 2
    assert [b.id for b in md.brokers.values()] == [0]
    c = consumer(broker)
    try:
        assert topic in c.list_topics(timeout=10).topics
    finally:
        c.close()


def test_create_partitions_and_delete(broker: InProcessBroker, topic: str) -> None:
    a = admin(broker)
    a.create_topics([NewTopic(topic, 2, 1)])[topic].result(10)
    a.create_partitions([NewPartitions(topic, 5)])[topic].result(10)
    wait_until(lambda: partition_count(a, topic) == 5, 10, what="5 partitions in metadata")
    # The new partitions take records.
    p = producer(broker)
    p.produce(topic, value=b"into the new partition", partition=4)
    assert p.flush(10) == 0
    c = consumer(broker)
    try:
        c.assign([TopicPartition(topic, 4, OFFSET_BEGINNING)])
        [m] = consume(c, 1, timeout=20)
        assert (m.partition(), m.offset(), m.value()) == (4, 0, b"into the new partition")
    finally:
        c.close()
    # Partitions never shrink.
    fut = a.create_partitions([NewPartitions(topic, 3)])[topic]
    assert error_of(fut) == KafkaError.INVALID_PARTITIONS

    a.delete_topics([topic])[topic].result(10)
    wait_until(
        lambda: topic_error(a, topic) == KafkaError.UNKNOWN_TOPIC_OR_PART, 10, what="topic gone"
    )
    res = ConfigResource(ConfigResource.Type.TOPIC, topic)
    assert error_of(a.describe_configs([res])[res]) == KafkaError.UNKNOWN_TOPIC_OR_PART
    assert error_of(a.delete_topics([topic])[topic]) == KafkaError.UNKNOWN_TOPIC_OR_PART


def test_create_topic_errors(broker: InProcessBroker, topic: str) -> None:
    a = admin(broker)
    a.create_topics([NewTopic(topic, 1, 1)])[topic].result(10)

    def create_error(name: str, partitions: int = 1, rf: int = 1, **config: str) -> int:
        return error_of(a.create_topics([NewTopic(name, partitions, rf, config=config)])[name])

    assert create_error(topic) == KafkaError.TOPIC_ALREADY_EXISTS
    assert create_error(topic + "-x", **{"retention.ms": "soon"}) == KafkaError.INVALID_CONFIG
    assert create_error(topic + "-y", **{"no.such.config": "1"}) == KafkaError.INVALID_CONFIG
    assert create_error("bad name!") == KafkaError.TOPIC_EXCEPTION
    assert create_error("x" * 250) == KafkaError.TOPIC_EXCEPTION
    assert create_error(topic + "-z", rf=3) == KafkaError.INVALID_REPLICATION_FACTOR
    assert create_error(topic + "-w", partitions=0) == KafkaError.INVALID_PARTITIONS
    # validate_only checks but creates nothing.
    a.create_topics([NewTopic(topic + "-v", 1, 1)], validate_only=True)[topic + "-v"].result(10)
    assert topic_error(a, topic) is None
    for suffix in ("-x", "-y", "-z", "-w", "-v"):
        assert topic_error(a, topic + suffix) == KafkaError.UNKNOWN_TOPIC_OR_PART


# --- errors a producer or consumer sees --------------------------------------------------------


def test_record_larger_than_max_message_bytes_is_refused(
    broker: InProcessBroker, topic: str
) -> None:
    create(broker, topic, 1, **{"max.message.bytes": "2000"})
    p = producer(broker, retries=0)
    errors: list[KafkaError | None] = []
    # Separate batches: Kafka refuses a whole batch larger than max.message.bytes.
    p.produce(topic, value=b"x" * 5000, on_delivery=lambda err, msg: errors.append(err))
    assert p.flush(10) == 0
    p.produce(topic, value=b"small", on_delivery=lambda err, msg: errors.append(err))
    assert p.flush(10) == 0
    codes = sorted(e.code() if e is not None else 0 for e in errors)
    assert codes == [0, KafkaError.MSG_SIZE_TOO_LARGE], errors
    c = consumer(broker)
    try:
        assign_from(c, topic, 1)
        assert [m.value() for m in consume(c, 1)] == [b"small"]
    finally:
        c.close()


def test_offset_out_of_range_resets(broker: InProcessBroker, topic: str) -> None:
    create(broker, topic, 1)
    p = producer(broker)
    produce(p, topic, make_records(10))
    c = consumer(broker, **{"auto.offset.reset": "earliest"})
    try:
        assign_from(c, topic, 1, offset=1000)
        [m] = consume(c, 1)
        assert m.offset() == 0
    finally:
        c.close()
    c = consumer(broker, **{"auto.offset.reset": "latest"})
    try:
        assign_from(c, topic, 1, offset=1000)
        # Reset to the end: the first record read is one produced after the reset, whenever
        # that happened; never one of the ten before.
        got: list[Message] = []
        deadline = time.monotonic() + 20
        while not got and time.monotonic() < deadline:
            p.produce(topic, value=b"after")
            assert p.flush(10) == 0
            got = consume(c, 1, timeout=0.5)
        [m] = got
        assert m.value() == b"after" and m.offset() >= 10
    finally:
        c.close()


def test_describe_configs_synonyms(broker: InProcessBroker, topic: str) -> None:
    # librdkafka always asks for synonyms: Kafka lists the topic override, then broker-level ones.
    create(broker, topic, 1, **{"retention.ms": "3600000"})
    entry = describe(admin(broker), topic)["retention.ms"]
    synonym = entry.synonyms.get("retention.ms")
    assert synonym is not None, f"no synonyms: {entry.synonyms}"
    assert synonym.value == "3600000"
    assert synonym.source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
