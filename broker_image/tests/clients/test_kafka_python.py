"""kafka-python against Samsa, unmodified: produce, consume, offsets, admin."""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from typing import Any

import kafka.errors as Errors
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
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import AlterConfigOp, ConfigResource, ConfigResourceType, OffsetSpec
from kafka.consumer.fetcher import ConsumerRecord
from kafka_support import wait_until

from samsa.testing import InProcessBroker

pytestmark = pytest.mark.timeout(120)

CREATE_TIME, LOG_APPEND_TIME = 0, 1


@pytest.fixture
def admin(broker: InProcessBroker) -> Iterator[KafkaAdminClient]:
    a = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers, request_timeout_ms=10_000)
    yield a
    a.close()


def create(a: KafkaAdminClient, name: str, partitions: int = PARTITIONS, **config: str) -> None:
    a.create_topics(
        {name: {"num_partitions": partitions, "replication_factor": 1, "configs": config}}
    )


def producer(broker: InProcessBroker, **config: Any) -> KafkaProducer:
    return KafkaProducer(
        bootstrap_servers=broker.bootstrap_servers,
        **{"enable_idempotence": False, "linger_ms": 5, **config},
    )


def consumer(broker: InProcessBroker, **config: Any) -> KafkaConsumer:
    # No group: manual assignment, no coordinator, no commits.
    return KafkaConsumer(
        bootstrap_servers=broker.bootstrap_servers,
        **{
            "group_id": None,
            "enable_auto_commit": False,
            "auto_offset_reset": "earliest",
            **config,
        },
    )


def produce(
    p: KafkaProducer,
    topic: str,
    records: Sequence[Sent],
    timestamps: Sequence[int] | None = None,
) -> dict[int, tuple[int, int]]:
    """Send records; return index -> (partition, offset) from the send futures."""
    futures = []
    for i, s in enumerate(records):
        futures.append(
            p.send(
                topic,
                value=s.value,
                key=s.key,
                headers=list(s.headers),
                timestamp_ms=None if timestamps is None else timestamps[i],
            )
        )
    p.flush(30)
    delivered = {}
    for s, fut in zip(records, futures, strict=True):
        md = fut.get(timeout=30)
        delivered[s.index] = (md.partition, md.offset)
    return delivered


def consume(c: KafkaConsumer, n: int, timeout: float = 60) -> list[ConsumerRecord]:
    """Up to n records in the order returned (per partition), at most timeout seconds."""
    out: list[ConsumerRecord] = []
    deadline = time.monotonic() + timeout
    while len(out) < n and time.monotonic() < deadline:
        for records in c.poll(timeout_ms=500, max_records=n - len(out)).values():
            out.extend(records)
    return out


def as_got(records: Sequence[ConsumerRecord]) -> list[Got]:
    return [Got(r.partition, r.offset, r.key, r.value, tuple(r.headers or ())) for r in records]


def consume_all(
    broker: InProcessBroker, topic: str, n: int, partitions: int = PARTITIONS, **config: Any
) -> list[Got]:
    c = consumer(broker, **config)
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        c.assign(tps)
        c.seek_to_beginning()
        got = as_got(consume(c, n))
        ends = c.end_offsets(tps)
        assert sum(ends.values()) == n, f"log end offsets {ends} for {n} records"
        return got
    finally:
        c.close()


# --- 1. produce and consume 10,000 records with every codec -----------------------------------


@pytest.mark.parametrize("codec", CODECS)
def test_roundtrip_every_codec(
    broker: InProcessBroker, admin: KafkaAdminClient, topic: str, codec: str
) -> None:
    create(admin, topic)
    sent = make_records()
    p = producer(broker, compression_type=None if codec == "none" else codec, acks="all")
    try:
        delivered = produce(p, topic, sent)
    finally:
        p.close()
    got = consume_all(broker, topic, N_RECORDS)
    check_consumed(sent, got, delivered)
    check_compressed(broker, topic, codec, sent)


# --- acks, isolation, long poll, LogAppendTime ------------------------------------------------


@pytest.mark.parametrize("acks", ACKS)
def test_every_acks_setting_delivers(
    broker: InProcessBroker, admin: KafkaAdminClient, topic: str, acks: str
) -> None:
    create(admin, topic)
    sent = make_records(300)
    p = producer(broker, acks=acks if acks == "all" else int(acks))
    try:
        delivered = produce(p, topic, sent)
    finally:
        p.close()
    got = consume_all(broker, topic, len(sent))
    # With acks=0 the producer never learns the offsets.
    check_consumed(sent, got, delivered if acks != "0" else None)


