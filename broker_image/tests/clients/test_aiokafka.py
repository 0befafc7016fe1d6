"""aiokafka against Samsa, unmodified: produce, consume, offsets, admin."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Sequence
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, ConsumerRecord, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewPartitions, NewTopic
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType
from aiokafka.errors import InvalidPartitionsError, MessageSizeTooLargeError
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

from samsa.testing import InProcessBroker

pytestmark = pytest.mark.timeout(120)

CREATE_TIME, LOG_APPEND_TIME = 0, 1
# Kafka error codes, as the admin responses carry them.
UNKNOWN_TOPIC_OR_PARTITION = 3
TOPIC_ALREADY_EXISTS = 36
INVALID_PARTITIONS = 37
INVALID_REPLICATION_FACTOR = 38
INVALID_CONFIG = 40
INVALID_TOPIC_EXCEPTION = 17
# DescribeConfigs config_source
DYNAMIC_TOPIC_CONFIG = 1
STATIC_BROKER_CONFIG = 4
DEFAULT_CONFIG = 5


@pytest.fixture
async def admin(broker: InProcessBroker) -> AsyncIterator[AIOKafkaAdminClient]:
    a = AIOKafkaAdminClient(bootstrap_servers=broker.bootstrap_servers, request_timeout_ms=10_000)
    await a.start()
    yield a
    await a.close()


async def create_errors(
    a: AIOKafkaAdminClient, name: str, partitions: int = PARTITIONS, rf: int = 1, **config: str
) -> int:
    """Create a topic; the error code of the answer (0: created)."""
    resp = (
        await a.create_topics([NewTopic(name, partitions, rf, topic_configs=config)])
    ).to_object()
    [result] = resp["topic_errors"]
    assert result["topic"] == name
    return int(result["error_code"])


async def create(
    a: AIOKafkaAdminClient, name: str, partitions: int = PARTITIONS, **config: str
) -> None:
    assert await create_errors(a, name, partitions, **config) == 0


async def producer(broker: InProcessBroker, **config: Any) -> AIOKafkaProducer:
    p = AIOKafkaProducer(
        bootstrap_servers=broker.bootstrap_servers,
        **{"enable_idempotence": False, "linger_ms": 5, **config},
    )
    await p.start()
    return p


async def consumer(broker: InProcessBroker, **config: Any) -> AIOKafkaConsumer:
    # No group: manual assignment, no coordinator, no commits.
    c = AIOKafkaConsumer(
        bootstrap_servers=broker.bootstrap_servers,
        **{
            "group_id": None,
            "enable_auto_commit": False,
            "auto_offset_reset": "earliest",
            **config,
        },
    )
    await c.start()
    return c


async def produce(
    p: AIOKafkaProducer,
    topic: str,
    records: Sequence[Sent],
    timestamps: Sequence[int] | None = None,
) -> dict[int, tuple[int, int]]:
    """Send records; return index -> (partition, offset) from the send results.

    With acks=0 aiokafka's results are None: nothing is returned for them.
    """
    futures = []
    for i, s in enumerate(records):
        futures.append(
            await p.send(
                topic,
                value=s.value,
                key=s.key,
                headers=list(s.headers),
                timestamp_ms=None if timestamps is None else timestamps[i],
            )
        )
    results = await asyncio.wait_for(asyncio.gather(*futures), 30)
    return {
        s.index: (md.partition, md.offset)
        for s, md in zip(records, results, strict=True)
        if md is not None
    }


async def consume(c: AIOKafkaConsumer, n: int, within: float = 60) -> list[ConsumerRecord]:
    out: list[ConsumerRecord] = []
    deadline = time.monotonic() + within
    while len(out) < n and time.monotonic() < deadline:
        batches = await c.getmany(timeout_ms=500, max_records=n - len(out))
        for records in batches.values():
            out.extend(records)
    return out


def as_got(records: Sequence[ConsumerRecord]) -> list[Got]:
    return [Got(r.partition, r.offset, r.key, r.value, tuple(r.headers or ())) for r in records]


async def consume_all(
    broker: InProcessBroker, topic: str, n: int, partitions: int = PARTITIONS, **config: Any
) -> list[Got]:
    c = await consumer(broker, **config)
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        c.assign(tps)
        await c.seek_to_beginning()
        got = as_got(await consume(c, n))
        ends = await c.end_offsets(tps)
        assert sum(ends.values()) == n, f"log end offsets {ends} for {n} records"
        return got
    finally:
        await c.stop()


# --- 1. produce and consume 10,000 records with every codec -----------------------------------


@pytest.mark.parametrize("codec", CODECS)
async def test_roundtrip_every_codec(
    broker: InProcessBroker, admin: AIOKafkaAdminClient, topic: str, codec: str
) -> None:
    await create(admin, topic)
    sent = make_records()
    p = await producer(broker, compression_type=None if codec == "none" else codec, acks="all")
    try:
        delivered = await produce(p, topic, sent)
    finally:
        await p.stop()
    got = await consume_all(broker, topic, N_RECORDS)
    check_consumed(sent, got, delivered)
    check_compressed(broker, topic, codec, sent)


# --- acks, isolation, long poll, LogAppendTime ------------------------------------------------


@pytest.mark.parametrize("acks", ACKS)
async def test_every_acks_setting_delivers(
    broker: InProcessBroker, admin: AIOKafkaAdminClient, topic: str, acks: str
) -> None:
    await create(admin, topic)
    sent = make_records(300)
    p = await producer(broker, acks=acks if acks == "all" else int(acks))
    try:
        delivered = await produce(p, topic, sent)
    finally:
        await p.stop()
    got = await consume_all(broker, topic, len(sent))
    # With acks=0 the producer never learns the offsets.
    check_consumed(sent, got, delivered if acks != "0" else None)


@pytest.mark.parametrize("isolation", ["read_committed", "read_uncommitted"])
async def test_isolation_levels_see_records(
    broker: InProcessBroker, admin: AIOKafkaAdminClient, topic: str, isolation: str
) -> None:
    await create(admin, topic)
    sent = make_records(300)
    p = await producer(broker)
    try:
        delivered = await produce(p, topic, sent)
    finally:
        await p.stop()
    got = await consume_all(broker, topic, len(sent), isolation_level=isolation)
    check_consumed(sent, got, delivered)


async def test_long_poll_wakes_on_produce(
    broker: InProcessBroker, admin: AIOKafkaAdminClient, topic: str
) -> None:
    await create(admin, topic, 1)
    p = await producer(broker, linger_ms=0)
    c = await consumer(broker, fetch_max_wait_ms=10_000)
    try:
        await p.partitions_for(topic)  # metadata before the clock starts
        before = fetch_requests(broker)
        c.assign([TopicPartition(topic, 0)])
        # Nothing there yet: the consumer's fetch waits at the broker.
        assert await consume(c, 1, within=1.5) == []
        start = time.monotonic()
        await p.send_and_wait(topic, key=b"k", value=b"late")
        records = await consume(c, 1, within=10)
        latency = time.monotonic() - start
        assert [r.value for r in records] == [b"late"]
        # Long-polling: answered when the record arrived, not at fetch_max_wait_ms...
        assert latency < 3, f"record took {latency:.1f}s to arrive"
        # ... and the idle consumer's fetch was held, not answered empty over and over.
        fetches = fetch_requests(broker) - before
        assert fetches <= 4, f"{fetches} fetches for one record"
    finally:
        await c.stop()
        await p.stop()


async def test_log_append_time_topic(
    broker: InProcessBroker, admin: AIOKafkaAdminClient, topic: str
) -> None:
    await create(admin, topic, 1, **{"message.timestamp.type": "LogAppendTime"})
    p = await producer(broker)
    old = now_ms() - 86_400_000
    before = now_ms()
    try:
        futures = [await p.send(topic, value=b"%d" % i, timestamp_ms=old) for i in range(5)]
        metadata = await asyncio.wait_for(asyncio.gather(*futures), 10)
    finally:
        await p.stop()
    after = now_ms()
    # The send results carry the broker's append time.
    for md in metadata:
        assert md.timestamp_type == LOG_APPEND_TIME
        assert before - 1 <= md.timestamp <= after + 1, (md.timestamp, before, after)
    c = await consumer(broker)
    try:
        c.assign([TopicPartition(topic, 0)])
        records = await consume(c, 5)
    finally:
        await c.stop()
    assert len(records) == 5
    for r in records:
        assert r.timestamp_type == LOG_APPEND_TIME
        assert before - 1 <= r.timestamp <= after + 1, (r.timestamp, before, after)


# --- 2. ListOffsets ---------------------------------------------------------------------------


async def produce_timestamped(broker: InProcessBroker, topic: str, stamps: Sequence[int]) -> None:
    """One record per timestamp, in four flushes so that the log has several batches."""
    p = await producer(broker)
    sent = make_records(len(stamps), headers=False)
    chunk = (len(stamps) + 3) // 4
    delivered: dict[int, tuple[int, int]] = {}
    try:
        for start in range(0, len(stamps), chunk):
            part = sent[start : start + chunk]
            delivered.update(await produce(p, topic, part, stamps[start : start + chunk]))
    finally:
        await p.stop()
    assert sorted(delivered.values()) == [(0, i) for i in range(len(stamps))]


async def test_offsets_for_times(
    broker: InProcessBroker, admin: AIOKafkaAdminClient, topic: str
) -> None:
    await create(admin, topic, 1)
    base = now_ms() - 600_000
    stamps = ts_plan(base)
    await produce_timestamped(broker, topic, stamps)
    tp = TopicPartition(topic, 0)
    c = await consumer(broker)
    try:
        for target, expected in ts_queries(base):
            found = (await c.offsets_for_times({tp: target}))[tp]
            if expected is None:
                assert found is None, target
            else:
                assert found is not None, target
                assert (found.offset, found.timestamp) == (expected, stamps[expected]), target
        assert await c.beginning_offsets([tp]) == {tp: 0}
        assert await c.end_offsets([tp]) == {tp: TS_RECORDS}
        # Seeking to a time: the first record read is the first at or after it.
        found = (await c.offsets_for_times({tp: base + 10 * 400 + 3}))[tp]
        c.assign([tp])
        c.seek(tp, found.offset)
        [r] = await consume(c, 1)
        assert (r.offset, r.timestamp, r.timestamp_type) == (802, stamps[802], CREATE_TIME)
    finally:
        await c.stop()


async def test_offsets_for_times_out_of_order(
    broker: InProcessBroker, admin: AIOKafkaAdminClient, topic: str
) -> None:
    await create(admin, topic, 1)
    base = now_ms() - 600_000
    stamps = max_ts_plan(base)
    p = await producer(broker, linger_ms=100)  # one batch
    try:
        delivered = await produce(p, topic, make_records(len(stamps), headers=False), stamps)
    finally:
        await p.stop()
    assert sorted(o for _, o in delivered.values()) == MAX_TS_OFFSETS
    tp = TopicPartition(topic, 0)
    c = await consumer(broker)
    try:
        # The first offset whose timestamp is at least the target, in log order.
        assert (await c.offsets_for_times({tp: base + 2200}))[tp].offset == 1
    finally:
        await c.stop()


# --- 3. admin: topics and configs -------------------------------------------------------------


async def describe(a: AIOKafkaAdminClient, kind: ConfigResourceType, name: str) -> dict[str, Any]:
    """name -> (value, config_source) of a resource's configs."""
    [resp] = await a.describe_configs([ConfigResource(kind, name)])
    [resource] = resp.to_object()["resources"]
    assert resource["error_code"] == 0, resource
    return {
        e["config_names"]: (e["config_value"], e["config_source"])
        for e in resource["config_entries"]
    }


