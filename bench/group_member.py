"""One consumer-group member in its own process: `python -m bench.group_member ...`.

A confluent-kafka consumer subscribed to one topic, tuned for throughput as bench.clients is.
It prints JSON lines: each rebalance callback with its time (time.monotonic(), which is the
same clock in every process of the machine), and its progress (records, first and last
record times, commits) whenever that changed; the last one also has how long each
synchronous commit took.  It runs until SIGTERM, then closes (leaving
the group) and prints its last progress line.
"""

from __future__ import annotations

import argparse
import json
import signal
import time
from typing import Any

from confluent_kafka import Consumer, TopicPartition


def emit(event: str, **fields: Any) -> None:
    print(json.dumps({"event": event, "t": time.monotonic(), **fields}), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--group", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--commit", choices=["batch", "auto"], default="batch")
    parser.add_argument("--batch", type=int, default=1000)
    parser.add_argument("--session-timeout-ms", type=int, default=6000)
    args = parser.parse_args()
    stopping = False

    def stop(*_: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, stop)
    consumer = Consumer(
        {
            "bootstrap.servers": args.bootstrap,
            "group.id": args.group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": args.commit == "auto",
            "session.timeout.ms": args.session_timeout_ms,
            "heartbeat.interval.ms": 500,
            "fetch.queue.backoff.ms": 0,
            "queued.max.messages.kbytes": 1_000_000,
            "fetch.max.bytes": 52_428_800,
            "max.partition.fetch.bytes": 10_485_760,
            "fetch.wait.max.ms": 100,
        }
    )

    def on(event: str) -> Any:
        def callback(_c: Consumer, partitions: list[TopicPartition]) -> None:
            emit(event, partitions=sorted(tp.partition for tp in partitions))

        return callback

    consumer.subscribe(
        [args.topic], on_assign=on("assign"), on_revoke=on("revoke"), on_lost=on("lost")
    )
    count = 0
    commit_seconds: list[float] = []
    first = last = None
    reported = -1
    next_report = 0.0
    while not stopping:
        messages = consumer.consume(args.batch, 0.1)
        if messages:
            now = time.monotonic()
            first = first if first is not None else now
            last = now
            count += sum(1 for m in messages if m.error() is None)
            if args.commit == "batch":
                started = time.perf_counter()
                consumer.commit(asynchronous=False)
                commit_seconds.append(time.perf_counter() - started)
        if count != reported and time.monotonic() >= next_report:
            emit("progress", count=count, first=first, last=last, commits=len(commit_seconds))
            reported, next_report = count, time.monotonic() + 0.1
    consumer.close()
    emit(
        "progress",
        count=count,
        first=first,
        last=last,
        commits=len(commit_seconds),
        commit_seconds=commit_seconds,
    )


if __name__ == "__main__":
    main()