@pytest.mark.parametrize("isolation", ["read_committed", "read_uncommitted"])
def test_isolation_levels_see_records(
    broker: InProcessBroker, admin: KafkaAdminClient, topic: str, isolation: str
) -> None:
    create(admin, topic)
    sent = make_records(300)
    p = producer(broker)
    try:
        delivered = produce(p, topic, sent)
    finally:
        p.close()
    got = consume_all(broker, topic, len(sent), isolation_level=isolation)
    check_consumed(sent, got, delivered)


def test_long_poll_wakes_on_produce(
    broker: InProcessBroker, admin: KafkaAdminClient, topic: str
) -> None:
    create(admin, topic, 1)
    p = producer(broker, linger_ms=0)
    c = consumer(broker, fetch_max_wait_ms=10_000)
    try:
        p.partitions_for(topic)  # metadata before the clock starts
        before = fetch_requests(broker)
        c.assign([TopicPartition(topic, 0)])
        # Nothing there yet: the consumer's fetch waits at the broker.
        assert consume(c, 1, timeout=1.5) == []
        start = time.monotonic()
        p.send(topic, key=b"k", value=b"late").get(timeout=10)
        records = consume(c, 1, timeout=10)
        latency = time.monotonic() - start
        assert [r.value for r in records] == [b"late"]
        # Long-polling: answered when the record arrived, not at fetch_max_wait_ms...
        assert latency < 3, f"record took {latency:.1f}s to arrive"
        # ... and the idle consumer's fetch was held, not answered empty over and over.
        fetches = fetch_requests(broker) - before
        assert fetches <= 4, f"{fetches} fetches for one record"
    finally:
        c.close()
        p.close()


def test_log_append_time_topic(
    broker: InProcessBroker, admin: KafkaAdminClient, topic: str
) -> None:
    create(admin, topic, 1, **{"message.timestamp.type": "LogAppendTime"})
    p = producer(broker)
    old = now_ms() - 86_400_000
    before = now_ms()
    try:
        futures = [p.send(topic, value=b"%d" % i, timestamp_ms=old) for i in range(5)]
        p.flush(10)
        metadata = [f.get(timeout=10) for f in futures]
    finally:
        p.close()
    after = now_ms()
    # The send results carry the broker's append time.
    for md in metadata:
        assert before - 1 <= md.timestamp <= after + 1, (md.timestamp, before, after)
    c = consumer(broker)
    try:
        c.assign([TopicPartition(topic, 0)])
        records = consume(c, 5)
    finally:
        c.close()
    assert len(records) == 5
    for r in records:
        assert r.timestamp_type == LOG_APPEND_TIME
        assert before - 1 <= r.timestamp <= after + 1, (r.timestamp, before, after)


# --- 2. ListOffsets ---------------------------------------------------------------------------


def produce_timestamped(broker: InProcessBroker, topic: str, stamps: Sequence[int]) -> None:
    """One record per timestamp, in four flushes so that the log has several batches."""
    p = producer(broker)
    sent = make_records(len(stamps), headers=False)
    chunk = (len(stamps) + 3) // 4
    delivered: dict[int, tuple[int, int]] = {}
    try:
        for start in range(0, len(stamps), chunk):
            part = sent[start : start + chunk]
            delivered.update(produce(p, topic, part, stamps[start : start + chunk]))
    finally:
        p.close()
    assert sorted(delivered.values()) == [(0, i) for i in range(len(stamps))]


def test_offsets_for_times(broker: InProcessBroker, admin: KafkaAdminClient, topic: str) -> None:
    create(admin, topic, 1)
    base = now_ms() - 600_000
    stamps = ts_plan(base)
    produce_timestamped(broker, topic, stamps)
    tp = TopicPartition(topic, 0)
    c = consumer(broker)
    try:
        for target, expected in ts_queries(base):
            found = c.offsets_for_times({tp: target}, timeout_ms=10_000)[tp]
            if expected is None:
                assert found is None, target
            else:
                assert found is not None, target
                assert (found.offset, found.timestamp) == (expected, stamps[expected]), target
        assert c.beginning_offsets([tp]) == {tp: 0}
        assert c.end_offsets([tp]) == {tp: TS_RECORDS}
        # Seeking to a time: the first record read is the first at or after it.
        found = c.offsets_for_times({tp: base + 10 * 400 + 3})[tp]
        c.assign([tp])
        c.seek(tp, found.offset)
        [r] = consume(c, 1)
        assert (r.offset, r.timestamp, r.timestamp_type) == (802, stamps[802], CREATE_TIME)
    finally:
        c.close()


def test_admin_list_offsets(broker: InProcessBroker, admin: KafkaAdminClient, topic: str) -> None:
    create(admin, topic, 1)
    base = now_ms() - 600_000
    stamps = ts_plan(base)
    produce_timestamped(broker, topic, stamps)
    tp = TopicPartition(topic, 0)

    def one(spec: Any) -> tuple[int, int]:
        found = admin.list_partition_offsets({tp: spec})[tp]
        return found.offset, found.timestamp

    assert one(OffsetSpec.EARLIEST)[0] == 0
    assert one(OffsetSpec.LATEST)[0] == TS_RECORDS
    # The max timestamp is shared by the last two records: the first of them.
    assert one(OffsetSpec.MAX_TIMESTAMP) == (TS_RECORDS - 2, stamps[-1])


