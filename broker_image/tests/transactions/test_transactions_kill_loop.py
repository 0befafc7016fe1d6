"""A transactional consume-process-produce application (confluent-kafka, its own process)
across 6 partitions of a standalone broker, killed with -9 at random points 5 times and
started again: the output read with read_committed holds every input exactly once;
read_uncommitted readers also see the records of the transactions the kills aborted.

Five kills, not twenty: the long loop (20 kills, 3,000 inputs) runs once, with the same
application on the replicated cluster (broker_image/tests/cluster/test_cluster_txn_coordinator.py);
this one shows the same guarantee on a standalone broker."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from eos_support import kill_loop

from samsa.testing import InProcessBroker

pytestmark = [pytest.mark.timeout(600), pytest.mark.slow]

INPUTS = 1000


def test_killed_5_times_every_input_once(broker: InProcessBroker, tmp_path: Path) -> None:
    committed, everything = kill_loop(
        broker.bootstrap_servers, tmp_path / "app.log", inputs=INPUTS, kills=5
    )
    assert committed == Counter(f"out-{i}" for i in range(INPUTS))
    assert set(everything) == set(committed)
    # What the kills interrupted was written and aborted: only read_uncommitted shows it.
    assert sum(n - 1 for n in everything.values()) > 0, "no kill landed inside a transaction"
