"""Each fuzz harness, run as ``make fuzz`` runs it, over its seed corpus and a few thousand
mutations: it starts, reads its seeds, and finds no crash and no hang (``make fuzz`` runs
over a million inputs)."""

from __future__ import annotations

import pytest

from fuzz.__main__ import BUDGET, run_target
from fuzz.harness import corpus_dir

# A few seconds each on a shared machine.
RUNS = {"requests": 4000, "records": 4000, "sasl": 4000, "recovery": 800}


@pytest.mark.parametrize("target", sorted(BUDGET))
def test_the_harness_runs_its_seeds_and_mutations_cleanly(target: str) -> None:
    seeds = sorted(corpus_dir(target).iterdir())
    assert seeds, f"fuzz/corpus/{target} is empty (python -m fuzz.seeds rebuilds it)"
    count, _, output = run_target(target, RUNS[target], timeout=30)
    assert count == RUNS[target]
    assert f"{len(seeds)} files found" in output
