"""Fixtures of the transaction tests: one standalone broker per module."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from kafka_support import Wire, wait_until

from samsa.protocol.errors import ErrorCode
from samsa.protocol.messages import build, request_type
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


@pytest.fixture
def wire(broker: InProcessBroker) -> Iterator[Wire]:
    """A raw connection, once the broker can coordinate transactions (FindCoordinator
    creates __transaction_state on first use)."""
    with Wire(broker.port) as w:

        def found() -> bool:
            body = build(request_type(10, 4), {"key_type": 1, "coordinator_keys": ["x"]})
            r = w.request(10, 4, body)
            return bool(r.coordinators[0].error_code == ErrorCode.none)

        wait_until(found, timeout=20)
        yield w
