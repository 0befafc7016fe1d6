"""Fixtures of the client-compatibility tests: one broker per module, a unique topic name."""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator

import pytest
from kafka_support import wait_until

from samsa.testing import InProcessBroker

__all__ = ["wait_until"]  # conftest modules share one name: keep the parent's helper importable


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcessBroker]:
    """One broker for a test module (with its HTTP side port, for metrics)."""
    with InProcessBroker(tmp_path_factory.mktemp("samsa"), http=True) as b:
        yield b


_names = itertools.count()


@pytest.fixture
def topic(request: pytest.FixtureRequest) -> str:
    """A topic name unique to the test (not created)."""
    base = re.sub(r"[^a-zA-Z0-9._-]+", "-", request.node.name).strip("-")[:180]
    return f"{base}-{next(_names)}"
