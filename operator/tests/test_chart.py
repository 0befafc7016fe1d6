"""The Helm chart, with the real helm binary: lint, render with default and other values,
validate what it renders, and refuse bad values through values.schema.json."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml
from op_support import CHART, K8S_VERSIONS

OTHER_VALUES = {
    "image": {"repository": "registry.example.com/samsa-operator", "tag": "1.2.3"},
    "brokerImage": {"repository": "registry.example.com/samsa", "tag": "1.2.3"},
    "watchNamespaces": ["kafka-a", "kafka-b"],
    "replicas": 2,
    "resyncSeconds": 10,
    "verbose": True,
    "extraEnv": [{"name": "SAMSA_OPERATOR_OPERATION_SECONDS", "value": "5"}],
    "serviceAccount": {"create": True, "name": "samsa-op"},
    "nodeSelector": {"kubernetes.io/os": "linux"},
    "tolerations": [{"key": "ops", "operator": "Exists", "effect": "NoSchedule"}],
    "podAnnotations": {"example.com/team": "data"},
    "priorityClassName": "system-cluster-critical",
    "networkPolicy": {"enabled": True},
}


def run_helm(helm: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([helm, *args], capture_output=True, text=True, timeout=60)


def values_file(tmp_path: Path, values: dict[str, Any]) -> str:
    path = tmp_path / "values.yaml"
    path.write_text(yaml.safe_dump(values))
    return str(path)


def render(helm: str, *args: str) -> list[dict[str, Any]]:
    result = run_helm(helm, "template", "samsa-operator", str(CHART), "--namespace", "samsa", *args)
    assert result.returncode == 0, result.stderr
    return [d for d in yaml.safe_load_all(result.stdout) if d]


@pytest.fixture(params=["default", "other"])
def value_args(request: pytest.FixtureRequest, tmp_path: Path) -> list[str]:
    if request.param == "default":
        return []
    return ["--values", values_file(tmp_path, OTHER_VALUES)]


def test_lint_strict(helm: str, value_args: list[str]) -> None:
    result = run_helm(helm, "lint", "--strict", str(CHART), *value_args)
    assert result.returncode == 0, result.stdout + result.stderr


def test_rendered_objects_are_valid_kubernetes(helm: str, value_args: list[str]) -> None:
    docs = render(helm, "--include-crds", *value_args)
    kinds = {d["kind"] for d in docs}
    assert {"Deployment", "ServiceAccount", "ClusterRole", "CustomResourceDefinition"} <= kinds
    for doc in docs:
        if doc["apiVersion"].startswith("kopf.dev/"):
            continue  # kopf's own peering objects: validated against their CRD below
        for version in K8S_VERSIONS:
            kubernetes_validate.validate(doc, version, strict=True)


def by_kind(docs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [d for d in docs if d["kind"] == kind]


def test_default_install_watches_every_namespace_with_cluster_peering(helm: str) -> None:
    docs = render(helm)
    [deployment] = by_kind(docs, "Deployment")
    [container] = deployment["spec"]["template"]["spec"]["containers"]
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["SAMSA_OPERATOR_WATCH_NAMESPACES"] == ""
    assert env["SAMSA_OPERATOR_PEERING"] == "samsa-operator"
    assert env["SAMSA_OPERATOR_BROKER_IMAGE"] == "ghcr.io/samsa-dev/samsa:0.1.0"
    assert container["image"] == "ghcr.io/samsa-dev/samsa-operator:0.1.0"
    assert [p["metadata"]["name"] for p in by_kind(docs, "ClusterKopfPeering")] == [
        "samsa-operator"
    ]
    assert not by_kind(docs, "Role")
    [role] = by_kind(docs, "ClusterRole")
    resources = {r for rule in role["rules"] for r in rule["resources"]}
    assert {"kafkaclusters", "statefulsets", "nodes", "clusterkopfpeerings"} <= resources


def test_watch_namespaces_get_roles_and_peerings(helm: str, tmp_path: Path) -> None:
    docs = render(helm, "--values", values_file(tmp_path, OTHER_VALUES))
    [deployment] = by_kind(docs, "Deployment")
    [container] = deployment["spec"]["template"]["spec"]["containers"]
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["SAMSA_OPERATOR_WATCH_NAMESPACES"] == "kafka-a,kafka-b"
    assert env["SAMSA_OPERATOR_OPERATION_SECONDS"] == "5"  # extraEnv
    assert container["args"] == ["--verbose"]
    assert deployment["spec"]["replicas"] == 2
    assert [r["metadata"]["namespace"] for r in by_kind(docs, "Role")] == ["kafka-a", "kafka-b"]
    assert [b["metadata"]["namespace"] for b in by_kind(docs, "RoleBinding")] == [
        "kafka-a",
        "kafka-b",
    ]
    assert [p["metadata"]["namespace"] for p in by_kind(docs, "KopfPeering")] == [
        "kafka-a",
        "kafka-b",
    ]
    [cluster_role] = by_kind(docs, "ClusterRole")
    cluster_resources = {r for rule in cluster_role["rules"] for r in rule["resources"]}
    assert cluster_resources == {
        "customresourcedefinitions",
        "nodes",
        "namespaces",
        "storageclasses",
    }


def rules_for(role: dict[str, Any], resource: str) -> list[set[str]]:
    return [set(r["verbs"]) for r in role["rules"] if resource in r["resources"]]


def test_secrets_at_least_privilege_and_network_policies_only_when_asked(
    helm: str, tmp_path: Path
) -> None:
    docs = render(helm)
    [role] = by_kind(docs, "ClusterRole")
    # Read and written by name: never listed or watched, so no other Secret is in sight.
    assert rules_for(role, "secrets") == [{"get", "create", "patch", "delete"}]
    assert rules_for(role, "networkpolicies") == []
    assert rules_for(role, "kafkausers") == [{"get", "list", "watch", "patch"}]
    assert rules_for(role, "kafkausers/status") == [{"patch"}]
    [deployment] = by_kind(docs, "Deployment")
    [container] = deployment["spec"]["template"]["spec"]["containers"]
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["SAMSA_OPERATOR_NETWORK_POLICIES"] == "false"

    docs = render(helm, "--values", values_file(tmp_path, OTHER_VALUES))
    for role in by_kind(docs, "Role"):
        assert rules_for(role, "networkpolicies") == [{"get", "list", "create", "patch", "delete"}]
        assert rules_for(role, "secrets") == [{"get", "create", "patch", "delete"}]
    [deployment] = by_kind(docs, "Deployment")
    [container] = deployment["spec"]["template"]["spec"]["containers"]
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["SAMSA_OPERATOR_NETWORK_POLICIES"] == "true"


def test_without_peering_upgrades_never_overlap(helm: str) -> None:
    docs = render(helm, "--set", "peering.enabled=false")
    [deployment] = by_kind(docs, "Deployment")
    assert deployment["spec"]["strategy"] == {"type": "Recreate"}
    assert not by_kind(docs, "ClusterKopfPeering")


def test_chart_crds_include_kopf_peerings(helm: str) -> None:
    docs = render(helm, "--include-crds")
    names = {d["metadata"]["name"] for d in by_kind(docs, "CustomResourceDefinition")}
    assert names == {
        "kafkaclusters.kafka.samsa.dev",
        "topics.kafka.samsa.dev",
        "kafkausers.kafka.samsa.dev",
        "kopfpeerings.kopf.dev",
        "clusterkopfpeerings.kopf.dev",
    }


@pytest.mark.parametrize(
    ("args", "complaint"),
    [
        (["--set", "replicas=0"], "replicas"),
        (["--set", "watchNamespaces=default"], "watchNamespaces"),
        (["--set", "watchNamespaces={Not_A_Namespace}"], "watchNamespaces"),
        (["--set", "image.pullPolicy=Sometimes"], "pullPolicy"),
        (["--set", "resyncSeconds=-5"], "resyncSeconds"),
        (["--set", "bogus=1"], "bogus"),
        (["--set", "networkPolicy.enabled=maybe"], "networkPolicy"),
        (["--set", "peering.enabled=false", "--set", "replicas=2"], "replicas"),
    ],
)
def test_schema_rejects_bad_values(helm: str, args: list[str], complaint: str) -> None:
    result = run_helm(helm, "template", "t", str(CHART), *args)
    assert result.returncode != 0
    assert "values don't meet the specifications of the schema" in result.stderr
    assert complaint in result.stderr
