"""Fixtures for the robustness tests: in-process brokers on free 127.0.0.1 ports."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from kafka_support import wait_until

from samsa.testing import InProcessBroker

__all__ = ["wait_until"]  # conftest modules share one name: keep the parent's helper importable

BrokerFactory = Callable[..., InProcessBroker]


@pytest.fixture
def start_broker(tmp_path: Path) -> Iterator[BrokerFactory]:
    """Start brokers (each with its own data dir under tmp_path); all stopped at teardown."""
    started: list[InProcessBroker] = []

    def start(
        config: Mapping[str, Any] | None = None, name: str = "broker", http: bool = False
    ) -> InProcessBroker:
        broker = InProcessBroker(tmp_path / name, config, http=http)
        started.append(broker)
        return broker.start()

    yield start
    for broker in reversed(started):
        broker.stop()