def test_max_timestamp_with_out_of_order_times(
    broker: InProcessBroker, admin: KafkaAdminClient, topic: str
) -> None:
    create(admin, topic, 1)
    base = now_ms() - 600_000
    stamps = max_ts_plan(base)
    p = producer(broker, linger_ms=100)  # one batch
    try:
        delivered = produce(p, topic, make_records(len(stamps), headers=False), stamps)
    finally:
        p.close()
    assert sorted(o for _, o in delivered.values()) == MAX_TS_OFFSETS
    tp = TopicPartition(topic, 0)
    found = admin.list_partition_offsets({tp: OffsetSpec.MAX_TIMESTAMP})[tp]
    assert (found.offset, found.timestamp) == (1, base + 3000)
    c = consumer(broker)
    try:
        # The first offset whose timestamp is at least the target, in log order.
        assert c.offsets_for_times({tp: base + 2200})[tp].offset == 1
    finally:
        c.close()


# --- 3. admin: topics and configs -------------------------------------------------------------


def describe(a: KafkaAdminClient, topic: str) -> dict[str, dict[str, Any]]:
    res = ConfigResource(ConfigResourceType.TOPIC, topic)
    return a.describe_configs([res], config_filter="all")["topic"][topic]


def alter(a: KafkaAdminClient, topic: str, configs: dict[str, Any], incremental: bool) -> str:
    res = ConfigResource(ConfigResourceType.TOPIC, topic, configs)
    return a.alter_configs([res], incremental=incremental)["topic"][topic]


def test_topic_configs_lifecycle(admin: KafkaAdminClient, topic: str) -> None:
    configs = {
        "retention.ms": "3600000",
        "cleanup.policy": "compact",
        "max.message.bytes": "2000000",
    }
    result = admin.create_topics(
        {topic: {"num_partitions": 2, "replication_factor": 1, "configs": configs}}
    )
    assert [t["error_code"] for t in result["topics"]] == [0]

    entries = describe(admin, topic)
    for name, value in configs.items():
        assert entries[name]["value"] == value
        assert entries[name]["config_source"] == "DYNAMIC_TOPIC_CONFIG"
    assert entries["segment.bytes"]["value"] == "1073741824"
    assert entries["segment.bytes"]["config_source"] == "DEFAULT_CONFIG"
    assert entries["message.timestamp.type"]["value"] == "CreateTime"

    changes = {
        "retention.ms": (AlterConfigOp.SET, "7200000"),
        "max.message.bytes": (AlterConfigOp.DELETE, None),
        "cleanup.policy": (AlterConfigOp.APPEND, "delete"),
    }
    assert alter(admin, topic, changes, incremental=True) == "OK"
    entries = describe(admin, topic)
    assert entries["retention.ms"]["value"] == "7200000"
    assert entries["retention.ms"]["config_source"] == "DYNAMIC_TOPIC_CONFIG"
    assert entries["max.message.bytes"]["value"] == "1048588"
    assert entries["max.message.bytes"]["config_source"] == "DEFAULT_CONFIG"
    assert entries["cleanup.policy"]["value"] == "compact,delete"

    # The legacy AlterConfigs: kafka-python sends the other overrides along, so they stay.
    assert alter(admin, topic, {"segment.ms": "86400000"}, incremental=False) == "OK"
    entries = describe(admin, topic)
    assert entries["segment.ms"]["value"] == "86400000"
    assert entries["segment.ms"]["config_source"] == "DYNAMIC_TOPIC_CONFIG"
    assert entries["retention.ms"]["value"] == "7200000"
    assert entries["cleanup.policy"]["value"] == "compact,delete"

    # Invalid values are refused and change nothing.
    for incremental in (True, False):
        result = alter(admin, topic, {"retention.ms": "soon"}, incremental=incremental)
        assert "InvalidConfigurationError" in result, result
    assert describe(admin, topic)["retention.ms"]["value"] == "7200000"


def test_broker_configs(broker: InProcessBroker, admin: KafkaAdminClient) -> None:
    res = ConfigResource(ConfigResourceType.BROKER, "0")
    entries = admin.describe_configs([res], config_filter="all")["broker"]["0"]
    assert entries["num.partitions"]["value"] == "1"
    assert entries["num.partitions"]["config_source"] == "DEFAULT_CONFIG"
    assert entries["listeners"]["config_source"] == "STATIC_BROKER_CONFIG"
    # As configured (the in-process broker asks for port 0).
    assert entries["listeners"]["value"] == "PLAINTEXT://127.0.0.1:0"


