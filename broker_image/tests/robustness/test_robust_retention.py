"""Retention: the scheduled check deletes old segments by size and by age, the log start
offset advances, and consumers below it are reset the way auto.offset.reset says."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError, TopicPartition
from kafka_support import (
    assert_contiguous,
    consume,
    consumer,
    create_topic,
    log_end,
    log_start,
    produce,
    producer,
    wait_until,
)

from samsa.testing import InProcessBroker

CONFIG = {"log.retention.check.interval.ms": "200"}
SEGMENT = 1024
RETENTION_BYTES = 4096
# Small producer batches, so segments of 1 KiB hold a few batches each.
SMALL_BATCHES = {"batch.size": 400, "linger.ms": 0}


def _segments(broker: InProcessBroker, topic: str, partition: int = 0) -> list[tuple[int, int]]:
    """(base offset, size) of each .log file of the partition, in offset order."""
    directory = Path(broker.data_dir) / f"{topic}-{partition}"
    out = []
    for path in directory.glob("*.log"):
        try:
            out.append((int(path.name[:20]), path.stat().st_size))
        except FileNotFoundError:
            continue  # deleted by retention while we looked
    return sorted(out)


def _values(n: int, tag: str) -> list[bytes]:
    return [f"{tag}-{i:05d}-".encode() + b"r" * 80 for i in range(n)]


@pytest.fixture
def broker(start_broker: Callable[..., InProcessBroker]) -> InProcessBroker:
    return start_broker(CONFIG)


@pytest.fixture
def size_retained(broker: InProcessBroker) -> tuple[str, list[bytes]]:
    """A topic trimmed by retention.bytes, in its steady state; its values by offset."""
    topic = "by-size"
    create_topic(
        broker.bootstrap_servers,
        topic,
        config={"segment.bytes": str(SEGMENT), "retention.bytes": str(RETENTION_BYTES)},
    )
    values = _values(300, "s")
    produce(broker.bootstrap_servers, topic, values, **SMALL_BATCHES)

    def trimmed() -> bool:
        segments = _segments(broker, topic)
        total = sum(size for _, size in segments)
        # Kafka's rule: delete the oldest segment while the rest still reach retention.bytes.
        return (
            bool(segments)
            and log_start(broker.port, topic) > 0
            and total - segments[0][1] < RETENTION_BYTES
        )

    wait_until(trimmed, 20, what="retention.bytes to trim the log")
    return topic, values


def test_retention_bytes_deletes_old_segments_and_advances_log_start(
    broker: InProcessBroker, size_retained: tuple[str, list[bytes]]
) -> None:
    topic, values = size_retained
    segments = _segments(broker, topic)
    start = log_start(broker.port, topic)
    assert segments[0][0] == start, "the log starts at its first remaining segment"
    assert sum(size for _, size in segments) >= RETENTION_BYTES, "retention deleted too much"
    assert log_end(broker.port, topic) == len(values)
    records = consume(broker.bootstrap_servers, topic, 0, start)
    assert_contiguous(records, start)
    assert [r.value for r in records] == values[start:]


def test_retention_ms_deletes_only_expired_segments(broker: InProcessBroker) -> None:
    topic = "by-age"
    create_topic(
        broker.bootstrap_servers,
        topic,
        config={"segment.bytes": str(SEGMENT), "retention.ms": "60000"},
    )
    now = int(time.time() * 1000)
    old, fresh = _values(60, "old"), _values(30, "fresh")
    produce(
        broker.bootstrap_servers,
        topic,
        old,
        timestamps=[now - 600_000 + i for i in range(len(old))],
        **SMALL_BATCHES,
    )
    produce(broker.bootstrap_servers, topic, fresh, **SMALL_BATCHES)
    first_fresh = len(old)
    wait_until(lambda: log_start(broker.port, topic) > 0, 20, what="retention.ms to delete")
    start = log_start(broker.port, topic)
    segments = _segments(broker, topic)
    assert segments[0][0] == start
    # Every segment holding only expired records went; the first one with a fresh record
    # (the one holding offset 60) stays, and so does everything after it.
    following = segments[1][0] if len(segments) > 1 else log_end(broker.port, topic)
    assert start <= first_fresh < following, (start, following, segments)
    records = consume(broker.bootstrap_servers, topic, 0, start)
    assert_contiguous(records, start)
    assert [r.value for r in records] == [*old, *fresh][start:]


def test_small_retention_ms_empties_the_log_and_appends_continue(
    broker: InProcessBroker,
) -> None:
    topic = "short-lived"
    create_topic(
        broker.bootstrap_servers,
        topic,
        config={"segment.bytes": str(SEGMENT), "retention.ms": "300"},
    )
    values = _values(50, "gone")
    produce(broker.bootstrap_servers, topic, values, **SMALL_BATCHES)
    # Every segment expires, the active one too: Kafka rolls a new one and the log is empty.
    wait_until(
        lambda: log_start(broker.port, topic) == len(values), 20, what="the whole log to expire"
    )
    assert log_end(broker.port, topic) == len(values)
    assert all(base == len(values) for base, _ in _segments(broker, topic))
    (d,) = produce(broker.bootstrap_servers, topic, [b"new"])
    assert d.offset == len(values)
    assert [(r.offset, r.value) for r in consume(broker.bootstrap_servers, topic, 0, d.offset)] == [
        (d.offset, b"new")
    ]


def test_retention_survives_a_restart(
    broker: InProcessBroker, size_retained: tuple[str, list[bytes]]
) -> None:
    topic, values = size_retained
    start = log_start(broker.port, topic)
    broker.restart()
    assert log_start(broker.port, topic) == start
    assert log_end(broker.port, topic) == len(values)
    records = consume(broker.bootstrap_servers, topic, 0, start)
    assert [r.value for r in records] == values[start:]


# -- consumers below the log start -----------------------------------------------------------


def test_reset_earliest_resumes_at_the_new_log_start(
    broker: InProcessBroker, size_retained: tuple[str, list[bytes]]
) -> None:
    topic, values = size_retained
    start = log_start(broker.port, topic)
    records = consume(broker.bootstrap_servers, topic, 0, start=0, reset="earliest")
    assert records and records[0].offset == start
    assert_contiguous(records, start)
    assert [r.value for r in records] == values[start:]


def test_reset_latest_jumps_to_the_end(
    broker: InProcessBroker, size_retained: tuple[str, list[bytes]]
) -> None:
    topic, _ = size_retained
    end = log_end(broker.port, topic)
    c = consumer(broker.bootstrap_servers, "latest")
    received = []
    ticks: list[bytes] = []
    try:
        c.assign([TopicPartition(topic, 0, 0)])

        def got_new() -> bool:
            # When the reset happens is the client's business: keep adding records until it
            # starts delivering; it must never deliver one from before the end.
            ticks.append(f"tick-{len(ticks)}".encode())
            produce(broker.bootstrap_servers, topic, ticks[-1:])
            received.extend(m for m in c.consume(100, 0.3) if m.error() is None)
            return bool(received)

        wait_until(got_new, 30, what="the consumer to deliver records produced after the reset")
    finally:
        c.close()
    first = received[0].offset()
    assert first >= end, f"reset to latest delivered offset {first}, below the end {end}"
    assert [m.offset() for m in received] == list(range(first, first + len(received)))
    assert [m.value() for m in received] == ticks[first - end : first - end + len(received)]


def test_reset_error_surfaces_offset_out_of_range(
    broker: InProcessBroker, size_retained: tuple[str, list[bytes]]
) -> None:
    topic, _ = size_retained
    c = consumer(broker.bootstrap_servers, "error")
    try:
        c.assign([TopicPartition(topic, 0, 0)])
        errors = []
        records = []

        def surfaced() -> bool:
            for m in c.consume(100, 0.2):
                (records if m.error() is None else errors).append(m)
            return bool(errors)

        wait_until(surfaced, 20, what="the consumer to report the out-of-range offset")
    finally:
        c.close()
    assert records == [], "nothing may be delivered from a reset the consumer refused"
    err = errors[0].error()
    assert err.code() == KafkaError._AUTO_OFFSET_RESET, err
    assert "out of range" in err.str().lower(), err.str()
    assert errors[0].topic() == topic and errors[0].partition() == 0


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # kafka-python's importlib use
@pytest.mark.parametrize("reset", ["earliest", "latest", "none"])
def test_kafka_python_consumer_below_the_log_start(
    broker: InProcessBroker, size_retained: tuple[str, list[bytes]], reset: str
) -> None:
    """The same with another client: kafka-python's auto_offset_reset."""
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KTopicPartition
    from kafka.errors import OffsetOutOfRangeError

    topic, values = size_retained
    start, end = log_start(broker.port, topic), log_end(broker.port, topic)
    tp = KTopicPartition(topic, 0)
    c = KafkaConsumer(
        bootstrap_servers=broker.bootstrap_servers,
        auto_offset_reset=reset,
        enable_auto_commit=False,
        group_id=None,
        request_timeout_ms=10000,
        fetch_max_wait_ms=100,
    )
    received: list[Any] = []
    try:
        c.assign([tp])
        c.seek(tp, 0)
        if reset == "none":
            with pytest.raises(OffsetOutOfRangeError):
                wait_until(
                    lambda: received.extend(c.poll(200).get(tp, [])),
                    20,
                    what="OffsetOutOfRangeError",
                )
            assert received == []
            return
        if reset == "earliest":
            wait_until(
                lambda: received.extend(c.poll(200).get(tp, [])) or len(received) >= end - start,
                20,
                what="every retained record",
            )
            assert [(m.offset, m.value) for m in received] == [
                (o, values[o]) for o in range(start, end)
            ]
            return
        wait_until(
            lambda: received.extend(c.poll(200).get(tp, [])) or c.position(tp) == end,
            20,
            what="the reset to the end",
        )
        assert received == []
        (d,) = produce(broker.bootstrap_servers, topic, [b"after-reset"])
        wait_until(
            lambda: received.extend(c.poll(200).get(tp, [])) or received,
            20,
            what="the record produced after the reset",
        )
        assert [(m.offset, m.value) for m in received] == [(d.offset, b"after-reset")]
        assert d.offset == end
    finally:
        c.close()


