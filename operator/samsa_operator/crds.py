"""CustomResourceDefinitions rendered from the pydantic models (`make crds`).

Kubernetes wants a structural OpenAPI v3 schema: no $ref, no anyOf with null, a type on
every node. This module turns pydantic's JSON schema into one, adds the CEL rules that a
schema can state, printer columns and short names, and writes the YAML files.
"""

from __future__ import annotations

import copy
import sys
from pathlib import Path
from typing import Any

import yaml

from samsa_operator import models

# Fields whose value is a free-form Kubernetes structure (affinity, tolerations...).
_FREE_FORM = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}

_NODE_PORT_BASE = {
    "rule": "self.type != 'NodePort' || has(self.nodePortBase)",
    "message": "a NodePort external listener needs nodePortBase",
}

# CEL rules, by JSON path of the node they sit on (the schema can say these; the rest is
# checked by the operator, which reports through the Ready condition).
_RULES: dict[str, dict[str, list[dict[str, str]]]] = {
    "KafkaCluster": {
        "spec.listeners.external": [dict(_NODE_PORT_BASE)],
        "spec.listeners.clients[].external": [dict(_NODE_PORT_BASE)],
    },
    "Topic": {
        "spec.topicName": [{"rule": "self == oldSelf", "message": "topicName is immutable"}],
    },
    "KafkaUser": {
        "spec.clusterRef": [{"rule": "self == oldSelf", "message": "clusterRef is immutable"}],
    },
}

_MAX_PROPERTIES = {"KafkaCluster": {"spec.config": 512}, "Topic": {"spec.config": 512}}

_PRINTER_COLUMNS: dict[str, list[dict[str, Any]]] = {
    "KafkaCluster": [
        {"name": "Brokers", "type": "integer", "jsonPath": ".spec.brokers.replicas"},
        {"name": "Ready Brokers", "type": "integer", "jsonPath": ".status.readyBrokers"},
        {
            "name": "Ready",
            "type": "string",
            "jsonPath": '.status.conditions[?(@.type=="Ready")].status',
        },
        {"name": "Bootstrap", "type": "string", "jsonPath": ".status.bootstrapServers.internal"},
        # Why a cluster is not Ready, in the plain listing (`diagnosis` names the cause).
        {
            "name": "Reason",
            "type": "string",
            "jsonPath": '.status.conditions[?(@.type=="Ready")].reason',
        },
        {
            "name": "Message",
            "type": "string",
            "priority": 1,
            "jsonPath": '.status.conditions[?(@.type=="Ready")].message',
        },
        {
            "name": "Roll",
            "type": "string",
            "priority": 1,
            "jsonPath": '.status.conditions[?(@.type=="RollingRestart")].reason',
        },
        {
            "name": "Scaling",
            "type": "string",
            "priority": 1,
            "jsonPath": '.status.conditions[?(@.type=="Scaling")].reason',
        },
        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
    ],
    "Topic": [
        {"name": "Cluster", "type": "string", "jsonPath": ".spec.clusterRef"},
        {"name": "Topic", "type": "string", "jsonPath": ".status.topicName"},
        {"name": "Partitions", "type": "integer", "jsonPath": ".spec.partitions"},
        {"name": "RF", "type": "integer", "jsonPath": ".spec.replicationFactor"},
        {
            "name": "Ready",
            "type": "string",
            "jsonPath": '.status.conditions[?(@.type=="Ready")].status',
        },
        {
            "name": "Reason",
            "type": "string",
            "priority": 1,
            "jsonPath": '.status.conditions[?(@.type=="Ready")].reason',
        },
        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
    ],
    "KafkaUser": [
        {"name": "Cluster", "type": "string", "jsonPath": ".spec.clusterRef"},
        {"name": "Authentication", "type": "string", "jsonPath": ".spec.authentication.type"},
        {"name": "Secret", "type": "string", "jsonPath": ".status.secret"},
        {
            "name": "Ready",
            "type": "string",
            "jsonPath": '.status.conditions[?(@.type=="Ready")].status',
        },
        {
            "name": "Reason",
            "type": "string",
            "priority": 1,
            "jsonPath": '.status.conditions[?(@.type=="Ready")].reason',
        },
        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
    ],
}

NAMES = {
    "KafkaCluster": {
        "plural": "kafkaclusters",
        "singular": "kafkacluster",
        "kind": "KafkaCluster",
        "listKind": "KafkaClusterList",
        "shortNames": ["kc"],
        "categories": ["samsa"],
    },
    "Topic": {
        "plural": "topics",
        "singular": "topic",
        "kind": "Topic",
        "listKind": "TopicList",
        "shortNames": ["kt"],
        "categories": ["samsa"],
    },
    "KafkaUser": {
        "plural": "kafkausers",
        "singular": "kafkauser",
        "kind": "KafkaUser",
        "listKind": "KafkaUserList",
        "shortNames": ["ku"],
        "categories": ["samsa"],
    },
}


