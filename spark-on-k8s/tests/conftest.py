"""Fixtures for the Spark tests: one local[2] SparkSession per test session (a JVM takes
seconds to start) with Spark's own Kafka connector on its classpath, one real in-process Samsa
broker, the replicated 3-broker cluster of samsa's pytest plugin (``samsa_cluster``) for the
connector's tests, and helpers to make and read topics."""

from __future__ import annotations

import os
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from samsa.testing import InProcessBroker
from samsa_dev import jars

# Before any JVM starts: bind loopback only, and run Python workers with this interpreter.
os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
os.environ["PYSPARK_PYTHON"] = sys.executable
os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable


@pytest.fixture(scope="session")
def spark() -> Iterator:
    from samsa_spark.spark_session import local_spark

    session = local_spark(
        "samsa-spark-tests",
        jars.files("spark-kafka"),
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


def _topic_maker(bootstrap: str, replication_factor: int):
    admin = AdminClient({"bootstrap.servers": bootstrap})

    def make(partitions: int = 1, prefix: str = "t") -> str:
        name = f"{prefix}-{uuid.uuid4().hex[:8]}"
        new = NewTopic(name, partitions, replication_factor)
        for f in admin.create_topics([new]).values():
            f.result(30)
        return name

    return make


@pytest.fixture
def make_topic(bootstrap: str):
    return _topic_maker(bootstrap, 1)


@pytest.fixture
def cluster_bootstrap(samsa_cluster) -> str:
    return samsa_cluster.bootstrap_servers


@pytest.fixture
def make_cluster_topic(cluster_bootstrap: str):
    """Topics on the 3-broker cluster, replication factor 3."""
    return _topic_maker(cluster_bootstrap, 3)


@pytest.fixture
def checkpoint(tmp_path: Path) -> Path:
    return tmp_path / "checkpoint"