SEGMENT_BYTES = 256 * 1024


@pytest.mark.slow
def test_consumer_reading_while_retention_deletes_under_it(broker: InProcessBroker) -> None:
    """A consumer, a producer and retention at once: the consumer starts below the log start
    and reads from the oldest segments (fetches of up to 64 KiB, sent straight from the files)
    while retention deletes them.  Whatever it gets is the record produced at that offset,
    its offsets only go forward, and it reaches the end."""
    topic = "churn"
    create_topic(
        broker.bootstrap_servers,
        topic,
        config={"segment.bytes": str(SEGMENT_BYTES), "retention.bytes": "2000000"},
    )
    acked: dict[int, bytes] = {}
    errors: list[str] = []
    stop = threading.Event()

    def value(i: int) -> bytes:
        return f"churn-{i:07d}-".encode() + b"c" * 150

    # Fill the log past its retention limit (2.6 MB), so every later append makes retention
    # delete. Batches are bounded below a segment: a busy producer lingers into batches of up
    # to 1 MB, each a segment of its own, and a first segment larger than the 0.6 MB excess
    # rightly keeps retention from deleting anything.
    fill = [value(i) for i in range(15_000)]
    for d in produce(broker.bootstrap_servers, topic, fill, **{"batch.size": SEGMENT_BYTES // 4}):
        acked[d.offset] = d.value
    wait_until(lambda: log_start(broker.port, topic) > 0, 20, what="retention to start")

    def produce_until_stopped() -> None:
        p = producer(broker.bootstrap_servers, **{"linger.ms": 5})

        def on_delivery(err: Any, msg: Any) -> None:
            if err is not None:
                errors.append(str(err))
            else:
                acked[msg.offset()] = msg.value()

        i = 15_000
        while not stop.is_set() and i < 1_000_000:
            try:
                p.produce(topic, value(i), partition=0, on_delivery=on_delivery)
                i += 1
            except BufferError:
                p.poll(0.05)
            # At most ~1000 records/s (170 KB/s): a segment goes every ~1.5 s, slower than
            # a consumer's reset to the log start and its next fetch (librdkafka backs off
            # fetch.error.backoff.ms after OFFSET_OUT_OF_RANGE). Faster deletion than that
            # keeps any client resetting forever, on Kafka as here.
            p.poll(0.001)
        if p.flush(30) != 0:
            errors.append("records still undelivered after 30 s")

    thread = threading.Thread(target=produce_until_stopped, daemon=True)
    thread.start()
    c = consumer(broker.bootstrap_servers, "earliest", **{"max.partition.fetch.bytes": 65536})
    got: list[tuple[int, bytes | None]] = []

    def take(n: int, timeout: float) -> None:
        for m in c.consume(n, timeout):
            assert m.error() is None, m.error()
            got.append((m.offset(), m.value()))

    try:
        c.assign([TopicPartition(topic, 0, 0)])
        starts = set()

        def churned() -> bool:
            take(200, 0.05)
            starts.add(log_start(broker.port, topic))
            return len(starts) >= 4 and len(got) > 5000

        wait_until(churned, 60, what="retention to move the log start while reading")
        stop.set()
        thread.join(40)
        assert not thread.is_alive() and errors == [], errors[:5]
        end = log_end(broker.port, topic)

        def caught_up() -> bool:
            take(500, 0.2)
            return bool(got) and got[-1][0] == end - 1

        wait_until(caught_up, 60, what="the consumer to reach the end")
    finally:
        stop.set()
        c.close()
    offsets = [o for o, _ in got]
    assert offsets[0] > 0, "offset 0 was deleted: the consumer should have been reset"
    assert offsets == sorted(set(offsets)), "the consumer went backwards or saw a record twice"
    wrong = [(o, v, acked.get(o)) for o, v in got if acked.get(o) != v]
    assert not wrong, f"records that are not what was produced there: {wrong[:3]}"
