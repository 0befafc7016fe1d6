"""Fixtures of the transaction tests: one standalone broker per module."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from kafka_support import wait_until

from samsa.testing import InProcessBroker

__all__ = ["wait_until"]


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcessBroker]:
    config = {
        "transaction.state.log.num.partitions": 4,
        "offsets.topic.num.partitions": 4,
        "transaction.abort.timed.out.transaction.cleanup.interval.ms": 200,
        "group.initial.rebalance.delay.ms": 0,
    }
    with InProcessBroker(tmp_path_factory.mktemp("samsa"), config) as b:
        yield b
