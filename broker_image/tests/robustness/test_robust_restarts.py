"""Restarts: a clean stop keeps every record where it was; a SIGKILL mid-burst loses no
acknowledged record and leaves contiguous offsets behind."""

from __future__ import annotations

import threading
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError, TopicPartition
from kafka_support import (
    BrokerProcess,
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

from samsa.testing import InProcessBroker, free_port


def _keyed(count: int, keys: int, tag: str) -> tuple[list[bytes], list[bytes]]:
    key_list = [f"key-{i % keys}".encode() for i in range(count)]
    values = [f"{tag}:{k.decode()}:{i}".encode() for i, k in enumerate(key_list)]
    return key_list, values


def _check_partitions(
    bootstrap: str, topic: str, partitions: int, delivered: dict[int, list[tuple[int, bytes]]]
) -> None:
    """Each partition holds exactly what was delivered to it, at the delivered offsets."""
    for p in range(partitions):
        records = consume(bootstrap, topic, p)
        assert_contiguous(records)
        expected = sorted(delivered[p])
        assert [(r.offset, r.value) for r in records] == expected, f"partition {p} differs"


def test_clean_restart_keeps_keyed_records_in_order(
    start_broker: Callable[..., InProcessBroker],
) -> None:
    broker = start_broker({"log.segment.bytes": "65536"})
    topic = "keyed"
    partitions = 3
    create_topic(broker.bootstrap_servers, topic, partitions)
    keys, values = _keyed(3000, 40, "first")
    deliveries = produce(broker.bootstrap_servers, topic, values, partition=None, keys=keys)
    delivered: dict[int, list[tuple[int, bytes]]] = defaultdict(list)
    for d in deliveries:
        delivered[d.partition].append((d.offset, d.value))
    assert len(delivered) == partitions, "the keys should spread over every partition"
    ends = {p: log_end(broker.port, topic, p) for p in range(partitions)}

    broker.restart()

    assert {p: log_end(broker.port, topic, p) for p in range(partitions)} == ends
    _check_partitions(broker.bootstrap_servers, topic, partitions, delivered)
    # Per key, records come back in the order they were produced.
    for p in range(partitions):
        seen: dict[bytes, int] = {}
        for r in consume(broker.bootstrap_servers, topic, p):
            assert r.key is not None and r.value is not None
            seq = int(r.value.rsplit(b":", 1)[1])
            assert seen.get(r.key, -1) < seq, f"{r.key!r} out of order at offset {r.offset}"
            seen[r.key] = seq

    # Appends continue after the old end, and survive another restart.
    keys2, values2 = _keyed(600, 40, "second")
    for d in produce(broker.bootstrap_servers, topic, values2, partition=None, keys=keys2):
        assert d.offset >= ends[d.partition]
        delivered[d.partition].append((d.offset, d.value))
    broker.restart()
    _check_partitions(broker.bootstrap_servers, topic, partitions, delivered)


def test_restart_with_nothing_written_since_start(
    start_broker: Callable[..., InProcessBroker],
) -> None:
    broker = start_broker()
    create_topic(broker.bootstrap_servers, "idle", 1)
    values = [f"v{i}".encode() for i in range(100)]
    produce(broker.bootstrap_servers, "idle", values)
    for _ in range(3):
        broker.restart()
    assert (log_start(broker.port, "idle"), log_end(broker.port, "idle")) == (0, 100)
    assert [r.value for r in consume(broker.bootstrap_servers, "idle")] == values
    assert produce(broker.bootstrap_servers, "idle", [b"next"])[0].offset == 100


# -- SIGKILL -------------------------------------------------------------------------------


class Burst:
    """Produces as fast as it can to two partitions until told to stop, recording every
    acknowledged record with the offset its delivery report named: the test's oracle."""

    def __init__(self, bootstrap: str, topic: str, tag: str, partitions: int) -> None:
        self.topic = topic
        self.tag = tag
        self.partitions = partitions
        self.acked: dict[int, dict[int, bytes]] = defaultdict(dict)
        self.duplicate_acks: list[tuple[int, int]] = []
        self.failed = 0
        self.acks = 0
        self.produced = 0
        self.remaining = -1
        self.stop = threading.Event()
        self.producer = producer(
            bootstrap,
            **{
                "linger.ms": 2,
                "message.timeout.ms": 3000,
                "retry.backoff.ms": 50,
                "reconnect.backoff.max.ms": 200,
            },
        )
        self.thread = threading.Thread(target=self._run, name=f"burst-{tag}", daemon=True)

    def acked_count(self) -> int:
        return self.acks

    def _on_delivery(self, err: Any, msg: Any) -> None:
        if err is not None:
            self.failed += 1
            return
        partition, offset = msg.partition(), msg.offset()
        if offset in self.acked[partition]:
            self.duplicate_acks.append((partition, offset))
        self.acked[partition][offset] = msg.value()
        self.acks += 1

    def _run(self) -> None:
        i = 0
        while not self.stop.is_set() and i < 1_000_000:
            value = f"{self.tag}-{i}".encode()
            try:
                self.producer.produce(
                    self.topic, value, partition=i % self.partitions, on_delivery=self._on_delivery
                )
            except BufferError:
                self.producer.poll(0.05)
                continue
            i += 1
            self.produced = i
            self.producer.poll(0)
        # The broker is dead by now: what was not acknowledged fails within message.timeout.ms.
        self.remaining = self.producer.flush(15)

    def __enter__(self) -> Burst:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(30)


@pytest.mark.slow
def test_sigkill_mid_burst_loses_no_acknowledged_record(tmp_path: Path) -> None:
    topic = "burst"
    partitions = 2
    rounds = 3
    broker = BrokerProcess(
        tmp_path / "data",
        free_port(),
        {
            "log.segment.bytes": "131072",
            # Flush and checkpoint often, so a restart trusts some segments (below the
            # recovery point) and recovers the rest.
            "log.flush.interval.ms": "100",
            "log.flush.scheduler.interval.ms": "50",
            "log.flush.offset.checkpoint.interval.ms": "100",
        },
    )
    oracle: dict[int, dict[int, bytes]] = defaultdict(dict)
    try:
        broker.start()
        create_topic(broker.bootstrap_servers, topic, partitions)
        for round_ in range(rounds):
            with Burst(broker.bootstrap_servers, topic, f"r{round_}", partitions) as burst:
                target = 30_000
                wait_until(
                    lambda b=burst, t=target: b.acked_count() >= t,
                    30,
                    what=f"{target} acknowledged records in round {round_}",
                )
                broker.kill()
                # The producer keeps going into the dead broker for a while: mid-burst.
                at_kill = burst.produced
                wait_until(
                    lambda b=burst, n=at_kill: b.produced >= n + 1000,
                    10,
                    what="the burst to go on after the kill",
                )
            assert not burst.thread.is_alive()
            assert burst.remaining == 0, "delivery reports outstanding after flush"
            assert burst.duplicate_acks == [], "two records acknowledged at the same offset"
            assert burst.failed > 0, "the kill should have failed some in-flight records"
            for p, acked in burst.acked.items():
                for offset, value in acked.items():
                    assert offset not in oracle[p], f"offset {offset} of {p} acknowledged twice"
                    oracle[p][offset] = value

            broker.start()
            assert "Traceback" not in broker.output(), broker.output()
            _verify(broker, topic, partitions, oracle)

        # The recovered log keeps taking appends at the next offsets.
        ends = {p: log_end(broker.port, topic, p) for p in range(partitions)}
        for d in produce(broker.bootstrap_servers, topic, [b"after-0", b"after-1"], partition=0):
            assert d.offset in (ends[0], ends[0] + 1)
        assert broker.stop() == 0
        assert "Traceback" not in broker.output(), broker.output()
    finally:
        broker.reap()


def _verify(
    broker: BrokerProcess, topic: str, partitions: int, oracle: dict[int, dict[int, bytes]]
) -> None:
    for p in range(partitions):
        records = consume(broker.bootstrap_servers, topic, p)
        assert_contiguous(records)
        stored = {r.offset: r.value for r in records}
        lost = [o for o in oracle[p] if o not in stored]
        assert not lost, f"partition {p}: acknowledged offsets missing: {lost[:10]} ({len(lost)})"
        wrong = [o for o, v in oracle[p].items() if stored[o] != v]
        assert not wrong, (
            f"partition {p}: acknowledged offsets hold other records: "
            f"{[(o, oracle[p][o], stored[o]) for o in wrong[:5]]}"
        )
        values = [r.value for r in records]
        assert len(values) == len(set(values)), f"partition {p} holds a record twice"


def test_clients_ride_through_clean_restarts(
    start_broker: Callable[..., InProcessBroker],
) -> None:
    """A producer and an assigned consumer keep running while the broker restarts twice:
    every acknowledged record is kept at its offset and the consumer reads each exactly once."""
    broker = start_broker({"log.segment.bytes": "65536"})
    topic = "live"
    create_topic(broker.bootstrap_servers, topic, 1)
    acked: dict[int, bytes] = {}
    errors: list[str] = []
    consumed: list[tuple[int, bytes]] = []
    consumer_errors: list[str] = []
    stop_producing = threading.Event()
    produced_all = threading.Event()

    def produce_forever() -> None:
        p = producer(
            broker.bootstrap_servers,
            **{
                "linger.ms": 5,
                "message.timeout.ms": 60000,
                "retry.backoff.ms": 50,
                "reconnect.backoff.max.ms": 200,
                "max.in.flight.requests.per.connection": 1,
            },
        )

        def on_delivery(err: Any, msg: Any) -> None:
            if err is not None:
                errors.append(str(err))
            else:
                acked[msg.offset()] = msg.value()

        i = 0
        while not stop_producing.is_set():
            try:
                p.produce(topic, f"live-{i}".encode(), partition=0, on_delivery=on_delivery)
                i += 1
            except BufferError:
                pass
            p.poll(0.002)
        if p.flush(60) != 0:
            errors.append("records still undelivered after 60 s")
        produced_all.set()

    def consume_forever() -> None:
        c = consumer(broker.bootstrap_servers, "error", **{"reconnect.backoff.max.ms": 200})
        c.assign([TopicPartition(topic, 0, 0)])
        try:
            while not (produced_all.is_set() and len(consumed) >= len(acked)):
                for m in c.consume(100, 0.1):
                    if m.error() is None:
                        consumed.append((m.offset(), m.value()))
                    elif m.error().code() == KafkaError._AUTO_OFFSET_RESET:
                        consumer_errors.append(str(m.error()))
        finally:
            c.close()

    producer_thread = threading.Thread(target=produce_forever, daemon=True)
    consumer_thread = threading.Thread(target=consume_forever, daemon=True)
    producer_thread.start()
    consumer_thread.start()
    try:
        for n in (300, 900, 1500):
            wait_until(lambda n=n: len(acked) >= n, 30, what=f"{n} acknowledged records")
            if n < 1500:
                broker.restart()
    finally:
        stop_producing.set()
        producer_thread.join(70)
        consumer_thread.join(30)
    assert not producer_thread.is_alive() and not consumer_thread.is_alive()
    assert errors == [], errors[:5]
    assert consumer_errors == [], consumer_errors[:5]
    records = consume(broker.bootstrap_servers, topic)
    assert_contiguous(records)
    stored = {r.offset: r.value for r in records}
    assert all(stored.get(o) == v for o, v in acked.items()), "an acknowledged record moved"
    # The consumer saw every offset once, in order, with what the log holds.
    assert [o for o, _ in consumed] == list(range(len(consumed)))
    assert len(consumed) >= len(acked)
    assert all(stored[o] == v for o, v in consumed)
