"""Fixtures for the Spark tests: one local[2] SparkSession per test session (a JVM takes
seconds to start), one real in-process Samsa broker, and helpers to make and read topics."""

from __future__ import annotations

import os
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from samsa.testing import InProcessBroker

# Before any JVM starts: bind loopback only, and run Python workers with this interpreter.
os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
os.environ["PYSPARK_PYTHON"] = sys.executable
os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable


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


@pytest.fixture
def checkpoint(tmp_path: Path) -> Path:
    return tmp_path / "checkpoint"
