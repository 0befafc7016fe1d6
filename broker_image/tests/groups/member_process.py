"""A consumer-group member in its own process, for tests that kill it.

Usage: ``python member_process.py OPTIONS_JSON`` with the consumer's config, the topic, the
batch size and ``stall_after``.  It prints one JSON line per event: each rebalance callback,
each handled batch (partition, offset, index), each synchronous commit.  Once it has handled
and committed ``stall_after`` records of each of its partitions, it handles one more batch
without committing it, prints ``stalled`` and stops polling, so that a kill leaves
handled-but-uncommitted records behind.
"""

from __future__ import annotations

import json
import sys
import time
from collections import Counter
from typing import Any

from confluent_kafka import Consumer, TopicPartition


def emit(event: str, **fields: Any) -> None:
    print(json.dumps({"event": event, **fields}), flush=True)


def callback(event: str) -> Any:
    def on_event(_consumer: Consumer, partitions: list[TopicPartition]) -> None:
        emit(event, partitions=sorted(tp.partition for tp in partitions))

    return on_event


def main() -> None:
    options = json.loads(sys.argv[1])
    consumer = Consumer(options["config"])
    consumer.subscribe(
        [options["topic"]],
        on_assign=callback("assign"),
        on_revoke=callback("revoke"),
        on_lost=callback("lost"),
    )
    handled: Counter[int] = Counter()
    while True:
        messages = [m for m in consumer.consume(options["batch"], 0.1) if m.error() is None]
        if not messages:
            continue
        emit("handled", records=[(m.partition(), m.offset(), int(m.value())) for m in messages])
        owned = [tp.partition for tp in consumer.assignment()]
        if owned and all(handled[p] >= options["stall_after"] for p in owned):
            emit("stalled")
            while True:  # killed here: librdkafka's own thread goes on heartbeating
                time.sleep(1)
        handled.update(m.partition() for m in messages)
        done = consumer.commit(asynchronous=False)
        emit("committed", offsets={tp.partition: tp.offset for tp in done if tp.offset >= 0})


if __name__ == "__main__":
    main()
