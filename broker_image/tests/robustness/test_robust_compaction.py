"""Log compaction seen through real clients: what a consumer reading a compacted topic from
the start gets, tombstones, keyless records, __consumer_offsets, and kill -9 mid-clean."""

from __future__ import annotations

import signal
import time
import urllib.request
from collections.abc import Sequence
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, TopicPartition
from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource
from kafka_support import (
    BrokerProcess,
    Consumed,
    Delivered,
    admin,
    consume,
    create_topic,
    produce,
    producer,
    unique,
    wait_until,
)

from samsa.faults import CLEANER_CRASH_POINT_ENV
from samsa.testing import InProcessBroker, free_port

CLEANER = {"log.cleaner.backoff.ms": "100", "offsets.topic.num.partitions": "1"}
SEGMENT = 4096
COMPACT = {
    "cleanup.policy": "compact",
    "segment.bytes": str(SEGMENT),
    "min.cleanable.dirty.ratio": "0.01",
}
# Batches well below a segment, so that segments roll often.
SMALL_BATCHES = {"batch.size": 1000, "linger.ms": 2}


def keyed(n: int, keys: int, tag: str = "v") -> tuple[list[bytes], list[bytes]]:
    ks = [b"key-%03d" % (i % keys) for i in range(n)]
    values = [f"{tag}-{i:05d}-".encode() + b"p" * 40 for i in range(n)]
    return ks, values


def latest(delivered: Sequence[Delivered]) -> dict[bytes, bytes | None]:
    out: dict[bytes, bytes | None] = {}
    for d in delivered:
        assert d.key is not None
        out[d.key] = d.value
    return out


def table(records: Sequence[Consumed]) -> dict[bytes, bytes]:
    out: dict[bytes, bytes] = {}
    for r in records:
        assert r.key is not None
        if r.value is None:
            out.pop(r.key, None)
        else:
            out[r.key] = r.value
    return out


def assert_consistent(records: Sequence[Consumed], produced: Sequence[Delivered]) -> None:
    """Offsets only go forward, and every record read is the one produced at its offset."""
    offsets = [r.offset for r in records]
    assert offsets == sorted(set(offsets)), "offsets must strictly increase"
    by_offset = {d.offset: d for d in produced}
    for r in records:
        d = by_offset[r.offset]
        assert (r.key, r.value) == (d.key, d.value), f"offset {r.offset} changed"


@pytest.fixture
def broker(tmp_path: Path) -> InProcessBroker:
    with InProcessBroker(tmp_path / "broker", CLEANER, http=True) as b:
        yield b  # type: ignore[misc]


def metrics(broker: InProcessBroker) -> dict[str, float]:
    with urllib.request.urlopen(broker.http_url + "/metrics", timeout=5) as resp:
        text = resp.read().decode()
    return {
        line.split(" ")[0]: float(line.split(" ")[1])
        for line in text.splitlines()
        if line and not line.startswith("#")
    }


