"""Samsa's load generator: librdkafka (confluent-kafka), tuned as a user would for throughput.

Large batches and a little linger on the producer, a consumer that never backs off its fetch
queue (DESIGN.md section 6), and linger.ms=1 for the latency run, as the OpenMessaging
Benchmark's Kafka driver does.
"""

from __future__ import annotations

import json
import os
import time

from confluent_kafka import OFFSET_BEGINNING, Consumer, Message, Producer, TopicPartition

from bench.clients.common import (
    Latencies,
    Pacer,
    Probe,
    emit,
    filler,
    log_lines,
    now_ns,
    stamp_of,
    stamped,
)

# Client security settings (security.protocol, sasl.*, ssl.*) for every client, as JSON: the
# harness sets it for a run against a secured listener (bench.security).
SECURITY = json.loads(os.environ.get("BENCH_KAFKA_SECURITY", "{}"))

THROUGHPUT_PRODUCER = {
    "linger.ms": 5,
    "batch.size": 1_000_000,
    "batch.num.messages": 100_000,
    "queue.buffering.max.messages": 2_000_000,
    "queue.buffering.max.kbytes": 2_000_000,
    "enable.idempotence": False,
    "compression.type": "none",
}
CONSUMER = {
    "group.id": "bench",
    "enable.auto.commit": False,
    "fetch.queue.backoff.ms": 0,
    "queued.max.messages.kbytes": 1_000_000,
    "fetch.max.bytes": 52_428_800,
    "max.partition.fetch.bytes": 10_485_760,
    "fetch.wait.max.ms": 100,
}


def _partitions(producer_or_consumer: Producer | Consumer, topic: str) -> int:
    return len(producer_or_consumer.list_topics(topic, timeout=10).topics[topic].partitions)


def produce(
    endpoint: str,
    stream: str,
    count: int,
    size: int,
    acks: str = "all",
    idempotence: bool = False,
    compressible: bool = False,
) -> dict:
    producer = Producer(
        {
            "bootstrap.servers": endpoint,
            **SECURITY,
            "acks": acks,
            **THROUGHPUT_PRODUCER,
            "enable.idempotence": idempotence,
        }
    )
    partitions = _partitions(producer, stream)
    payloads = log_lines(size) if compressible else [filler(size + 8)[:size]]
    payload = payloads[0]
    errors = 0
    # Connected, with metadata and (with idempotence) a producer id, before the clock starts:
    # librdkafka asks for its producer id half a second after it starts.
    for part in range(partitions):
        producer.produce(stream, payload, partition=part)
    producer.flush(30)

    def on_delivery(err: object, _msg: object) -> None:
        nonlocal errors
        if err is not None:
            errors += 1

    start = time.perf_counter()
    p = producer.produce
    for i in range(count):
        part = i % partitions
        while True:
            try:
                p(stream, payloads[i % len(payloads)], partition=part, on_delivery=on_delivery)
                break
            except BufferError:
                producer.poll(0.001)
        if i % 10_000 == 0:
            producer.poll(0)
    producer.flush(300)
    elapsed = time.perf_counter() - start
    return {"count": count, "seconds": elapsed, "errors": errors}


def _consumer(endpoint: str, stream: str) -> tuple[Consumer, int]:
    consumer = Consumer({"bootstrap.servers": endpoint, **SECURITY, **CONSUMER})
    partitions = _partitions(consumer, stream)
    consumer.assign([TopicPartition(stream, p, OFFSET_BEGINNING) for p in range(partitions)])
    return consumer, partitions


def _next_batch(consumer: Consumer, timeout: float) -> list[Message]:
    """Whatever has arrived, without waiting for a full batch: consume(n, t) waits for n
    messages or t seconds, which would add up to t to every latency."""
    first = consumer.poll(timeout)
    if first is None:
        return []
    return [first, *consumer.consume(100_000, 0)]


def consume(endpoint: str, stream: str, count: int) -> dict:
    consumer, _ = _consumer(endpoint, stream)
    got = 0
    start = time.perf_counter()
    deadline = start + 600
    while got < count and time.perf_counter() < deadline:
        got += sum(1 for m in _next_batch(consumer, 1.0) if m.error() is None)
    elapsed = time.perf_counter() - start
    consumer.close()
    return {"count": got, "seconds": elapsed, "errors": max(0, count - got)}


def e2e_produce(
    endpoint: str, stream: str, rate: float, seconds: float, size: int, acks: str = "all"
) -> dict:
    producer = Producer(
        {
            "bootstrap.servers": endpoint,
            **SECURITY,
            "acks": acks,
            "linger.ms": 1,
            "batch.size": 1_000_000,
            "queue.buffering.max.messages": 2_000_000,
            "enable.idempotence": False,
        }
    )
    partitions = _partitions(producer, stream)
    pad = filler(size)
    pacer = Pacer(rate, seconds)
    sent = 0
    while (n := pacer.due()) >= 0:
        if n == 0:
            producer.poll(pacer.tick)
            continue
        payload = stamped(now_ns(), pad)
        for _ in range(n):
            while True:
                try:
                    producer.produce(stream, payload, partition=sent % partitions)
                    break
                except BufferError:
                    producer.poll(0.001)
            sent += 1
        producer.poll(0)
    producer.flush(60)
    return {"sent": sent, "seconds": seconds}


def e2e_consume(endpoint: str, stream: str, expect: int, idle_s: float) -> dict:
    consumer, _ = _consumer(endpoint, stream)
    lat = Latencies()
    consumer.consume(1, 0.5)  # connected and fetching before the producer starts
    emit({"ready": True})
    start = last = time.monotonic()
    while lat.seen < expect and time.monotonic() - last < idle_s:
        batch = _next_batch(consumer, 0.1)
        if not batch:
            continue
        now = now_ns()
        last = time.monotonic()
        lat.add_stamps([stamp_of(m.value() or b"") for m in batch if m.error() is None], now)
    consumer.close()
    return lat.summary(last - start)


def probe(endpoint: str, stream: str, probe_state: Probe) -> dict:
    """Writes to partition 0 (whose leader the harness kills), one at a time, acks=all."""
    producer = Producer(
        {
            "bootstrap.servers": endpoint,
            **SECURITY,
            "acks": "all",
            "linger.ms": 0,
            "message.timeout.ms": 2000,
            "retry.backoff.ms": 20,
            "retry.backoff.max.ms": 100,
            "reconnect.backoff.ms": 20,
            "reconnect.backoff.max.ms": 100,
            "topic.metadata.refresh.interval.ms": 1000,
            "socket.connection.setup.timeout.ms": 1000,
        }
    )
    outcome: list[bool] = []

    def delivered(err: object, _msg: object) -> None:
        outcome.append(err is None)

    while True:
        outcome.clear()
        sent = now_ns()
        producer.produce(stream, b"probe", partition=0, on_delivery=delivered)
        deadline = time.monotonic() + 5
        while not outcome and time.monotonic() < deadline:
            producer.poll(0.005)
        result = probe_state.record(sent, bool(outcome and outcome[0]))
        if result is not None:
            producer.flush(1)
            return result
        if not (outcome and outcome[0]):
            time.sleep(0.005)
