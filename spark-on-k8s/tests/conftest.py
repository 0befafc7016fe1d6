"""Fixtures for the Spark tests: one local[2] SparkSession per test session (a JVM takes
seconds to start), one real in-process Samsa broker, and helpers to make and read topics."""

from __future__ import annotations

import os
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from samsa.testing import InProcessBroker

# Before any JVM starts: bind loopback only, and run Python workers with this interpreter.
os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
os.environ["PYSPARK_PYTHON"] = sys.executable
os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable

# Until the broker has InitProducerId, sinks in tests opt out of idempotence.
SINK_KAFKA = {"kafka.enable.idempotence": "false"}


@pytest.fixture(scope="session")
def spark() -> Iterator:
    from samsa_spark.local import local_spark

    session = local_spark(
        "samsa-spark-tests",
        **{"spark.default.parallelism": "2", "spark.sql.streaming.stopTimeout": "60s"},
    )
    yield session
    session.stop()


@pytest.fixture(scope="session")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcessBroker]:
    with InProcessBroker(tmp_path_factory.mktemp("samsa-broker")) as b:
        yield b


@pytest.fixture
def bootstrap(broker: InProcessBroker) -> str:
    return broker.bootstrap_servers


@pytest.fixture
def make_topic(bootstrap: str):
    admin = AdminClient({"bootstrap.servers": bootstrap})

    def make(partitions: int = 1, prefix: str = "t") -> str:
        name = f"{prefix}-{uuid.uuid4().hex[:8]}"
        for f in admin.create_topics([NewTopic(name, partitions, 1)]).values():
            f.result(30)
        return name

    return make


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
    import time

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


@pytest.fixture
def checkpoint(tmp_path: Path) -> Path:
    return tmp_path / "checkpoint"


def ship_by_value(module_name: str) -> None:
    """Let Spark's Python workers unpickle functions and classes of a test module, which they
    cannot import by name."""
    from pyspark import cloudpickle

    cloudpickle.register_pickle_by_value(sys.modules[module_name])


def wait_for(predicate, timeout: float = 60.0, interval: float = 0.05, what: str = "condition"):
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")
