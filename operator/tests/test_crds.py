"""The CRDs: rendered from the models, committed up to date, valid and structural; the
examples pass their schemas; bad specs fail them, or the operator's own validation."""

from __future__ import annotations

from typing import Any

import kubernetes_validate
import pytest
import yaml
from op_support import CHART, CRDS, EXAMPLES, K8S_VERSIONS, load_yaml_documents
from openapi_schema_validator import OAS30Validator

from samsa_operator import crds, models


@pytest.mark.parametrize("kind", crds.NAMES)
def test_committed_crds_are_not_stale(kind: str) -> None:
    rendered = crds.render(kind)
    for directory in (CRDS, CHART / "crds"):
        path = directory / crds.file_name(kind)
        assert path.exists(), f"{path} is missing: run `make crds`"
        assert path.read_text() == rendered, f"{path} is stale: run `make crds`"


@pytest.mark.parametrize("version", K8S_VERSIONS)
@pytest.mark.parametrize("kind", crds.NAMES)
def test_crds_are_valid_kubernetes(kind: str, version: str) -> None:
    kubernetes_validate.validate(crds.crd(kind), version, strict=True)


def walk(node: Any, path: str = "") -> list[tuple[str, dict[str, Any]]]:
    out = [(path, node)]
    for name, sub in node.get("properties", {}).items():
        out += walk(sub, f"{path}.{name}")
    if isinstance(node.get("items"), dict):
        out += walk(node["items"], f"{path}[]")
    if isinstance(node.get("additionalProperties"), dict):
        out += walk(node["additionalProperties"], f"{path}{{}}")
    return out


@pytest.mark.parametrize("kind", crds.NAMES)
def test_schemas_are_structural(kind: str) -> None:
    schema = crds.openapi_schema(kind)
    for path, node in walk(schema):
        assert not {"$ref", "anyOf", "allOf", "oneOf", "$defs", "const"} & set(node), path
        free = node.get("x-kubernetes-preserve-unknown-fields") or node.get(
            "x-kubernetes-int-or-string"
        )
        assert "type" in node or free, f"{path} has no type"
        if "properties" in node:
            assert node.get("additionalProperties") is None, path


def crd_schema(kind: str) -> dict[str, Any]:
    return crds.openapi_schema(kind)


def examples() -> list[dict[str, Any]]:
    return [doc for path in sorted(EXAMPLES.glob("*.yaml")) for doc in load_yaml_documents(path)]


@pytest.mark.parametrize("doc", examples(), ids=lambda d: d["metadata"]["name"])
def test_examples_match_their_crd_and_the_models(doc: dict[str, Any]) -> None:
    OAS30Validator(crd_schema(doc["kind"])).validate(doc)
    assert doc["apiVersion"] == models.API_VERSION
    models.parse_spec(models.SPEC_MODELS[doc["kind"]], doc["spec"])


def cluster(spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": models.API_VERSION,
        "kind": "KafkaCluster",
        "metadata": {"name": "c"},
        "spec": spec,
    }


BAD_CLUSTERS = {
    "negative replicas": ({"brokers": {"replicas": -1}}, "spec.brokers.replicas"),
    "zero zookeepers": ({"zookeeper": {"replicas": 0}}, "spec.zookeeper.replicas"),
    "bad storage size": (
        {"brokers": {"storage": {"size": "ten gigs"}}},
        "spec.brokers.storage.size",
    ),
    "bad cpu": ({"brokers": {"resources": {"requests": {"cpu": "x"}}}}, "spec.brokers.resources"),
    "replicas as text": ({"brokers": {"replicas": "three"}}, "spec.brokers.replicas"),
    "unknown listener type": (
        {"listeners": {"external": {"type": "Ingress", "advertisedHostTemplate": "h"}}},
        "spec.listeners.external.type",
    ),
}


@pytest.mark.parametrize("case", BAD_CLUSTERS)
def test_bad_clusters_fail_the_schema_and_the_models(case: str) -> None:
    spec, field = BAD_CLUSTERS[case]
    errors = list(OAS30Validator(crd_schema("KafkaCluster")).iter_errors(cluster(spec)))
    assert errors, f"the schema let {case} through"
    with pytest.raises(models.SpecError, match=field.replace(".", r"\.")):
        models.parse_spec(models.KafkaClusterSpec, spec)


def test_unknown_fields_are_refused_by_the_models_naming_them() -> None:
    # Kubernetes prunes unknown fields (kubectl's strict field validation reports them);
    # whatever reaches the operator is refused with the field's name.
    with pytest.raises(models.SpecError, match=r"spec\.brokers\.replica: unknown field"):
        models.parse_spec(models.KafkaClusterSpec, {"brokers": {"replica": 3}})


@pytest.mark.parametrize("key", models.OPERATOR_OWNED_KEYS)
def test_operator_owned_keys_are_refused_by_the_models(key: str) -> None:
    # Not by a CEL rule: the API server cannot type a rule over a map of free-form values
    # ("unable to convert structural schema to CEL declarations"); the operator refuses them
    # with the Ready condition (tests/integration/test_kube.py).
    config = crd_schema("KafkaCluster")["properties"]["spec"]["properties"]["config"]
    assert "x-kubernetes-validations" not in config
    with pytest.raises(models.SpecError, match=f"spec.config: {key} is set by the operator"):
        models.parse_spec(models.KafkaClusterSpec, {"config": {key: "x"}})


def test_topic_name_is_immutable_by_a_transition_rule() -> None:
    name = crd_schema("Topic")["properties"]["spec"]["properties"]["topicName"]
    assert name["x-kubernetes-validations"] == [
        {"rule": "self == oldSelf", "message": "topicName is immutable"}
    ]


def test_bad_topics_fail_the_schema() -> None:
    for spec in (
        {"clusterRef": "c", "partitions": 0},
        {"clusterRef": "c", "replicationFactor": 0},
        {"partitions": 1},
        {"clusterRef": "c", "topicName": "no spaces allowed"},
    ):
        doc = {"apiVersion": models.API_VERSION, "kind": "Topic", "metadata": {}, "spec": spec}
        assert list(OAS30Validator(crd_schema("Topic")).iter_errors(doc)), spec


def test_printer_columns_and_short_names() -> None:
    for kind, short in (("KafkaCluster", "kc"), ("Topic", "kt"), ("KafkaUser", "ku")):
        doc = yaml.safe_load(crds.render(kind))
        assert doc["spec"]["names"]["shortNames"] == [short]
        [version] = doc["spec"]["versions"]
        columns = {c["name"]: c["jsonPath"] for c in version["additionalPrinterColumns"]}
        assert columns["Ready"] == '.status.conditions[?(@.type=="Ready")].status'
        assert version["subresources"] == {"status": {}}


def test_kafka_user_cluster_is_immutable_and_bad_users_fail_the_schema() -> None:
    ref = crd_schema("KafkaUser")["properties"]["spec"]["properties"]["clusterRef"]
    assert ref["x-kubernetes-validations"] == [
        {"rule": "self == oldSelf", "message": "clusterRef is immutable"}
    ]
    for spec in (
        {"clusterRef": "c"},
        {"clusterRef": "c", "authentication": {"type": "plain"}},
        {
            "clusterRef": "c",
            "authentication": {"type": "tls"},
            "authorization": {"acls": [{"resource": {"type": "topic"}, "operations": ["Eat"]}]},
        },
    ):
        doc = {"apiVersion": models.API_VERSION, "kind": "KafkaUser", "metadata": {}, "spec": spec}
        assert list(OAS30Validator(crd_schema("KafkaUser")).iter_errors(doc)), spec