async def alter(a: AIOKafkaAdminClient, topic: str, configs: dict[str, str]) -> int:
    resps = await a.alter_configs([ConfigResource(ConfigResourceType.TOPIC, topic, configs)])
    [resource] = [r for resp in resps for r in resp.to_object()["resources"]]
    return int(resource["error_code"])


async def test_topic_configs_lifecycle(admin: AIOKafkaAdminClient, topic: str) -> None:
    configs = {
        "retention.ms": "3600000",
        "cleanup.policy": "compact",
        "max.message.bytes": "2000000",
    }
    await create(admin, topic, 2, **configs)
    entries = await describe(admin, ConfigResourceType.TOPIC, topic)
    for name, value in configs.items():
        assert entries[name] == (value, DYNAMIC_TOPIC_CONFIG)
    assert entries["segment.bytes"] == ("1073741824", DEFAULT_CONFIG)
    assert entries["message.timestamp.type"] == ("CreateTime", DEFAULT_CONFIG)

    # aiokafka has only the legacy AlterConfigs, which replaces the whole set of overrides.
    assert await alter(admin, topic, {"retention.ms": "7200000", "segment.ms": "86400000"}) == 0
    entries = await describe(admin, ConfigResourceType.TOPIC, topic)
    assert entries["retention.ms"] == ("7200000", DYNAMIC_TOPIC_CONFIG)
    assert entries["segment.ms"] == ("86400000", DYNAMIC_TOPIC_CONFIG)
    assert entries["cleanup.policy"] == ("delete", DEFAULT_CONFIG)
    assert entries["max.message.bytes"] == ("1048588", DEFAULT_CONFIG)

    # Invalid values are refused and change nothing.
    assert await alter(admin, topic, {"retention.ms": "soon"}) == INVALID_CONFIG
    entries = await describe(admin, ConfigResourceType.TOPIC, topic)
    assert entries["retention.ms"] == ("7200000", DYNAMIC_TOPIC_CONFIG)


