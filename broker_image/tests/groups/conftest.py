"""Fixtures of the consumer-group tests: one broker per module, unique topic and group names."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from groups_support import GROUP_BROKER_CONFIG
from kafka_support import wait_until

from samsa.testing import InProcessBroker

__all__ = ["wait_until"]  # conftest modules share one name: keep the parent's helper importable


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcessBroker]:
    """One broker for a test module, with quick rebalances (see GROUP_BROKER_CONFIG)."""
    with InProcessBroker(tmp_path_factory.mktemp("samsa"), GROUP_BROKER_CONFIG) as b:
        yield b
