"""Helpers of the Spark tests: producing and reading topics, shipping modules to workers."""

from __future__ import annotations

import sys
import time

from confluent_kafka import Consumer, Producer, TopicPartition

# Options the sink tests pass through to the producer (none: the default, idempotent).
SINK_KAFKA: dict[str, str] = {}


def produce(bootstrap: str, topic: str, records, partition: int | None = None) -> None:
    """Publish (key, value[, headers]) tuples and wait for every acknowledgement."""
    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": False, "linger.ms": 5})
    errors: list = []
    for rec in records:
        key, value, *rest = rec
        kwargs = {"headers": rest[0]} if rest else {}
        if partition is not None:
            kwargs["partition"] = partition
        p.produce(topic, value, key, on_delivery=lambda e, m: e and errors.append(e), **kwargs)
    assert p.flush(30) == 0
    assert not errors, errors


def consume_all(bootstrap: str, topic: str, timeout: float = 30.0) -> list:
    """Every record of a topic, from the beginning up to each partition's high watermark."""

    c = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "reader", "enable.auto.commit": False}
    )
    try:
        md = c.list_topics(topic, timeout=10)
        tps = []
        ends = {}
        for p in md.topics[topic].partitions:
            lo, hi = c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
            if hi > lo:
                tps.append(TopicPartition(topic, p, lo))
                ends[p] = hi
        c.assign(tps)
        out = []
        done = {p: False for p in ends}
        deadline = time.monotonic() + timeout
        while not all(done.values()):
            assert time.monotonic() < deadline, f"timed out reading {topic}"
            for m in c.consume(1000, 0.5):
                if m.error():
                    continue
                out.append(m)
                if m.offset() >= ends[m.partition()] - 1:
                    done[m.partition()] = True
        return out
    finally:
        c.close()


def ship_by_value(module_name: str) -> None:
    """Let Spark's Python workers unpickle functions and classes of a test module, which they
    cannot import by name."""
    from pyspark import cloudpickle

    cloudpickle.register_pickle_by_value(sys.modules[module_name])


def wait_for(predicate, timeout: float = 60.0, interval: float = 0.05, what: str = "condition"):

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")
