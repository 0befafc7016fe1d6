"""pytest plugin (registered by the samsa package): the ``samsa_broker`` fixture."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from samsa.testing.inprocess import InProcessBroker


@pytest.fixture
def samsa_broker(tmp_path: Path) -> Iterator[InProcessBroker]:
    """A real broker on a free 127.0.0.1 port, its data in the test's tmp dir."""
    with InProcessBroker(tmp_path / "broker", http=True) as b:
        yield b
