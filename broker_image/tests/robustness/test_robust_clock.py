"""Clock steps on a running broker, injected through SAMSA_CLOCK_OFFSET_FILE (the machine's
clock is never touched): a step forward ages segments out by retention.ms and rolls by
segment.ms; a step back leaves appends, offsets and the log's max timestamp as Kafka has them."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer, TopicPartition
from kafka_support import (
    assert_contiguous,
    consume,
    consumer,
    create_topic,
    list_offset,
    log_end,
    log_start,
    produce,
    wait_until,
)

from samsa import faults, wall_clock
from samsa.testing import InProcessBroker

DAY_MS = 86_400_000
HOUR_MS = 3_600_000
MAX_TIMESTAMP = -3


@pytest.fixture
def clock_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The offset file the in-process broker's clock reads (the variable is process-wide)."""
    path = tmp_path / "clock-offset-ms"
    path.write_text("0")
    monkeypatch.setenv(faults.CLOCK_OFFSET_FILE_ENV, str(path))
    yield path
    path.write_text("0")


def _step(path: Path, offset_ms: int) -> None:
    path.write_text(str(offset_ms))
    wait_until(
        lambda: abs(wall_clock.wall_clock_ms() - time.time() * 1000 - offset_ms) < 60_000,
        5,
        what="the broker's clock to take the step",
    )


def _segments(broker: InProcessBroker, topic: str) -> list[int]:
    out = []
    for p in (Path(broker.data_dir) / f"{topic}-0").glob("*.log"):
        try:
            if p.stat().st_size:
                out.append(int(p.name[:20]))
        except FileNotFoundError:
            continue
    return sorted(out)


def test_a_day_forward_deletes_segments_by_retention_ms(
    start_broker: Callable[..., InProcessBroker], clock_file: Path
) -> None:
    broker = start_broker({"log.retention.check.interval.ms": "100"})
    topic = "clock-retention"
    create_topic(
        broker.bootstrap_servers,
        topic,
        config={"segment.bytes": "1024", "retention.ms": str(HOUR_MS)},
    )
    values = [f"r-{i:04d}-".encode() + b"x" * 100 for i in range(60)]
    produce(broker.bootstrap_servers, topic, values, batch_of=4)
    assert len(_segments(broker, topic)) > 3
    assert log_start(broker.port, topic) == 0
    _step(clock_file, DAY_MS)
    start = wait_until(
        lambda: log_start(broker.port, topic), 20, what="retention.ms to delete the old segments"
    )
    # Every record was a day old at once; what is left (if any) is a contiguous tail.
    records = consume(broker.bootstrap_servers, topic, start=start)
    assert_contiguous(records, start)
    assert [r.value for r in records] == values[start:]


def test_a_step_forward_rolls_a_log_append_time_segment_by_segment_ms(
    start_broker: Callable[..., InProcessBroker], clock_file: Path
) -> None:
    broker = start_broker()
    topic = "clock-roll"
    create_topic(
        broker.bootstrap_servers,
        topic,
        config={"message.timestamp.type": "LogAppendTime", "segment.ms": str(HOUR_MS)},
    )
    produce(broker.bootstrap_servers, topic, [b"before"])
    assert _segments(broker, topic) == [0]
    _step(clock_file, 2 * HOUR_MS)
    produce(broker.bootstrap_servers, topic, [b"after"])
    assert _segments(broker, topic) == [0, 1]


