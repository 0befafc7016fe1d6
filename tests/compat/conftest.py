"""Fixtures of the differential suite: one Apache Kafka (KRaft, from the cached jars) and one
Samsa broker (with a real ZooKeeper), each started once per session, side by side.

Both get the same overrides, so that what differs is the software, not the configuration.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
if str(REPO / "broker_image/tests") not in sys.path:
    sys.path.insert(0, str(REPO / "broker_image/tests"))

from compat_support import Comparison, System  # noqa: E402

from samsa.dev.jars import JarsUnavailable  # noqa: E402
from samsa.dev.kafka import ApacheKafka  # noqa: E402
from samsa.local.cluster import LocalCluster  # noqa: E402

# The same for both systems: internal topics a cluster of `size` can hold, quick group starts.
COMMON = {
    "group.initial.rebalance.delay.ms": "0",
    "offsets.topic.num.partitions": "3",
    "auto.create.topics.enable": "false",
}


def replicated(size: int) -> dict[str, str]:
    return {
        **COMMON,
        "offsets.topic.replication.factor": str(min(3, size)),
        "default.replication.factor": "1",
    }


def start_pair(tmp: Path, size: int) -> tuple[ApacheKafka, LocalCluster]:
    """Apache Kafka and Samsa of `size` brokers each, started side by side."""
    kafka = ApacheKafka(tmp / "kafka", size, replicated(size))
    samsa = LocalCluster(
        tmp / "samsa",
        size,
        {**replicated(size), "zookeeper.session.timeout.ms": "6000"},
    )
    with ThreadPoolExecutor(2) as pool:
        started = [pool.submit(kafka.up, 180), pool.submit(samsa.up, 180)]
        errors = [f.exception() for f in started]
    if any(errors):
        kafka.down(timeout=10)
        samsa.down(timeout=10)
        if isinstance(errors[0], JarsUnavailable):
            pytest.fail(f"Apache Kafka's jars are missing: {errors[0]} (run `make setup`)")
        raise next(e for e in errors if e is not None)
    return kafka, samsa


def systems(kafka: ApacheKafka, samsa: LocalCluster) -> Comparison:
    assert samsa.state is not None
    return Comparison(
        System("kafka", [n.port for n in kafka.nodes]),
        System("samsa", [b.port for b in samsa.state.brokers]),
    )


@pytest.fixture(scope="session")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Comparison]:
    """A single-node Apache Kafka and a 1-broker Samsa cluster.

    SAMSA_COMPAT_PORTS names a JSON file ({"kafka": [port], "samsa": [port]}) of a pair
    already running, to iterate on scenarios without starting both each time."""
    running = os.environ.get("SAMSA_COMPAT_PORTS")
    if running:
        ports = json.loads(Path(running).read_text())
        yield Comparison(System("kafka", ports["kafka"]), System("samsa", ports["samsa"]))
        return
    kafka, samsa = start_pair(tmp_path_factory.mktemp("compat"), 1)
    try:
        yield systems(kafka, samsa)
    finally:
        kafka.down(timeout=15)
        samsa.down(timeout=15)


@pytest.fixture(scope="session")
def kafka(pair: Comparison) -> System:
    return pair.kafka


@pytest.fixture(scope="session")
def samsa(pair: Comparison) -> System:
    return pair.samsa
