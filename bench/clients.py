"""librdkafka load generators, each run in its own process: `python -m bench.clients ...`.

Tuned as a user would tune them for throughput: large batches, a little linger, a consumer
that never backs off its fetch queue.  Prints one JSON line of results.
"""

from __future__ import annotations

import argparse
import json
import os
import time

from confluent_kafka import Consumer, Producer, TopicPartition


def produce(
    bootstrap: str,
    topic: str,
    count: int,
    size: int,
    acks: str,
    partitions: int,
    idempotence: bool = False,
) -> dict:
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": acks,
            "linger.ms": 5,
            "batch.size": 1_000_000,
            "batch.num.messages": 100_000,
            "queue.buffering.max.messages": 2_000_000,
            "queue.buffering.max.kbytes": 2_000_000,
            "enable.idempotence": idempotence,
            "compression.type": "none",
        }
    )
    payload = os.urandom(size)
    latencies: list[float] = []
    errors = 0

    def sampled(err: object, _msg: object, sent: float = 0.0) -> None:
        nonlocal errors
        if err is not None:
            errors += 1
        latencies.append(time.perf_counter() - sent)

    def on_error(err: object, _msg: object) -> None:
        nonlocal errors
        if err is not None:
            errors += 1

    # Connected, with metadata and (for idempotence) a producer id, before the clock starts:
    # librdkafka asks for its producer id half a second after it starts.
    for part in range(partitions):
        producer.produce(topic, payload, partition=part)
    producer.flush(30)
    start = time.perf_counter()
    p = producer.produce
    for i in range(count):
        part = i % partitions
        if i % 1000 == 0:
            now = time.perf_counter()
            cb = lambda err, msg, now=now: sampled(err, msg, now)  # noqa: E731
            while True:
                try:
                    p(topic, payload, partition=part, on_delivery=cb)
                    break
                except BufferError:
                    producer.poll(0.001)
            producer.poll(0)
        else:
            try:
                p(topic, payload, partition=part)
            except BufferError:
                producer.poll(0.01)
                p(topic, payload, partition=part)
    producer.flush(120)
    elapsed = time.perf_counter() - start
    latencies.sort()
    return {"count": count, "seconds": elapsed, "errors": errors, "latencies": latencies}


def consume(bootstrap: str, topic: str, count: int, partitions: int) -> dict:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "bench",
            "enable.auto.commit": False,
            "fetch.queue.backoff.ms": 0,
            "queued.max.messages.kbytes": 1_000_000,
            "fetch.max.bytes": 52_428_800,
            "max.partition.fetch.bytes": 10_485_760,
            "fetch.wait.max.ms": 100,
        }
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    got = 0
    start = time.perf_counter()
    deadline = start + 300
    while got < count and time.perf_counter() < deadline:
        got += len(consumer.consume(100_000, 1.0))
    elapsed = time.perf_counter() - start
    consumer.close()
    return {
        "count": got,
        "seconds": elapsed,
        "errors": 0 if got >= count else count - got,
        "latencies": [],
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=["produce", "consume"])
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--count", type=int, required=True)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--acks", default="1")
    parser.add_argument("--partitions", type=int, default=1)
    parser.add_argument("--idempotence", action="store_true", help="enable.idempotence=true")
    args = parser.parse_args()
    if args.mode == "produce":
        result = produce(
            args.bootstrap,
            args.topic,
            args.count,
            args.size,
            args.acks,
            args.partitions,
            args.idempotence,
        )
    else:
        result = consume(args.bootstrap, args.topic, args.count, args.partitions)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
