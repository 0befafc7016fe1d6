"""A full disk under a running broker (its data directory on a small tmpfs of the test's own,
filled by a ballast file): produces fail with KAFKA_STORAGE_ERROR, fetches keep being served,
offset commits fail with NOT_COORDINATOR, and once the ballast is gone the broker takes
writes again without a restart. Everything acknowledged is there once, in order."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from disk_support import Ballast, small_tmpfs
from kafka_support import (
    Wire,
    consume,
    create_topic,
    produce_request,
    producer,
    unique,
    wait_until,
)

from samsa.protocol.messages import build, request_type
from samsa.protocol.record_batch import build_batch
from samsa.testing import InProcessBroker

CONFIG = {
    "offsets.topic.num.partitions": "1",
    "transaction.state.log.num.partitions": "1",
    "log.flush.offset.checkpoint.interval.ms": "200",
    "log.flush.scheduler.interval.ms": "200",
    "log.retention.check.interval.ms": "200",
}
TOPIC = "full"
STORAGE_ERROR = 56  # KAFKA_STORAGE_ERROR


@pytest.fixture
def disk() -> Iterator[Path]:
    with small_tmpfs("16m") as point:
        yield point


@pytest.fixture
def broker(disk: Path) -> Iterator[InProcessBroker]:
    b = InProcessBroker(disk / "data", CONFIG).start()
    try:
        yield b
    finally:
        b.stop()


def _produce(bootstrap: str, values: list[bytes], **extra: Any) -> dict[bytes, Any]:
    """Produce every value; the outcome of each: its offset, or the KafkaError."""
    p = producer(bootstrap, **{"linger.ms": 20, "message.timeout.ms": 10_000, **extra})
    outcome: dict[bytes, Any] = {}

    def report(err: Any, msg: Any) -> None:
        outcome[msg.value()] = err if err is not None else msg.offset()

    for value in values:
        p.produce(TOPIC, value=value, partition=0, on_delivery=report)
        p.poll(0)
    assert p.flush(30) == 0
    return outcome


def _group_consumer(bootstrap: str, group: str) -> Consumer:
    return Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "socket.timeout.ms": 10_000,
        }
    )


def _commit(c: Consumer, offset: int) -> KafkaError | None:
    # Metadata of 3 KB: the commit needs a fresh page of the offsets log, not the slack left
    # in its last one, so on a full disk it cannot fit.
    tp = TopicPartition(TOPIC, 0, offset, metadata="m" * 3000)
    try:
        c.commit(offsets=[tp], asynchronous=False)
    except KafkaException as exc:
        return exc.args[0]
    return None


def _committed(c: Consumer) -> int:
    (tp,) = c.committed([TopicPartition(TOPIC, 0)], timeout=10)
    return int(tp.offset)


def test_a_full_disk_refuses_writes_serves_reads_and_recovers(
    broker: InProcessBroker, disk: Path
) -> None:
    bootstrap = broker.bootstrap_servers
    create_topic(bootstrap, TOPIC, config={"segment.bytes": str(64 * 1024)})
    acked: list[bytes] = []

    def produce_and_note(tag: str, n: int, **extra: Any) -> dict[bytes, Any]:
        values = [f"{tag}-{i:04d}-".encode() + b"v" * 300 for i in range(n)]
        outcome = _produce(bootstrap, values, **extra)
        acked.extend(v for v in values if isinstance(outcome[v], int))
        return outcome

    before = produce_and_note("before", 300, acks="all", **{"enable.idempotence": True})
    assert all(isinstance(o, int) for o in before.values())
    group = unique("disk-full")
    committer = _group_consumer(bootstrap, group)
    try:
        assert _commit(committer, 100) is None
        ballast = Ballast(disk / "ballast")
        ballast.fill()

        # No retries: each batch's answer is what the client sees.
        during = produce_and_note("during", 200, retries=0)
        errors = {o.code() for o in during.values() if not isinstance(o, int)}
        assert errors == {KafkaError.KAFKA_STORAGE_ERROR}, errors
        # Reads go on: everything acknowledged so far, in order.
        assert [r.value for r in consume(bootstrap, TOPIC)] == acked
        # A commit cannot be written: NOT_COORDINATOR (Kafka's answer for a storage error
        # on __consumer_offsets, which sends the client to find its coordinator again); the
        # old offset stays.
        error = _commit(committer, 200)
        assert error is not None and error.code() == KafkaError.NOT_COORDINATOR, error
        assert _committed(committer) == 100

        ballast.remove()
        # Idempotent producers retry through it; the broker needs no restart.
        after = produce_and_note("after", 300, acks="all", **{"enable.idempotence": True})
        assert all(isinstance(o, int) for o in after.values())
        wait_until(lambda: _commit(committer, 300) is None, 20, what="a commit to succeed")
        assert _committed(committer) == 300
    finally:
        committer.close()

    records = consume(bootstrap, TOPIC)
    assert [r.offset for r in records] == list(range(len(records)))
    assert [r.value for r in records] == acked, "exactly the acknowledged records, in order"

    # And the log on disk is whole: a restart reads the same.
    broker.restart()
    assert [r.value for r in consume(broker.bootstrap_servers, TOPIC)] == acked


def test_a_transaction_commit_waits_out_a_full_disk(disk: Path) -> None:
    """The transaction coordinator cannot write PrepareCommit to a full disk: the client's
    commit times out (it retries NOT_COORDINATOR, Kafka's answer for a storage error there),
    the transaction stays open, and the same commit, called again once there is room,
    completes. A read_committed consumer sees every transaction whole, once."""
    # Tiny __transaction_state segments: each state record rolls a new file, which needs a
    # fresh page (a record that fits in a last page's slack would not meet the full disk).
    config = {**CONFIG, "transaction.state.log.segment.bytes": "200"}
    b = InProcessBroker(disk / "data", config).start()
    try:
        bootstrap = b.bootstrap_servers
        create_topic(bootstrap, TOPIC)
        p = Producer(
            {
                "bootstrap.servers": bootstrap,
                "transactional.id": unique("disk-full-txn"),
                "transaction.timeout.ms": 60_000,
            }
        )
        p.init_transactions(20)

        def transaction(tag: str) -> list[bytes]:
            values = [f"{tag}-{i}".encode() for i in range(10)]
            p.begin_transaction()
            for v in values:
                p.produce(TOPIC, value=v, partition=0)
            p.flush(20)
            return values

        committed = transaction("first")
        p.commit_transaction(20)
        second = transaction("second")
        ballast = Ballast(disk / "ballast")
        ballast.fill()
        with pytest.raises(KafkaException) as raised:
            p.commit_transaction(3)
        error = raised.value.args[0]
        assert error.code() == KafkaError._TIMED_OUT and error.retriable(), error
        ballast.remove()
        p.commit_transaction(20)  # "retry call to resume"
        committed += second
        committed += transaction("third")
        p.commit_transaction(20)

        c = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": unique("disk-full-reader"),
                "isolation.level": "read_committed",
                "auto.offset.reset": "earliest",
            }
        )
        try:
            c.assign([TopicPartition(TOPIC, 0, 0)])
            got: list[bytes] = []

            def read_all() -> bool:
                for m in c.consume(100, 0.5):
                    assert m.error() is None, m.error()
                    got.append(m.value())
                return len(got) >= len(committed)

            wait_until(read_all, 30, what="every committed record")
        finally:
            c.close()
        assert got == committed
    finally:
        b.stop()


def test_a_batch_behind_one_the_disk_refused_is_refused_alike(
    broker: InProcessBroker, disk: Path
) -> None:
    """An idempotent producer's two batches in flight while the disk is full: the second is
    refused with KAFKA_STORAGE_ERROR, as the first, and not with OUT_OF_ORDER_SEQUENCE_NUMBER,
    on which librdkafka bumps its epoch and resends other partitions' batches that may be
    written already (a fault campaign found such duplicates). Retried in order once there is
    room, both are appended once."""
    create_topic(broker.bootstrap_servers, TOPIC)
    with Wire(broker.port) as wire:
        init = wire.request(
            22,
            4,
            build(
                request_type(22, 4),
                {
                    "transactional_id": None,
                    "transaction_timeout": -1,
                    "producer_id": -1,
                    "producer_epoch": -1,
                },
            ),
        )
        pid, epoch = init.producer_id, init.producer_epoch

        def batch(seq: int, value: bytes) -> bytes:
            return build_batch(
                [(None, value, [])], producer_id=pid, producer_epoch=epoch, base_sequence=seq
            )

        def send(*batches: bytes) -> list[tuple[int, int]]:
            ids = [
                wire.send_request(0, 9, produce_request(TOPIC, {0: b}, acks=-1)) for b in batches
            ]
            answers = []
            for correlation_id in ids:
                (p,) = wire.read_response(0, 9, correlation_id).responses[0].partition_responses
                answers.append((int(p.error_code.value), p.base_offset))
            return answers

        values = [b"first", b"x" * 200_000, b"y" * 200_000]
        assert send(batch(0, values[0])) == [(0, 0)]
        ballast = Ballast(disk / "ballast")
        ballast.fill()
        try:
            assert send(batch(1, values[1]), batch(2, values[2])) == [(STORAGE_ERROR, -1)] * 2
        finally:
            ballast.remove()
        assert send(batch(1, values[1]), batch(2, values[2])) == [(0, 1), (0, 2)]
    got = consume(broker.bootstrap_servers, TOPIC)
    assert [r.value for r in got] == values
