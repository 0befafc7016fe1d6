"""Fixtures of the differential suite: one Apache Kafka (KRaft, from the cached jars) and one
Samsa broker (with a real ZooKeeper), each started once per session, side by side.

Both get the same overrides (compat_support.start_pair), so that what differs is the
software, not the configuration.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
if str(REPO / "broker_image/tests") not in sys.path:
    sys.path.insert(0, str(REPO / "broker_image/tests"))

from compat_support import Comparison, System, kill_pair, start_pair, systems  # noqa: E402


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
        kill_pair(kafka, samsa)


@pytest.fixture(scope="session")
def kafka(pair: Comparison) -> System:
    return pair.kafka


@pytest.fixture(scope="session")
def samsa(pair: Comparison) -> System:
    return pair.samsa
