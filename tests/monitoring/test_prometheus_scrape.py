"""The monitoring kit against a real Prometheus scraping a live 3-broker cluster and the
operator's metrics endpoint: every series a dashboard panel or an alert rule reads exists in
a real scrape, every query runs, and UnderReplicatedPartitions fires when a follower stops.

The rules Prometheus evaluates here are the chart's, with one change: UnderReplicatedPartitions
waits 5 s (``for: 5s``) instead of 5 minutes, so the test sees it fire within its `for:`
window in seconds; the promtool unit tests (rules_test.yaml) check the real 5 minutes.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.error
from collections.abc import Iterator
from typing import Any

import pytest
import yaml
from confluent_kafka.admin import NewTopic
from kafka_support import admin, produce, wait_until
from monitoring_support import DASHBOARDS, RULES, consume_and_commit
from prometheus_support import Prometheus, dashboard_queries, metric_names

from samsa.local_cluster.cluster import LocalCluster
from samsa.local_cluster.ports import free_port
from samsa.testing.cluster import replicated_cluster

FAST_FOR = {"UnderReplicatedPartitions": "5s"}
SERIES_TIMEOUT = 90.0
LABELS = {"namespace": "test", "kafka_cluster": "test"}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """A cluster of this module's own: its last test stops a broker."""
    with replicated_cluster(tmp_path_factory.mktemp("monitored")) as running:
        yield running


@pytest.fixture(scope="module")
def operator_metrics(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The operator's metrics endpoint (samsa_operator.metrics) in a process of its own, as
    the operator serves it, with the certificates of a secured cluster's PKI reported as its
    reconcile reports them; the address Prometheus scrapes."""
    port = free_port()
    script = f"""
import datetime, sys
from samsa_operator import metrics, models, resources, security
spec = models.KafkaClusterSpec.model_validate({{"listeners": {{"interBroker": "tls"}}}})
cluster = resources.Cluster("test", "test", "uid", spec)
pki = security.plan_pki(cluster, {{}}, datetime.datetime.now(datetime.UTC))
metrics.certificates_end("test", "test", pki.ends())
metrics.serve("127.0.0.1", {port})
print("serving", flush=True)
sys.stdin.read()
"""
    process = subprocess.Popen(
        [sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert process.stdout is not None and process.stdout.readline().strip() == "serving"
    try:
        yield f"127.0.0.1:{port}"
    finally:
        assert process.stdin is not None
        process.stdin.close()
        process.wait(10)


@pytest.fixture(scope="module")
def prometheus(
    cluster: LocalCluster, operator_metrics: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Prometheus]:
    workdir = tmp_path_factory.mktemp("prometheus")
    rules = yaml.safe_load(RULES.read_text())
    for group in rules["groups"]:
        for rule in group["rules"]:
            rule["for"] = FAST_FOR.get(rule["alert"], rule["for"])
    (workdir / "rules.yaml").write_text(yaml.safe_dump(rules))
    brokers = [f"127.0.0.1:{cluster.broker(b).http_port}" for b in range(3)]
    running = Prometheus(
        workdir,
        {"samsa-brokers": brokers, "samsa-operator": [operator_metrics]},
        workdir / "rules.yaml",
        LABELS,
    )
    try:
        yield running
    finally:
        running.stop()


def traffic(bootstrap: str, topic: str, group: str) -> None:
    """Records produced with acks=all and consumed by a group that commits: what makes every
    broker export its traffic, replication stage and consumer group series."""
    client = admin(bootstrap)
    client.create_topics([NewTopic(topic, 3, 3)])[topic].result(20)
    for p in range(3):
        produce(bootstrap, topic, [b"x"] * 20, partition=p, acks="all")
    consume_and_commit(bootstrap, topic, group, 60)


def queries() -> dict[str, list[str]]:
    """Every PromQL expression of the kit, by where it is."""
    out: dict[str, list[str]] = {}
    for path in sorted(DASHBOARDS.glob("*.json")):
        out[f"dashboard {path.stem}"] = dashboard_queries(json.loads(path.read_text()))
    for group in yaml.safe_load(RULES.read_text())["groups"]:
        for rule in group["rules"]:
            out[f"alert {rule['alert']}"] = [rule["expr"]]
    return out


def test_metric_names_are_read_out_of_promql() -> None:
    expr = (
        'histogram_quantile(0.99, sum by (le, request) (rate(a_bucket{x="y"}[$__rate_interval])))'
        " / on (pod) group_left () b_total offset 5m and max without (pod) (c:rate5m) > 1e3"
    )
    assert metric_names(expr) == {"a_bucket", "b_total", "c:rate5m"}


def test_every_series_the_dashboards_and_rules_read_is_scraped(
    cluster: LocalCluster, prometheus: Prometheus
) -> None:
    traffic(cluster.bootstrap_servers, "monitored", "monitored-group")
    wanted = {name: where for where, exprs in queries().items() for e in exprs
              for name in metric_names(e)}  # fmt: skip
    assert len(wanted) > 40

    def missing() -> set[str]:
        return set(wanted) - prometheus.names()

    deadline = time.monotonic() + SERIES_TIMEOUT
    while missing() and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not missing(), {name: wanted[name] for name in missing()}

    # Each query parses and runs (Grafana's variables filled in as Grafana fills them).
    refused = []
    for where, exprs in queries().items():
        for expr in exprs:
            try:
                prometheus.api("query", query=expr)
            except urllib.error.HTTPError as exc:
                refused.append((where, expr, exc.read().decode()))
    assert not refused
    # The scrape carries the lag of the group, from its coordinator alone.
    lag = prometheus.api("query", query='kafka_consumergroup_lag{consumergroup="monitored-group"}')
    assert len(lag["result"]) == 3
    assert all(r["value"][1] == "0" for r in lag["result"])


def firing(prometheus: Prometheus, name: str) -> list[dict[str, Any]]:
    return [a for a in prometheus.alerts() if a["labels"]["alertname"] == name
            and a["state"] == "firing"]  # fmt: skip


def test_under_replicated_partitions_fires_when_a_follower_stops(
    cluster: LocalCluster, prometheus: Prometheus
) -> None:
    quiet = prometheus.api(
        "query", query="sum(kafka_server_replicamanager_underreplicatedpartitions)"
    )
    assert [r["value"][1] for r in quiet["result"]] == ["0"]
    assert not firing(prometheus, "UnderReplicatedPartitions")

    # A broker that is not the controller: its partitions' leaders shrink their ISRs.
    [active] = prometheus.api(
        "query", query="kafka_controller_kafkacontroller_activecontrollercount == 1"
    )["result"]
    instances = {f"127.0.0.1:{cluster.broker(b).http_port}": b for b in range(3)}
    controller = instances[active["metric"]["instance"]]
    follower = next(b for b in range(3) if b != controller)
    stopped = time.monotonic()
    cluster.stop_broker(follower)
    [alert] = wait_until(
        lambda: firing(prometheus, "UnderReplicatedPartitions"),
        timeout=60,
        interval=0.5,
        what="UnderReplicatedPartitions firing",
    )
    took = time.monotonic() - stopped
    assert alert["labels"]["kafka_cluster"] == "test"
    assert alert["labels"]["severity"] == "warning"
    assert float(alert["value"]) > 0
    # The ISR shrinks within replica.lag.time.max.ms (3 s here), then the 5 s of `for:`.
    assert took >= 5, took