def test_a_compacted_topic_keeps_the_last_value_of_each_key(broker: InProcessBroker) -> None:
    bootstrap = broker.bootstrap_servers
    topic = unique("compacted")
    create_topic(bootstrap, topic, config=COMPACT)
    keys, values = keyed(3000, 30)
    stamps = [1_700_000_000_000 + 7 * i for i in range(3000)]
    delivered = produce(bootstrap, topic, values, keys=keys, timestamps=stamps, **SMALL_BATCHES)
    end = delivered[-1].offset + 1

    def compacted() -> list[Consumed] | None:
        records = consume(bootstrap, topic, end=end)
        # Below the active segment one record per key is left; the active one holds < 100.
        return records if len(records) < 30 + SEGMENT // 60 else None

    records = wait_until(compacted, 30, 0.2, "the cleaner to compact the topic")
    assert_consistent(records, delivered)
    assert table(records) == latest(delivered)
    assert [r.timestamp for r in records] == [stamps[r.offset] for r in records]
    assert records[-1].offset == end - 1  # the active segment is untouched
    seen = metrics(broker)
    assert seen["kafka_log_log_cleaner_runs_total"] >= 1
    assert seen["kafka_log_log_cleaner_messages_read_total"] >= 2900
    assert 0 < seen["kafka_log_log_cleaner_cleaner_recopy_percent"] < 100
    assert seen["kafka_log_log_cleaner_manager_uncleanable_partitions_count"] == 0
    # A consumer that started before the clean and goes on after it sees no step back.
    assert consume(bootstrap, topic, start=records[len(records) // 2].offset, end=end) == [
        r for r in records if r.offset >= records[len(records) // 2].offset
    ]


def test_tombstones_go_after_delete_retention(broker: InProcessBroker) -> None:
    bootstrap = broker.bootstrap_servers
    topic = unique("tombstones")
    create_topic(bootstrap, topic, config={**COMPACT, "delete.retention.ms": "1000"})
    keys, values = keyed(600, 20)
    delivered = produce(bootstrap, topic, values, keys=keys, **SMALL_BATCHES)
    gone = [b"key-%03d" % i for i in range(10)]
    tombstones = produce_tombstones(bootstrap, topic, gone, 1_600_000_000_000)
    filler_keys, filler = keyed(300, 5, "filler")
    filler_keys = [b"filler-" + k for k in filler_keys]
    delivered += tombstones
    delivered += produce(bootstrap, topic, filler, keys=filler_keys, **SMALL_BATCHES)
    cleaned_at = time.monotonic()
    stamped = {d.offset for d in tombstones}

    def first_clean() -> list[Consumed] | None:
        records = consume(bootstrap, topic)
        return records if len(records) < 200 else None

    records = wait_until(first_clean, 30, 0.2, "the first clean")
    assert_consistent(records, delivered)
    # The first clean keeps the tombstones (for delete.retention.ms from now on), their
    # batch rebased on its delete horizon without changing what consumers see.
    assert {r.offset for r in records if r.value is None} == stamped
    assert {r.timestamp for r in records if r.value is None} == {1_600_000_000_000}
    assert table(records) == {k: v for k, v in latest(delivered).items() if v is not None}

    wait_until(lambda: time.monotonic() > cleaned_at + 1.5, 5, what="delete.retention.ms")
    more_keys, more = keyed(200, 5, "more")
    delivered += produce(
        bootstrap, topic, more, keys=[b"more-" + k for k in more_keys], **SMALL_BATCHES
    )

    def tombstones_gone() -> list[Consumed] | None:
        records = consume(bootstrap, topic)
        return records if not any(r.value is None for r in records) else None

    records = wait_until(tombstones_gone, 30, 0.2, "the tombstones to be removed")
    assert_consistent(records, delivered)
    assert not {r.key for r in records} & set(gone)
    assert table(records) == {k: v for k, v in latest(delivered).items() if v is not None}


def produce_tombstones(
    bootstrap: str, topic: str, keys: Sequence[bytes], timestamp: int
) -> list[Delivered]:
    p = producer(bootstrap)
    out: list[Delivered] = []
    errors: list[str] = []

    def report(err: KafkaError | None, msg: object) -> None:
        if err is not None:
            errors.append(str(err))
        else:
            out.append(Delivered(msg.partition(), msg.offset(), msg.key(), msg.value()))  # type: ignore[attr-defined]

    for key in keys:
        p.produce(topic, key=key, value=None, partition=0, timestamp=timestamp, on_delivery=report)
    assert p.flush(20) == 0 and not errors, errors
    assert all(d.value is None for d in out)
    return sorted(out, key=lambda d: d.offset)


def test_keyless_records_are_refused_by_compacted_topics(broker: InProcessBroker) -> None:
    bootstrap = broker.bootstrap_servers
    topic = unique("keyless")
    create_topic(bootstrap, topic, config=COMPACT)
    p = producer(bootstrap, retries=0)
    errors: list[KafkaError] = []
    p.produce(topic, value=b"no key", partition=0, on_delivery=lambda err, msg: errors.append(err))
    assert p.flush(20) == 0
    assert [e.code() for e in errors] == [KafkaError.INVALID_RECORD]
    # Keyed records still go in, and nothing of the refused one is there.
    produce(bootstrap, topic, [b"keyed"], keys=[b"k"])
    assert [(r.key, r.value) for r in consume(bootstrap, topic)] == [(b"k", b"keyed")]


def test_consumer_offsets_is_compacted(tmp_path: Path) -> None:
    config = {**CLEANER, "offsets.topic.segment.bytes": "2048"}
    with InProcessBroker(tmp_path / "broker", config) as broker:
        bootstrap = broker.bootstrap_servers
        create_topic(bootstrap, "source")
        produce(bootstrap, "source", [b"x"])
        group = unique("group")
        c = Consumer(
            {"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False}
        )
        try:
            for i in range(400):
                c.commit(offsets=[TopicPartition("source", 0, i + 1)], asynchronous=False)
        finally:
            c.close()

        def shrunk() -> list[Consumed] | None:
            records = consume(bootstrap, "__consumer_offsets")
            return records if len(records) < 100 else None

        records = wait_until(shrunk, 30, 0.2, "__consumer_offsets to be compacted")
        assert records and records[-1].offset >= 399

        broker.restart()
        c = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
        try:
            committed = c.committed([TopicPartition("source", 0)], timeout=10)
        finally:
            c.close()
        assert [tp.offset for tp in committed] == [400]


def alter_topic(bootstrap: str, topic: str, configs: dict[str, str]) -> None:
    res = ConfigResource(
        ConfigResource.Type.TOPIC,
        topic,
        incremental_configs=[
            ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET)
            for k, v in configs.items()
        ],
    )
    client = admin(bootstrap)  # kept alive until the answer is in
    client.incremental_alter_configs([res])[res].result(10)


@pytest.mark.slow
@pytest.mark.parametrize("point", ["cleaning", "swap", "deleting"])
def test_kill_9_during_cleaning_loses_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, point: str
) -> None:
    broker = BrokerProcess(tmp_path / "data", free_port(), CLEANER)
    topic = "crash"
    try:
        # Only this start carries the crash point; the broker kills itself when it gets there.
        monkeypatch.setenv(CLEANER_CRASH_POINT_ENV, point)
        broker.start()
        monkeypatch.delenv(CLEANER_CRASH_POINT_ENV)
        bootstrap = broker.bootstrap_servers
        # Written uncompacted, then switched to compaction: the clean starts after the writes.
        create_topic(bootstrap, topic, config={"segment.bytes": str(SEGMENT)})
        keys, values = keyed(1200, 40)
        delivered = produce(bootstrap, topic, values, keys=keys, **SMALL_BATCHES)
        alter_topic(
            bootstrap, topic, {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.01"}
        )
        assert broker.proc is not None
        wait_until(lambda: broker.proc.poll() is not None, 30, 0.1, f"the broker to die at {point}")
        assert broker.proc.returncode == -signal.SIGKILL

        broker.start()
        records = consume(bootstrap, topic)
        assert_consistent(records, delivered)
        assert table(records) == latest(delivered)
        assert records[-1].offset == delivered[-1].offset

        # The cleaner finishes the job after the restart, and the topic takes writes.
        def compacted() -> list[Consumed] | None:
            records = consume(bootstrap, topic)
            return records if len(records) < 40 + SEGMENT // 60 else None

        records = wait_until(compacted, 30, 0.2, "the clean to be redone")
        assert_consistent(records, delivered)
        assert table(records) == latest(delivered)
        after = produce(bootstrap, topic, [b"after"], keys=[b"key-000"])
        assert after[0].offset == delivered[-1].offset + 1
        assert broker.stop() == 0
        assert "Traceback" not in broker.output(), broker.output()
    finally:
        broker.reap()
