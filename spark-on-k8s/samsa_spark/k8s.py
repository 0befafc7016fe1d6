"""Where a Spark job on Kubernetes finds its brokers: the KafkaCluster's status.

The driver reads ``status.bootstrapServers`` of the named KafkaCluster (kafka.samsa.dev/v1alpha1)
with its own ServiceAccount, which needs only ``get`` on kafkaclusters in its namespace.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

GROUP, VERSION, PLURAL = "kafka.samsa.dev", "v1alpha1", "kafkaclusters"
_SA_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")


class ClusterNotReady(RuntimeError):
    pass


def bootstrap_of(cluster: Mapping[str, Any], listener: str | None = None) -> str:
    """The bootstrap servers a KafkaCluster publishes in its status (the plain internal
    listener's, or those of the named listener of spec.listeners.clients), or a clear
    error."""
    name = cluster.get("metadata", {}).get("name", "?")
    status = cluster.get("status") or {}
    servers = status.get("bootstrapServers")
    if isinstance(servers, Mapping):
        servers = (
            (servers.get("listeners") or {}).get(listener) if listener else servers.get("internal")
        )
    if isinstance(servers, list):
        servers = ",".join(servers)
    if not servers and listener and status.get("bootstrapServers"):
        raise ClusterNotReady(
            f"KafkaCluster {name} has no listener {listener} "
            "(status.bootstrapServers.listeners; see spec.listeners.clients)"
        )
    if not servers:
        conditions = {c.get("type"): c for c in status.get("conditions", [])}
        ready = conditions.get("Ready", {})
        why = ready.get("message") or ready.get("reason") or "no status yet"
        raise ClusterNotReady(f"KafkaCluster {name} has no status.bootstrapServers yet ({why})")
    return str(servers)


def bootstrap_from_cluster(
    name: str, namespace: str | None = None, listener: str | None = None
) -> str:
    """The named KafkaCluster's bootstrap servers, read with in-cluster config (the pod's
    ServiceAccount), or else a kubeconfig's. Its namespace, unless given, is the pod's own,
    or the kubeconfig context's, as kubectl takes it."""
    from kubernetes import client, config

    try:
        config.load_incluster_config()
        if namespace is None and _SA_NAMESPACE.exists():
            namespace = _SA_NAMESPACE.read_text().strip()
    except config.ConfigException:
        config.load_kube_config()
        if namespace is None:
            _contexts, active = config.list_kube_config_contexts()
            namespace = ((active or {}).get("context") or {}).get("namespace")
    obj: Any = client.CustomObjectsApi().get_namespaced_custom_object(
        GROUP, VERSION, namespace or "default", PLURAL, name
    )
    return bootstrap_of(obj, listener)
