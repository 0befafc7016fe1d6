"""A short seeded campaign in make test: every applicable fault kind against a real cluster
under load, and the checker's verdict: nothing acknowledged lost, duplicated or reordered."""

from __future__ import annotations

from pathlib import Path

import pytest

from chaos.runner import Campaign, discover, run


@pytest.mark.slow
def test_a_short_seeded_campaign_loses_duplicates_and_reorders_nothing(tmp_path: Path) -> None:
    outcome = run(Campaign(faults=20, seed=1919, workdir=tmp_path / "campaign"))
    v = outcome.verdict
    assert sum(v.faults.values()) == 20
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
