"""The operator's /metrics: reconciliations counted, timed and their failures counted per
resource kind, and the ends of a secured cluster's certificates, read from the real HTTP
endpoint as Prometheus reads it."""

from __future__ import annotations

import datetime
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from samsa_operator import metrics, models, resources, security


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


def test_each_certificate_s_end_is_reported_and_a_gone_one_removed() -> None:
    now = datetime.datetime.now(datetime.UTC)
    spec = models.KafkaClusterSpec.model_validate(
        {"brokers": {"replicas": 2}, "listeners": {"interBroker": "tls"}}
    )
    pki = security.plan_pki(resources.Cluster("c", "ns1", "u", spec), {}, now)
    port = metrics.serve("127.0.0.1", 0)

    def ends() -> dict[str, float]:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
            text = r.read().decode()
        return {
            s.labels["certificate"]: s.value
            for family in text_string_to_metric_families(text)
            for s in family.samples
            if s.name == "samsa_operator_certificate_expiry_timestamp_seconds"
            and s.labels["kafka_cluster"] == "c"
        }

    metrics.certificates_end("ns1", "c", pki.ends())
    reported = ends()
    assert sorted(reported) == ["broker-0", "broker-1", "clients-ca", "cluster-ca", "operator"]
    expected = pki.brokers[1].certificate.not_valid_after_utc.timestamp()
    assert reported["broker-1"] == expected
    assert now.timestamp() < reported["cluster-ca"] <= now.timestamp() + 366 * 86400
    # Scaled to one broker, then deleted.
    metrics.certificates_end("ns1", "c", {k: v for k, v in pki.ends().items() if k != "broker-1"})
    assert "broker-1" not in ends()
    metrics.certificates_end("ns1", "c", {})
    assert ends() == {}
