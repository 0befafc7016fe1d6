"""Shared helpers and fixtures for the broker's tests."""

from __future__ import annotations

import pytest
from kafka_support import name_for_test, wait_until

__all__ = ["wait_until"]


@pytest.fixture
def topic(request: pytest.FixtureRequest) -> str:
    """A topic name unique to the test (not created)."""
    return name_for_test(request.node.name, "t")


@pytest.fixture
def group(request: pytest.FixtureRequest) -> str:
    """A group id unique to the test."""
    return name_for_test(request.node.name, "g")
