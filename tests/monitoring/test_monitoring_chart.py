"""The chart's monitoring kit as helm renders it (monitoring.enabled): valid objects, the rule
file and dashboards carried unchanged, and PodMonitors whose selectors and port names match
the pods the operator builds and the chart's own Deployment."""

from __future__ import annotations

import json
import re
import subprocess
from typing import Any

import kubernetes_validate
import yaml
from monitoring_support import DASHBOARDS, RULES
from op_support import CHART, K8S_VERSIONS

from samsa_operator import models, resources

KIT = {"PodMonitor", "PrometheusRule"}


def render(helm: str, *args: str) -> list[dict[str, Any]]:
    done = subprocess.run(
        [helm, "template", "samsa-operator", str(CHART), "--namespace", "samsa", *args],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return [d for d in yaml.safe_load_all(done.stdout) if d]


def named(docs: list[dict[str, Any]], kind: str) -> dict[str, dict[str, Any]]:
    return {d["metadata"]["name"]: d for d in docs if d["kind"] == kind}


def test_lint_strict_with_monitoring(helm: str) -> None:
    done = subprocess.run(
        [helm, "lint", "--strict", str(CHART), "--set", "monitoring.enabled=true"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_off_by_default(helm: str) -> None:
    docs = render(helm)
    assert not [d for d in docs if d["kind"] in KIT]
    assert not [d for d in docs if d["kind"] == "ConfigMap"]


def test_rules_and_dashboards_are_the_files_and_valid(helm: str) -> None:
    docs = render(
        helm, "--set", "monitoring.enabled=true", "--set", "monitoring.labels.release=kps"
    )
    [rule] = named(docs, "PrometheusRule").values()
    assert rule["spec"] == yaml.safe_load(RULES.read_text())
    maps = named(docs, "ConfigMap")
    files = sorted(DASHBOARDS.glob("*.json"))
    assert {"cluster", "topics", "consumer-groups", "replication-latency", "operator"} == {
        f.stem for f in files
    }
    assert sorted(maps) == sorted(f"samsa-operator-dashboard-{f.stem}" for f in files)
    for f in files:
        config_map = maps[f"samsa-operator-dashboard-{f.stem}"]
        assert json.loads(config_map["data"][f.name]) == json.loads(f.read_text())
        assert config_map["metadata"]["labels"]["grafana_dashboard"] == "1"
        for version in K8S_VERSIONS:
            kubernetes_validate.validate(config_map, version, strict=True)
    for doc in docs:
        if doc["kind"] in KIT:
            assert doc["metadata"]["labels"]["release"] == "kps"
            assert doc["apiVersion"] == "monitoring.coreos.com/v1"
    for version in K8S_VERSIONS:
        [deployment] = named(docs, "Deployment").values()
        kubernetes_validate.validate(deployment, version, strict=True)


def test_pod_monitors_select_the_brokers_and_the_operator_by_their_port_names(
    helm: str,
) -> None:
    docs = render(helm, "--set", "monitoring.enabled=true")
    monitors = named(docs, "PodMonitor")
    brokers = monitors["samsa-operator-brokers"]["spec"]
    cluster = resources.Cluster(
        "orders", "kafka", "uid-1", models.KafkaClusterSpec.model_validate({}), network_policy=True
    )
    [sts] = [o for o in resources.children(cluster) if o["kind"] == "StatefulSet"
             and o["metadata"]["name"] == "orders-kafka"]  # fmt: skip
    pod = sts["spec"]["template"]
    labels = pod["metadata"]["labels"]
    assert brokers["selector"]["matchLabels"].items() <= labels.items()
    [endpoint] = brokers["podMetricsEndpoints"]
    ports = {p["name"]: p["containerPort"] for c in pod["spec"]["containers"] for p in c["ports"]}
    assert ports[endpoint["port"]] == resources.HTTP_PORT
    # The cluster label the rules group by is the KafkaCluster's name.
    [relabel] = endpoint["relabelings"]
    (source,) = relabel["sourceLabels"]
    assert relabel["targetLabel"] == "kafka_cluster"
    # Prometheus names a pod label's meta label with every character but [a-zA-Z0-9_] as _.
    by_meta = {"__meta_kubernetes_pod_label_" + re.sub(r"\W", "_", k): v for k, v in labels.items()}
    assert by_meta[source] == "orders"
    # A KafkaCluster's NetworkPolicy lets Prometheus reach the metrics port.
    [policy] = [o for o in resources.children(cluster) if o["kind"] == "NetworkPolicy"]
    open_to_all = [r for r in policy["spec"]["ingress"] if "from" not in r]
    assert {"protocol": "TCP", "port": resources.HTTP_PORT} in open_to_all[0]["ports"]

    operator = monitors["samsa-operator-operator"]["spec"]
    [deployment] = named(docs, "Deployment").values()
    template = deployment["spec"]["template"]
    assert operator["selector"]["matchLabels"].items() <= template["metadata"]["labels"].items()
    [container] = template["spec"]["containers"]
    [endpoint] = operator["podMetricsEndpoints"]
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert ports[endpoint["port"]] == int(env["SAMSA_OPERATOR_METRICS_PORT"])


def test_dashboards_are_whole_grafana_dashboards() -> None:
    """Unique uids and panel ids, every panel on the data source variable, and every variable a
    query uses defined by its dashboard (or one of Grafana's own)."""
    uids = []
    for path in sorted(DASHBOARDS.glob("*.json")):
        dashboard = json.loads(path.read_text())
        uids.append(dashboard["uid"])
        defined = {v["name"] for v in dashboard["templating"]["list"]} | {"__rate_interval"}
        assert "datasource" in defined, path.name
        panels = dashboard["panels"]
        assert len({p["id"] for p in panels}) == len(panels), path.name
        for panel in panels:
            assert panel["datasource"]["uid"] == "${datasource}", (path.name, panel["title"])
            assert panel["targets"] and {"x", "y", "w", "h"} <= panel["gridPos"].keys()
            for target in panel["targets"]:
                used = set(re.findall(r"\$(\w+)", target["expr"]))
                assert used <= defined, (path.name, panel["title"], used - defined)
    assert len(set(uids)) == len(uids)