def partitions_of(a: KafkaAdminClient, topic: str) -> int:
    [t] = a.describe_topics([topic])
    return 0 if t["error_code"] else len(t["partitions"])


def test_create_partitions_and_delete(
    broker: InProcessBroker, admin: KafkaAdminClient, topic: str
) -> None:
    create(admin, topic, 2)
    admin.create_partitions({topic: 5})
    wait_until(lambda: partitions_of(admin, topic) == 5, 10, what="5 partitions in metadata")
    p = producer(broker)
    try:
        md = p.send(topic, value=b"into the new partition", partition=4).get(timeout=10)
    finally:
        p.close()
    assert (md.partition, md.offset) == (4, 0)
    # Partitions never shrink.
    with pytest.raises(Errors.InvalidPartitionsError):
        admin.create_partitions({topic: 3})

    admin.delete_topics([topic])
    assert topic not in admin.list_topics()
    wait_until(lambda: partitions_of(admin, topic) == 0, 10, what="topic gone")
    with pytest.raises(Errors.UnknownTopicOrPartitionError):
        admin.delete_topics([topic])


def test_create_topic_errors(admin: KafkaAdminClient, topic: str) -> None:
    create(admin, topic, 1)

    def create_error(name: str, partitions: int = 1, rf: int = 1, **config: str) -> type:
        spec = {name: {"num_partitions": partitions, "replication_factor": rf, "configs": config}}
        with pytest.raises(Errors.BrokerResponseError) as info:
            admin.create_topics(spec)
        return type(info.value)

    assert create_error(topic) is Errors.TopicAlreadyExistsError
    assert (
        create_error(topic + "-x", **{"retention.ms": "soon"}) is Errors.InvalidConfigurationError
    )
    assert create_error(topic + "-y", **{"no.such.config": "1"}) is Errors.InvalidConfigurationError
    assert create_error("bad name!") is Errors.InvalidTopicError
    assert create_error(topic + "-z", rf=3) is Errors.InvalidReplicationFactorError
    assert create_error(topic + "-w", partitions=0) is Errors.InvalidPartitionsError
    admin.create_topics(
        {topic + "-v": {"num_partitions": 1, "replication_factor": 1}}, validate_only=True
    )
    names = admin.list_topics()
    assert topic in names
    for suffix in ("-x", "-y", "-z", "-w", "-v"):
        assert topic + suffix not in names


# --- errors a producer or consumer sees --------------------------------------------------------


def test_record_larger_than_max_message_bytes_is_refused(
    broker: InProcessBroker, admin: KafkaAdminClient, topic: str
) -> None:
    create(admin, topic, 1, **{"max.message.bytes": "2000"})
    p = producer(broker, retries=0)
    try:
        big = p.send(topic, value=b"x" * 5000)
        p.flush(10)
        small = p.send(topic, value=b"small")
        p.flush(10)
        with pytest.raises(Errors.MessageSizeTooLargeError):
            big.get(timeout=10)
        assert small.get(timeout=10).offset == 0
    finally:
        p.close()


def test_offset_out_of_range_resets(
    broker: InProcessBroker, admin: KafkaAdminClient, topic: str
) -> None:
    create(admin, topic, 1)
    p = producer(broker)
    try:
        produce(p, topic, make_records(10))
        tp = TopicPartition(topic, 0)
        c = consumer(broker, auto_offset_reset="earliest")
        try:
            c.assign([tp])
            c.seek(tp, 1000)
            [r] = consume(c, 1)
            assert r.offset == 0
        finally:
            c.close()
        c = consumer(broker, auto_offset_reset="latest")
        try:
            c.assign([tp])
            c.seek(tp, 1000)
            assert consume(c, 1, timeout=1.0) == []
            assert c.position(tp) == 10
            p.send(topic, value=b"after").get(timeout=10)
            [r] = consume(c, 1)
            assert (r.offset, r.value) == (10, b"after")
        finally:
            c.close()
    finally:
        p.close()


def test_describe_configs_synonyms(admin: KafkaAdminClient, topic: str) -> None:
    # Kafka lists the topic override first, then the broker-level synonyms that are set.
    create(admin, topic, 1, **{"retention.ms": "3600000"})
    res = ConfigResource(ConfigResourceType.TOPIC, topic)
    described = admin.describe_configs([res], include_synonyms=True, config_filter="all")
    synonyms = described["topic"][topic]["retention.ms"]["synonyms"]
    assert synonyms, "no synonyms"
    assert (synonyms[0]["name"], synonyms[0]["value"], synonyms[0]["source"]) == (
        "retention.ms",
        "3600000",
        "DYNAMIC_TOPIC_CONFIG",
    )