async def test_broker_configs(admin: AIOKafkaAdminClient) -> None:
    entries = await describe(admin, ConfigResourceType.BROKER, "0")
    assert entries["num.partitions"] == ("1", DEFAULT_CONFIG)
    # As configured (the in-process broker asks for port 0).
    assert entries["listeners"] == ("PLAINTEXT://127.0.0.1:0", STATIC_BROKER_CONFIG)


async def partitions_of(a: AIOKafkaAdminClient, topic: str) -> int:
    [t] = await a.describe_topics([topic])
    return 0 if t["error_code"] else len(t["partitions"])


async def test_create_partitions_and_delete(
    broker: InProcessBroker, admin: AIOKafkaAdminClient, topic: str
) -> None:
    await create(admin, topic, 2)
    await admin.create_partitions({topic: NewPartitions(5)})
    deadline = time.monotonic() + 10
    while await partitions_of(admin, topic) != 5:
        assert time.monotonic() < deadline, "5 partitions never showed in metadata"
        await asyncio.sleep(0.05)
    p = await producer(broker)
    try:
        md = await p.send_and_wait(topic, value=b"into the new partition", partition=4)
    finally:
        await p.stop()
    assert (md.partition, md.offset) == (4, 0)
    # Partitions never shrink.
    with pytest.raises(InvalidPartitionsError):
        await admin.create_partitions({topic: NewPartitions(3)})

    resp = (await admin.delete_topics([topic])).to_object()
    assert [(t["topic"], t["error_code"]) for t in resp["topic_error_codes"]] == [(topic, 0)]
    assert topic not in await admin.list_topics()
    resp = (await admin.delete_topics([topic])).to_object()
    assert [t["error_code"] for t in resp["topic_error_codes"]] == [UNKNOWN_TOPIC_OR_PARTITION]


