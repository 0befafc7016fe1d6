"""What the monitoring tests share: one scrape of each broker's /metrics, as Prometheus would
take it, parsed by prometheus_client's own parser; where the chart's rules and dashboards are;
Debian's promtool."""

from __future__ import annotations

import shutil
import time
import urllib.request
from collections.abc import Iterable
from pathlib import Path

import pytest
from confluent_kafka import Consumer
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

from samsa.local_cluster.cluster import LocalCluster

REPO = Path(__file__).resolve().parents[2]
MONITORING = REPO / "helm" / "samsa-operator" / "monitoring"
RULES = MONITORING / "rules.yaml"
DASHBOARDS = MONITORING / "dashboards"


def scrape_url(url: str, timeout: float = 10.0) -> list[Sample]:
    """Every sample of one /metrics answer."""
    with urllib.request.urlopen(url, timeout=timeout) as r:
        text = r.read().decode()
    return [s for family in text_string_to_metric_families(text) for s in family.samples]


def scrape(http_port: int) -> list[Sample]:
    return scrape_url(f"http://127.0.0.1:{http_port}/metrics")


def scrape_cluster(cluster: LocalCluster, brokers: Iterable[int] = (0, 1, 2)) -> list[Sample]:
    """The samples of every broker named, as one Prometheus scraping them all sees them."""
    return [s for b in brokers for s in scrape(cluster.broker(b).http_port)]


def by_labels(
    samples: Iterable[Sample], name: str, keys: tuple[str, ...], **match: str
) -> dict[tuple[str, ...], list[float]]:
    """The values of series ``name`` whose labels match, keyed by the ``keys`` labels: a list,
    so that a series exported by two brokers shows up twice."""
    out: dict[tuple[str, ...], list[float]] = {}
    for s in samples:
        if s.name == name and all(s.labels.get(k) == v for k, v in match.items()):
            out.setdefault(tuple(s.labels[k] for k in keys), []).append(s.value)
    return out


def promtool() -> str:
    """Debian's promtool (the `prometheus` package, installed by `make setup`)."""
    found = shutil.which("promtool")
    if found is None:
        pytest.fail("promtool is missing: run `make setup` (Debian's prometheus package)")
    return found


def consume_and_commit(bootstrap: str, topic: str, group: str, count: int) -> None:
    """Consume ``count`` records of ``topic`` in ``group`` (from its committed offsets, or the
    earliest), then commit them."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    try:
        consumer.subscribe([topic])
        seen = 0
        deadline = time.monotonic() + 60
        while seen < count:
            assert time.monotonic() < deadline, f"consumed {seen} of {count}"
            message = consumer.poll(1.0)
            if message is not None and message.error() is None:
                seen += 1
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()
