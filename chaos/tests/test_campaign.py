"""A short seeded campaign in make test: every applicable fault kind against a real cluster
under load, and the checker's verdict: nothing acknowledged lost, duplicated or reordered."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from chaos.runner import Campaign, discover, run


def test_every_fault_kind_is_found_once_with_what_the_nemesis_needs() -> None:
    kinds = discover()
    names = [k.name for k in kinds]
    assert len(names) == len(set(names))
    assert {
        "kill-broker",
        "kill-controller",
        "pause-short",
        "pause-long",
        "zookeeper-session-expiry",
        "zookeeper-restart",
    } <= set(names)
    for kind in kinds:
        assert callable(kind.applicable) and callable(kind.inject)


@pytest.mark.slow
def test_a_short_seeded_campaign_loses_duplicates_and_reorders_nothing(tmp_path: Path) -> None:
    """As many faults as there are kinds: kinds come in seeded rounds, so each applicable kind
    is drawn once (`make chaos` draws 300)."""
    workdir = tmp_path / "campaign"
    faults = len(discover())
    outcome = run(Campaign(faults=faults, seed=1919, workdir=workdir))
    # The brokers' tmpfs data directories (as root) are unmounted at the end.
    with open("/proc/self/mounts") as mounts:
        assert not [m for m in mounts if str(workdir.resolve()) in m.split()[1]]
    if os.geteuid() == 0:
        # Root mounts each data directory as a tmpfs of its own: a disk kind can fill it.
        assert "disk-full" not in outcome.skipped_kinds
        # ... and runs every node in a network namespace of its own: the network kinds too.
        assert "partition-isolate" not in outcome.skipped_kinds
    v = outcome.verdict
    assert sum(v.faults.values()) == faults
    # Each applicable kind at least once (kinds come in seeded rounds).
    applicable = {k.name for k in discover()} - set(outcome.skipped_kinds)
    assert set(v.faults) == applicable
    assert v.total("acked") > 1000
    assert v.total("commits") > 0
    assert v.total("lost") == 0, v.examples
    assert v.total("duplicates") == 0, v.examples
    assert v.total("reordered") == 0, v.examples
    assert outcome.ok, v.examples + outcome.load_failures
    assert outcome.unrecovered == 0
