"""What the status of a KafkaCluster or a Topic says, from what was observed (pure).

Conditions follow the Kubernetes contract: type, status, reason, message, the generation
they describe, and a lastTransitionTime that moves only when the status flips.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from samsa_operator import resources
from samsa_operator.diagnosis import Cause, pod_ready
from samsa_operator.reconcile import ClusterInfo

Obj = dict[str, Any]


def now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def condition(
    type_: str, ok: bool | None, reason: str, message: str, generation: int | None
) -> Obj:
    status = "Unknown" if ok is None else ("True" if ok else "False")
    return {
        "type": type_,
        "status": status,
        "reason": reason,
        "message": message,
        "observedGeneration": generation,
    }


def merge_conditions(old: Iterable[Mapping[str, Any]], new: Sequence[Obj], at: str) -> list[Obj]:
    """New conditions replace old ones of the same type; a flip stamps lastTransitionTime."""
    previous = {c.get("type"): c for c in old}
    merged = []
    for c in new:
        before = previous.pop(c["type"], None)
        same = before is not None and before.get("status") == c["status"]
        stamp = before.get("lastTransitionTime") if same and before else at
        merged.append({**c, "lastTransitionTime": stamp or at})
    merged.extend(dict(c) for c in previous.values())
    return merged


def ready_replicas(sts: Mapping[str, Any] | None) -> int:
    return int((sts or {}).get("status", {}).get("readyReplicas", 0) or 0)


def _part(cause: Cause | None, count: str, not_ready: str) -> tuple[str, str]:
    """(reason, message) of a part that is not ready: the cause found, or else only the
    count, with the reason `not_ready`."""
    if cause is not None:
        return cause.reason, f"{count}: {cause.message}"
    return not_ready, count


def cluster_status(
    cluster: resources.Cluster,
    *,
    generation: int | None,
    broker_pods: Sequence[Mapping[str, Any]],
    zookeeper_sts: Mapping[str, Any] | None,
    info: ClusterInfo | None,
    zookeeper_cause: Cause | None = None,
    broker_cause: Cause | None = None,
) -> tuple[Obj, list[Obj]]:
    """(status fields, conditions) of a KafkaCluster whose children are in place.

    A part that is not ready names the first cause `diagnosis` found, if any: Ready takes
    ZooKeeper's before the brokers', since brokers wait for ZooKeeper."""
    spec = cluster.spec
    hashes = resources.broker_config_hashes(cluster)
    pods = {p["metadata"]["name"]: p for p in broker_pods}
    brokers = []
    for broker_id in range(cluster.broker_count):
        name = cluster.broker_pod(broker_id)
        pod = pods.get(name)
        annotations = (pod or {}).get("metadata", {}).get("annotations", {}) or {}
        brokers.append(
            {
                "id": broker_id,
                "pod": name,
                "ready": bool(pod and pod_ready(pod)),
                "rack": annotations.get(resources.RACK_ANNOTATION),
                "configHash": hashes[broker_id],
                "runningConfigHash": annotations.get(resources.CONFIG_HASH_ANNOTATION),
            }
        )
    ready_brokers = sum(1 for b in brokers if b["ready"])
    if cluster.deploys_zookeeper:
        zk_ready_count = ready_replicas(zookeeper_sts)
        # A quorum serves; the cluster is Ready only with every server up.
        zk = {
            "ready": zk_ready_count >= spec.zookeeper.replicas,
            "readyReplicas": zk_ready_count,
            "replicas": spec.zookeeper.replicas,
            "connect": cluster.zookeeper_connect,
        }
    else:
        zk = {
            "ready": True,
            "readyReplicas": 0,
            "replicas": 0,
            "connect": cluster.zookeeper_connect,
        }
    fields: Obj = {
        "observedGeneration": generation,
        "bootstrapServers": {
            "internal": cluster.bootstrap_servers,
            "external": cluster.external_bootstrap_servers(spec.listeners.external),
            # An external listener's address is outside: its brokers advertise nothing else.
            "listeners": {
                c.name: cluster.external_bootstrap_servers(c.external)
                or f"{cluster.bootstrap}.{cluster.namespace}.svc:{c.port}"
                for c in spec.listeners.clients
            },
        },
        "replicas": spec.brokers.replicas,
        "readyBrokers": ready_brokers,
        "brokers": brokers,
        "zookeeper": zk,
        "controllerId": info.controller_id if info else None,
        "clusterId": info.cluster_id if info else None,
    }
    zk_count = f"{zk['readyReplicas']}/{zk['replicas']} ZooKeeper servers ready"
    broker_count = f"{ready_brokers}/{spec.brokers.replicas} brokers ready"
    brokers_ready = ready_brokers >= spec.brokers.replicas
    # Ready pods are not yet a cluster that knows them all: until its metadata lists every
    # broker, a topic of replication factor `replicas` is refused (INVALID_REPLICATION_FACTOR).
    known = len(info.brokers) if info is not None else None
    if brokers_ready and known is not None and known < spec.brokers.replicas:
        brokers_ready = False
        broker_count += f", {known} in the cluster's metadata"
    if not zk["ready"]:
        ready = condition(
            "Ready", False, *_part(zookeeper_cause, zk_count, "ZooKeeperNotReady"), generation
        )
    elif not brokers_ready:
        ready = condition(
            "Ready", False, *_part(broker_cause, broker_count, "BrokersNotReady"), generation
        )
    else:
        ready = condition("Ready", True, "Ready", f"{ready_brokers} brokers ready", generation)
    if not cluster.deploys_zookeeper:
        external = f"external ZooKeeper {cluster.zookeeper_connect}"
        zk_condition = condition("ZooKeeperReady", True, "Ready", external, generation)
    elif zk["ready"]:
        zk_condition = condition("ZooKeeperReady", True, "Ready", zk_count, generation)
    else:
        zk_part = _part(zookeeper_cause, zk_count, "NotReady")
        zk_condition = condition("ZooKeeperReady", False, *zk_part, generation)
    if brokers_ready:
        brokers_condition = condition("BrokersReady", True, "Ready", broker_count, generation)
    else:
        broker_part = _part(broker_cause, broker_count, "NotReady")
        brokers_condition = condition("BrokersReady", False, *broker_part, generation)
    return fields, [ready, zk_condition, brokers_condition]
