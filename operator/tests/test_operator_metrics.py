"""The operator's /metrics: reconciliations counted, timed and their failures counted per
resource kind, read from the real HTTP endpoint as Prometheus reads it."""

from __future__ import annotations

import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from samsa_operator import metrics


def scrape(port: int) -> dict[tuple[str, str], float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        text = r.read().decode()
    return {
        (s.name, s.labels.get("kind", "")): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if not s.labels.get("le")
    }


async def test_reconciliations_are_counted_timed_and_failures_counted() -> None:
    port = metrics.serve("127.0.0.1", 0)
    before = scrape(port)

    async def ok() -> str:
        return "done"

    async def broken() -> None:
        raise RuntimeError("the API server went away")

    assert await metrics.measured("Topic", ok) == "done"
    with pytest.raises(RuntimeError):
        await metrics.measured("Topic", broken)

    after = scrape(port)

    def grew(name: str) -> float:
        return after[name, "Topic"] - before.get((name, "Topic"), 0)

    assert grew("samsa_operator_reconciles_total") == 2
    assert grew("samsa_operator_reconcile_errors_total") == 1
    assert grew("samsa_operator_reconcile_duration_seconds_count") == 2
    assert after["process_cpu_seconds_total", ""] > 0