def test_a_step_back_keeps_appends_and_the_max_timestamp(
    start_broker: Callable[..., InProcessBroker], clock_file: Path
) -> None:
    broker = start_broker()
    topic = "clock-back"
    create_topic(
        broker.bootstrap_servers, topic, config={"message.timestamp.type": "LogAppendTime"}
    )
    first = [f"a-{i}".encode() for i in range(20)]
    produce(broker.bootstrap_servers, topic, first, batch_of=5)
    _step(clock_file, -HOUR_MS)
    second = [f"b-{i}".encode() for i in range(20)]
    produce(broker.bootstrap_servers, topic, second, batch_of=5)

    records = consume(broker.bootstrap_servers, topic)
    assert_contiguous(records)
    assert [r.value for r in records] == first + second
    # As in Kafka, LogAppendTime is the broker's clock at the append, stepped back or not.
    newest_first = max(r.timestamp for r in records[:20])
    assert all(r.timestamp < newest_first - HOUR_MS // 2 for r in records[20:])
    # The log's max timestamp (and its time index) never go back: MAX_TIMESTAMP still names
    # a record appended before the step, and a search by an early timestamp finds offset 0.
    error, offset = list_offset(broker.port, topic, 0, MAX_TIMESTAMP)
    assert error == 0 and offset < 20
    c = consumer(broker.bootstrap_servers)
    try:
        (found,) = c.offsets_for_times([TopicPartition(topic, 0, records[25].timestamp)], 10)
    finally:
        c.close()
    assert found.offset == 0
    # A restart re-reads the time index written across the step; the log is unchanged.
    broker.restart()
    again = consume(broker.bootstrap_servers, topic)
    assert [(r.offset, r.value, r.timestamp) for r in again] == [
        (r.offset, r.value, r.timestamp) for r in records
    ]
    error, offset = list_offset(broker.port, topic, 0, MAX_TIMESTAMP)
    assert error == 0 and offset < 20


def test_a_step_forward_times_out_an_open_transaction(
    start_broker: Callable[..., InProcessBroker], clock_file: Path
) -> None:
    """transaction.timeout.ms is measured on the wall clock, as in Kafka: a step past it
    makes the coordinator abort the open transaction (its producer is fenced), and the
    last stable offset moves on, so read_committed readers are not held up."""
    broker = start_broker(
        {
            "transaction.abort.timed.out.transaction.cleanup.interval.ms": "100",
            "offsets.topic.num.partitions": "1",
            "transaction.state.log.num.partitions": "1",
        }
    )
    topic = "clock-txn"
    create_topic(broker.bootstrap_servers, topic)
    p = Producer(
        {
            "bootstrap.servers": broker.bootstrap_servers,
            "transactional.id": "clock-step",
            "transaction.timeout.ms": str(10 * 60_000),
        }
    )
    p.init_transactions(20)
    p.begin_transaction()
    p.produce(topic, value=b"open", partition=0)
    p.flush(20)
    _step(clock_file, 2 * HOUR_MS)
    # The abort marker follows the record: the log end moves past it.
    wait_until(lambda: log_end(broker.port, topic) >= 2, 20, what="the coordinator's abort")
    with pytest.raises(KafkaException) as raised:
        p.commit_transaction(20)
    assert raised.value.args[0].code() in (
        KafkaError.INVALID_PRODUCER_EPOCH,
        KafkaError.PRODUCER_FENCED,
        KafkaError._FENCED,
    ), raised.value.args[0]
    c = consumer(broker.bootstrap_servers, **{"isolation.level": "read_committed"})
    try:
        _, high = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10, cached=False)
    finally:
        c.close()
    assert high >= 2, "the last stable offset moved past the aborted transaction"
    assert consume(broker.bootstrap_servers, topic, end=0) == []


def test_a_week_forward_expires_an_empty_group_s_offsets(
    start_broker: Callable[..., InProcessBroker], clock_file: Path
) -> None:
    """offsets.retention.minutes counts on the wall clock from when the group became empty,
    as in Kafka: a step past it expires the committed offsets at the next check."""
    broker = start_broker(
        {"offsets.retention.check.interval.ms": "100", "offsets.topic.num.partitions": "1"}
    )
    topic, group = "clock-offsets", "clock-group"
    create_topic(broker.bootstrap_servers, topic)
    c = consumer(broker.bootstrap_servers, **{"group.id": group})
    try:
        c.commit(offsets=[TopicPartition(topic, 0, 7)], asynchronous=False)

        def committed() -> int:
            (tp,) = c.committed([TopicPartition(topic, 0)], timeout=10)
            return int(tp.offset)

        assert committed() == 7
        _step(clock_file, 8 * 24 * HOUR_MS)  # past the default week
        wait_until(lambda: committed() < 0, 20, what="the offsets to expire")
    finally:
        c.close()