async def test_create_topic_errors(admin: AIOKafkaAdminClient, topic: str) -> None:
    await create(admin, topic, 1)
    assert await create_errors(admin, topic, 1) == TOPIC_ALREADY_EXISTS
    assert await create_errors(admin, topic + "-x", 1, **{"retention.ms": "soon"}) == INVALID_CONFIG
    assert await create_errors(admin, topic + "-y", 1, **{"no.such": "1"}) == INVALID_CONFIG
    assert await create_errors(admin, "bad name!", 1) == INVALID_TOPIC_EXCEPTION
    assert await create_errors(admin, topic + "-z", 1, rf=3) == INVALID_REPLICATION_FACTOR
    assert await create_errors(admin, topic + "-w", 0) == INVALID_PARTITIONS
    names = await admin.list_topics()
    assert topic in names
    for suffix in ("-x", "-y", "-z", "-w"):
        assert topic + suffix not in names


# --- errors a producer or consumer sees --------------------------------------------------------


async def test_record_larger_than_max_message_bytes_is_refused(
    broker: InProcessBroker, admin: AIOKafkaAdminClient, topic: str
) -> None:
    await create(admin, topic, 1, **{"max.message.bytes": "2000"})
    p = await producer(broker)
    try:
        with pytest.raises(MessageSizeTooLargeError):
            await p.send_and_wait(topic, value=b"x" * 5000)
        assert (await p.send_and_wait(topic, value=b"small")).offset == 0
    finally:
        await p.stop()


async def test_offset_out_of_range_resets(
    broker: InProcessBroker, admin: AIOKafkaAdminClient, topic: str
) -> None:
    await create(admin, topic, 1)
    p = await producer(broker)
    tp = TopicPartition(topic, 0)
    try:
        await produce(p, topic, make_records(10))
        c = await consumer(broker, auto_offset_reset="earliest")
        try:
            c.assign([tp])
            c.seek(tp, 1000)
            [r] = await consume(c, 1)
            assert r.offset == 0
        finally:
            await c.stop()
        c = await consumer(broker, auto_offset_reset="latest")
        try:
            c.assign([tp])
            c.seek(tp, 1000)
            assert await consume(c, 1, within=1.0) == []
            assert await c.position(tp) == 10
            await p.send_and_wait(topic, value=b"after")
            [r] = await consume(c, 1)
            assert (r.offset, r.value) == (10, b"after")
        finally:
            await c.stop()
    finally:
        await p.stop()