def structural(schema: dict[str, Any]) -> dict[str, Any]:
    """pydantic's JSON schema -> a Kubernetes structural schema (refs inlined)."""
    defs = schema.get("$defs", {})

    def walk(node: dict[str, Any]) -> dict[str, Any]:
        if "$ref" in node:
            target = walk(copy.deepcopy(defs[node["$ref"].rsplit("/", 1)[1]]))
            extra = {k: v for k, v in node.items() if k != "$ref"}
            return {**target, **walk(extra)} if extra else target
        node = dict(node)
        node.pop("title", None)
        node.pop("$defs", None)
        if "anyOf" in node:
            options = node.pop("anyOf")
            nullable = any(o.get("type") == "null" for o in options)
            options = [o for o in options if o.get("type") != "null"]
            if node.get("default", 0) is None:
                node.pop("default")
            if len(options) == 1:
                node = {**walk(options[0]), **node}
            else:  # scalar unions (config values): any JSON scalar, checked by the operator
                node["x-kubernetes-preserve-unknown-fields"] = True
            if nullable:
                node["nullable"] = True
        if "const" in node:
            node["enum"] = [node.pop("const")]
        if node.get("additionalProperties") is False:
            del node["additionalProperties"]
        elif node.get("additionalProperties") is True or (
            node.get("type") == "object"
            and "properties" not in node
            and "additionalProperties" not in node
        ):
            node.pop("additionalProperties", None)
            node.update(_FREE_FORM)
        elif isinstance(node.get("additionalProperties"), dict):
            node["additionalProperties"] = walk(node["additionalProperties"])
        if "items" in node:
            node["items"] = walk(node["items"])
        if "properties" in node:
            props = {k: walk(v) for k, v in node["properties"].items()}
            required = set(node.get("required", []))
            for name, prop in props.items():
                # An object field with defaults inside gets {} so the API server fills them.
                if (
                    prop.get("type") == "object"
                    and "properties" in prop
                    and name not in required
                    and not prop.get("nullable")
                    and "default" not in prop
                ):
                    prop["default"] = {}
            node["properties"] = props
        return node

    return walk(schema)


def _place(root: dict[str, Any], path: str, key: str, value: Any) -> None:
    """Set `key` on the schema node at `path`; `name[]` is each item of the list `name`."""
    node = root
    for part in path.split("."):
        node = node["properties"][part.removesuffix("[]")]
        if part.endswith("[]"):
            node = node["items"]
    node[key] = value


def openapi_schema(kind: str) -> dict[str, Any]:
    spec = structural(models.SPEC_MODELS[kind].model_json_schema(by_alias=True))
    status = structural(models.STATUS_MODELS[kind].model_json_schema(by_alias=True))
    root: dict[str, Any] = {
        "type": "object",
        "required": ["spec"],
        "properties": {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            "metadata": {"type": "object"},
            "spec": spec,
            "status": status,
        },
    }
    for path, rules in _RULES.get(kind, {}).items():
        _place(root, path, "x-kubernetes-validations", rules)
    for path, limit in _MAX_PROPERTIES.get(kind, {}).items():
        _place(root, path, "maxProperties", limit)
    return root


def crd(kind: str) -> dict[str, Any]:
    names = NAMES[kind]
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{names['plural']}.{models.GROUP}"},
        "spec": {
            "group": models.GROUP,
            "names": names,
            "scope": "Namespaced",
            "versions": [
                {
                    "name": models.VERSION,
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "additionalPrinterColumns": _PRINTER_COLUMNS[kind],
                    "schema": {"openAPIV3Schema": openapi_schema(kind)},
                }
            ],
        },
    }


HEADER = "# Generated from samsa_operator.models by `make crds`: do not edit.\n"


def render(kind: str) -> str:
    return HEADER + yaml.safe_dump(crd(kind), sort_keys=False, width=100)


def file_name(kind: str) -> str:
    return f"{models.GROUP}_{NAMES[kind]['plural']}.yaml"


def write(directories: list[Path]) -> None:
    for directory in directories:
        directory.mkdir(parents=True, exist_ok=True)
        for kind in NAMES:
            (directory / file_name(kind)).write_text(render(kind))


if __name__ == "__main__":
    write([Path(arg) for arg in sys.argv[1:]] or [Path("crds")])
