"""Pure builders: a KafkaCluster's spec to the Kubernetes objects that run it (dicts, no I/O).

ZooKeeper: StatefulSet, headless and client Services, PodDisruptionBudget.
Brokers: StatefulSet (OnDelete: the operator restarts pods itself), headless and bootstrap
Services, ConfigMap of per-broker properties, PodDisruptionBudget, and the external Services
when an external listener is asked for.

Each broker's properties live in the ConfigMap under `broker-<id>.properties`; their hash is
kept out of the pod template so one broker's change never rolls the others. What every
broker's address and ZooKeeper derive from (listeners, ZooKeeper connect, racks) is hashed
into the pod template, so a change there rolls them all.

The broker StatefulSet keeps its current size while a scale-down drains the brokers that go
(`Cluster.current_brokers`); it grows at once.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from samsa_operator import security
from samsa_operator.models import REPLICATION_PORT, ExternalListener, KafkaClusterSpec, ZooKeeper

Obj = dict[str, Any]

DEFAULT_BROKER_IMAGE = "ghcr.io/samsa-dev/samsa:0.1.0"
MANAGED_BY = "samsa-operator"
RACK_ANNOTATION = "kafka.samsa.dev/rack"
# On a broker pod: the hash of the properties its broker was verified to run.
CONFIG_HASH_ANNOTATION = "kafka.samsa.dev/config-hash"
# In the pod template: the hash of the settings every broker's properties derive from.
PLACEMENT_HASH_ANNOTATION = "kafka.samsa.dev/placement-hash"
# In the pod template: the fingerprint of the certificates the brokers serve (security).
CERTIFICATES_ANNOTATION = "kafka.samsa.dev/certificates"
# On a KafkaCluster (every broker) or a broker pod (that one): restart through a roll.
MANUAL_ROLL_ANNOTATION = "kafka.samsa.dev/manual-rolling-update"

HTTP_PORT = 9644
ZK_CLIENT_PORT = 2181
ZK_ADMIN_PORT = 8080
DATA_DIR = "/var/lib/samsa/data"
RUN_DIR = "/var/run/samsa"
CONFIG_DIR = "/etc/samsa"
PODINFO_DIR = "/etc/podinfo"
UID = 1000
# In a broker's properties: its pod's IP, filled in by the init container.
POD_IP = "$(POD_IP)"


@dataclass(frozen=True)
class Cluster:
    """What the builders need to know of one KafkaCluster resource."""

    name: str
    namespace: str
    uid: str
    spec: KafkaClusterSpec
    broker_image: str = DEFAULT_BROKER_IMAGE
    current_brokers: int | None = None  # the broker StatefulSet's size now, if it exists
    pki_rotation: str | None = None  # security.Pki.rotation of a secured cluster
    network_policy: bool = False  # a NetworkPolicy limits the brokers' ports

    @property
    def broker_count(self) -> int:
        """Broker pods to run: the spec's number, or more while a scale-down drains."""
        return max(self.spec.brokers.replicas, self.current_brokers or 0)

    # Names of the children, in one place so handlers and tests agree.
    @property
    def broker_sts(self) -> str:
        return f"{self.name}-kafka"

    @property
    def broker_headless(self) -> str:
        return f"{self.name}-kafka-brokers"

    @property
    def bootstrap(self) -> str:
        return f"{self.name}-kafka-bootstrap"

    def exposure_bootstrap(self, listener: str) -> str:
        return f"{self.name}-kafka-{listener}-bootstrap"

    def exposure_service(self, listener: str, broker_id: int) -> str:
        return f"{self.name}-kafka-{listener}-{broker_id}"

    @property
    def broker_config(self) -> str:
        return f"{self.name}-kafka-config"

    @property
    def zk_sts(self) -> str:
        return f"{self.name}-zookeeper"

    @property
    def zk_headless(self) -> str:
        return f"{self.name}-zookeeper-nodes"

    @property
    def zk_client(self) -> str:
        return f"{self.name}-zookeeper-client"

    @property
    def deploys_zookeeper(self) -> bool:
        return self.spec.zookeeper.connect is None

    @property
    def zookeeper_connect(self) -> str:
        if self.spec.zookeeper.connect is not None:
            return self.spec.zookeeper.connect
        return f"{self.zk_client}.{self.namespace}.svc:{ZK_CLIENT_PORT}"

    @property
    def internal_port(self) -> int:
        return self.spec.listeners.internal_port

    @property
    def bootstrap_servers(self) -> str | None:
        """The plain listener's bootstrap address; None when it is off."""
        if not self.spec.listeners.plain:
            return None
        return f"{self.bootstrap}.{self.namespace}.svc:{self.internal_port}"

    def broker_pod(self, broker_id: int) -> str:
        return f"{self.broker_sts}-{broker_id}"

    def broker_host(self, broker_id: int) -> str:
        return f"{self.broker_pod(broker_id)}.{self.broker_headless}.{self.namespace}.svc"

    @property
    def exposures(self) -> list[Exposure]:
        """The listeners served outside Kubernetes: the plain `external`, and each of
        `clients` with an `external`."""
        listeners = self.spec.listeners
        found = [Exposure("external", listeners.external)] if listeners.external else []
        found += [Exposure(c.name, c.external) for c in listeners.clients if c.external]
        return found

    def external_address(self, broker_id: int) -> tuple[str, int] | None:
        ext = self.spec.listeners.external
        return None if ext is None else ext.address(broker_id)

    def external_bootstrap_servers(self, ext: ExternalListener | None) -> str | None:
        """Every broker's external address: any of them bootstraps a client."""
        if ext is None:
            return None
        addresses = [ext.address(i) for i in range(self.broker_count)]
        return ",".join(f"{host}:{port}" for host, port in addresses)

    def labels(self, component: str) -> dict[str, str]:
        return {
            "app.kubernetes.io/name": "samsa",
            "app.kubernetes.io/instance": self.name,
            "app.kubernetes.io/component": component,
            "app.kubernetes.io/managed-by": MANAGED_BY,
        }

    def selector(self, component: str) -> dict[str, str]:
        return {
            "app.kubernetes.io/instance": self.name,
            "app.kubernetes.io/component": component,
        }

    def meta(self, name: str, component: str) -> Obj:
        return {
            "name": name,
            "namespace": self.namespace,
            "labels": self.labels(component),
            "ownerReferences": [
                {
                    "apiVersion": "kafka.samsa.dev/v1alpha1",
                    "kind": "KafkaCluster",
                    "name": self.name,
                    "uid": self.uid,
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        }


# -- broker properties ------------------------------------------------------------------------


def render_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


@dataclass(frozen=True)
class Exposure:
    """A listener served outside Kubernetes: its Services are `<cluster>-kafka-<name>-<id>`,
    forwarding to the broker container's port of the same name."""

    name: str
    spec: ExternalListener


def broker_properties(cluster: Cluster, broker_id: int) -> dict[str, str]:
    """The full server.properties of one broker (broker.rack is added at pod start)."""
    spec = cluster.spec
    port = cluster.internal_port
    props: dict[str, str] = {k: render_value(v) for k, v in sorted(spec.config.items())}
    props["broker.id"] = str(broker_id)
    props["zookeeper.connect"] = cluster.zookeeper_connect
    props["log.dirs"] = DATA_DIR
    # Every address is the pod's own IP, substituted for POD_IP by the init container (the
    # downward API gives it): clients and brokers reach each other without DNS.
    props["http.listener"] = f"{POD_IP}:{HTTP_PORT}"
    if spec.secured:
        props.update(security.listener_properties(cluster, broker_id, POD_IP))
        return props
    external = cluster.external_address(broker_id)
    if external is None:
        props["listeners"] = f"PLAINTEXT://{POD_IP}:{port}"
        props["advertised.listeners"] = f"PLAINTEXT://{POD_IP}:{port}"
    else:
        ext = cluster.spec.listeners.external
        assert ext is not None
        container_port = external_container_port(cluster)
        host, ext_port = external
        props["listeners"] = f"INTERNAL://{POD_IP}:{port},EXTERNAL://{POD_IP}:{container_port}"
        props["advertised.listeners"] = f"INTERNAL://{POD_IP}:{port},EXTERNAL://{host}:{ext_port}"
        props["listener.security.protocol.map"] = "INTERNAL:PLAINTEXT,EXTERNAL:PLAINTEXT"
        props["inter.broker.listener.name"] = "INTERNAL"
    return props


def render_properties(props: Mapping[str, str]) -> str:
    lines = ["# Managed by samsa-operator: edits are reverted."]
    lines += [f"{k}={v}" for k, v in props.items()]
    return "\n".join(lines) + "\n"


def config_hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def broker_configs(cluster: Cluster) -> dict[str, str]:
    """ConfigMap data: one properties file per broker id."""
    return {
        f"broker-{i}.properties": render_properties(broker_properties(cluster, i))
        for i in range(cluster.broker_count)
    }


def broker_config_hashes(cluster: Cluster) -> dict[int, str]:
    """Broker id -> hash of its properties (the day-2 roll compares it with the pod's)."""
    return {
        int(name.removeprefix("broker-").removesuffix(".properties")): config_hash(text)
        for name, text in broker_configs(cluster).items()
    }


def placement_hash(cluster: Cluster) -> str:
    """Hash of what the operator-owned properties derive from: a change rolls every broker."""
    spec = cluster.spec
    listeners = spec.listeners.model_dump(mode="json", by_alias=True)
    rack = spec.rack.model_dump(mode="json", by_alias=True) if spec.rack else None
    shape: list[Any] = [cluster.zookeeper_connect, listeners, rack]
    if spec.secured:  # only then: a cluster without security keeps its earlier hash
        auth = spec.authorization.model_dump(mode="json") if spec.authorization else None
        shape.append(auth)
    return config_hash(json.dumps(shape, sort_keys=True))


def listener_ports(cluster: Cluster) -> list[tuple[str, int]]:
    """(port name, port) of the secured cluster's replication and client listeners."""
    spec = cluster.spec
    if not spec.secured:
        return []
    ports = [("replication", REPLICATION_PORT)]
    ports += [(c.name, c.port) for c in spec.listeners.clients]
    return ports


def external_container_port(cluster: Cluster) -> int:
    return cluster.internal_port + 2


# -- shared pieces ----------------------------------------------------------------------------


def _resources(req: Any) -> Obj:
    out: Obj = {}
    if req.requests:
        out["requests"] = dict(req.requests)
    if req.limits:
        out["limits"] = dict(req.limits)
    return out


def _pvc_template(name: str, storage: Any) -> Obj:
    spec: Obj = {
        "accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": storage.size}},
    }
    if storage.storage_class is not None:  # "" asks for no class, as in Kubernetes
        spec["storageClassName"] = storage.storage_class
    return {"metadata": {"name": name}, "spec": spec}


def _retention(storage: Any) -> Obj:
    policy = "Delete" if storage.delete_claim else "Retain"
    return {"whenDeleted": policy, "whenScaled": policy}


def _pod_security(cluster: Cluster) -> Obj:
    ctx: Obj = {
        "runAsNonRoot": True,
        "runAsUser": UID,
        "runAsGroup": UID,
        "fsGroup": UID,
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    override = cluster.spec.pod_template.security_context
    if override:
        ctx.update(override)
    return ctx


# A container that fails leaves the end of its log as its termination message, which the
# operator's status quotes (`diagnosis`): no log reading, no extra RBAC.
TERMINATION_MESSAGE = "FallbackToLogsOnError"
CONTAINER_SECURITY: Obj = {
    "allowPrivilegeEscalation": False,
    "readOnlyRootFilesystem": True,
    "runAsNonRoot": True,
    "capabilities": {"drop": ["ALL"]},
}


def _apply_pod_template(cluster: Cluster, pod_meta: Obj, pod_spec: Obj) -> None:
    tpl = cluster.spec.pod_template
    pod_meta["labels"].update(tpl.labels)
    if tpl.annotations:
        pod_meta.setdefault("annotations", {}).update(tpl.annotations)
    if tpl.affinity:
        pod_spec["affinity"] = tpl.affinity
    if tpl.tolerations:
        pod_spec["tolerations"] = list(tpl.tolerations)
    if tpl.priority_class_name:
        pod_spec["priorityClassName"] = tpl.priority_class_name
    if tpl.node_selector:
        pod_spec["nodeSelector"] = dict(tpl.node_selector)
    if tpl.topology_spread_constraints:
        pod_spec["topologySpreadConstraints"] = list(tpl.topology_spread_constraints)
    if tpl.image_pull_secrets:
        pod_spec["imagePullSecrets"] = [{"name": n} for n in tpl.image_pull_secrets]


def _service(
    cluster: Cluster,
    name: str,
    component: str,
    ports: list[Obj],
    *,
    headless: bool = False,
    selector: dict[str, str] | None = None,
    service_type: str | None = None,
) -> Obj:
    spec: Obj = {"selector": selector or cluster.selector(component), "ports": ports}
    if headless:
        spec["clusterIP"] = "None"
        spec["publishNotReadyAddresses"] = True
    if service_type:
        spec["type"] = service_type
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": cluster.meta(name, component),
        "spec": spec,
    }


def _pdb(cluster: Cluster, name: str, component: str, budget: Any) -> Obj:
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": cluster.meta(name, component),
        "spec": {
            "maxUnavailable": budget.max_unavailable,
            "selector": {"matchLabels": cluster.selector(component)},
        },
    }


# -- ZooKeeper --------------------------------------------------------------------------------


def zookeeper_servers(cluster: Cluster, zk: ZooKeeper) -> str:
    """ZOO_SERVERS for the official image: server.<myid>=host:2888:3888;2181, myid = ordinal+1."""
    return " ".join(
        f"server.{i + 1}={cluster.zk_sts}-{i}.{cluster.zk_headless}.{cluster.namespace}.svc"
        f":2888:3888;{ZK_CLIENT_PORT}"
        for i in range(zk.replicas)
    )


# The official image's entrypoint writes myid from ZOO_MY_ID; ZooKeeper ids start at 1.
_ZK_START = (
    "export ZOO_MY_ID=$(( ${HOSTNAME##*-} + 1 )); exec /docker-entrypoint.sh zkServer.sh "
    "start-foreground"
)


def zookeeper_statefulset(cluster: Cluster) -> Obj:
    zk = cluster.spec.zookeeper
    component = "zookeeper"
    pod_meta: Obj = {"labels": cluster.labels(component)}
    container: Obj = {
        "name": "zookeeper",
        "image": zk.image,
        "command": ["bash", "-c", _ZK_START],
        "env": [
            {"name": "ZOO_SERVERS", "value": zookeeper_servers(cluster, zk)},
            {"name": "ZOO_STANDALONE_ENABLED", "value": "false" if zk.replicas > 1 else "true"},
            {"name": "ZOO_4LW_COMMANDS_WHITELIST", "value": "ruok,srvr,mntr,stat"},
            {"name": "ZOO_ADMINSERVER_ENABLED", "value": "true"},
            {"name": "ZOO_DATA_DIR", "value": "/data"},
            {"name": "ZOO_DATA_LOG_DIR", "value": "/datalog"},
            {"name": "ZOO_LOG_DIR", "value": "/logs"},
            {"name": "ZOO_CONF_DIR", "value": "/conf"},
        ],
        "ports": [
            {"name": "client", "containerPort": ZK_CLIENT_PORT},
            {"name": "peer", "containerPort": 2888},
            {"name": "election", "containerPort": 3888},
            {"name": "admin", "containerPort": ZK_ADMIN_PORT},
        ],
        "readinessProbe": {
            "httpGet": {"path": "/commands/ruok", "port": "admin"},
            "periodSeconds": 5,
            "failureThreshold": 3,
        },
        "livenessProbe": {
            "tcpSocket": {"port": "client"},
            "initialDelaySeconds": 20,
            "periodSeconds": 10,
        },
        "securityContext": CONTAINER_SECURITY,
        "terminationMessagePolicy": TERMINATION_MESSAGE,
        "volumeMounts": [
            {"name": "data", "mountPath": "/data"},
            {"name": "datalog", "mountPath": "/datalog"},
            {"name": "logs", "mountPath": "/logs"},
            {"name": "conf", "mountPath": "/conf"},
            {"name": "tmp", "mountPath": "/tmp"},
        ],
    }
    resources = _resources(zk.resources)
    if resources:
        container["resources"] = resources
    pod_spec: Obj = {
        "securityContext": _pod_security(cluster),
        "terminationGracePeriodSeconds": 30,
        "containers": [container],
        "volumes": [{"name": n, "emptyDir": {}} for n in ("datalog", "logs", "conf", "tmp")],
    }
    _apply_pod_template(cluster, pod_meta, pod_spec)
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": cluster.meta(cluster.zk_sts, component),
        "spec": {
            "serviceName": cluster.zk_headless,
            "replicas": zk.replicas,
            "podManagementPolicy": "Parallel",
            "updateStrategy": {"type": "OnDelete"},
            "selector": {"matchLabels": cluster.selector(component)},
            "persistentVolumeClaimRetentionPolicy": _retention(zk.storage),
            "template": {"metadata": pod_meta, "spec": pod_spec},
            "volumeClaimTemplates": [_pvc_template("data", zk.storage)],
        },
    }


def zookeeper_children(cluster: Cluster) -> list[Obj]:
    if not cluster.deploys_zookeeper:
        return []
    c = "zookeeper"
    client = [{"name": "client", "port": ZK_CLIENT_PORT, "targetPort": "client"}]
    peers = [
        {"name": "client", "port": ZK_CLIENT_PORT},
        {"name": "peer", "port": 2888},
        {"name": "election", "port": 3888},
    ]
    return [
        zookeeper_statefulset(cluster),
        _service(cluster, cluster.zk_headless, c, peers, headless=True),
        _service(cluster, cluster.zk_client, c, client),
        _pdb(cluster, cluster.zk_sts, c, cluster.spec.zookeeper.pod_disruption_budget),
    ]


# -- brokers ----------------------------------------------------------------------------------

# Runs in the init container: the broker's properties from the ConfigMap, plus broker.rack
# once the operator has written the node's label into the pod's annotations.
_COMPOSE_CONFIG = (
    """set -eu
id="${HOSTNAME##*-}"
src="@CONFIG@/broker-${id}.properties"
dst="@RUN@/server.properties"
if [ ! -f "$src" ]; then echo "no properties for broker $id in the ConfigMap" >&2; exit 1; fi
sed 's/[$](POD_IP)/'"${POD_IP}"'/g' "$src" > "$dst"
if [ "${RACK_ENABLED}" = "true" ]; then
  echo "waiting for the operator to record this pod's rack"
  until grep -q '^@ANN@=' @PODINFO@/annotations; do sleep 2; done
  rack=$(sed -n 's|^@ANN@="\\(.*\\)"$|\\1|p' @PODINFO@/annotations)
  echo "broker.rack=${rack}" >> "$dst"
fi
""".replace("@CONFIG@", CONFIG_DIR)
    .replace("@RUN@", RUN_DIR)
    .replace("@ANN@", RACK_ANNOTATION)
    .replace("@PODINFO@", PODINFO_DIR)
)
# A secured broker's properties name its TLS files under TLS_PLACEHOLDER too (the init
# container mounts them); an unsecured cluster's script stays as it was, so its pods do not
# roll for it.
_COMPOSE_SECURED = _COMPOSE_CONFIG.replace(
    """sed 's/[$](POD_IP)/'"${POD_IP}"'/g'""",
    """sed -e 's/[$](POD_IP)/'"${POD_IP}"'/g' -e 's|[$](TLS_DIR)|@TLS@|g'""".replace(
        "@TLS@", security.TLS_DIR
    ),
)
assert _COMPOSE_SECURED != _COMPOSE_CONFIG

# preStop: Kafka's controlled shutdown starts on SIGTERM; wait for it to finish so the
# kubelet never kills the broker while it is still handing over leadership.
_PRE_STOP = "kill -TERM 1; while kill -0 1 2>/dev/null; do sleep 1; done"


def broker_statefulset(cluster: Cluster) -> Obj:
    spec = cluster.spec
    component = "kafka"
    port = cluster.internal_port
    pod_meta: Obj = {
        "labels": cluster.labels(component),
        "annotations": {PLACEMENT_HASH_ANNOTATION: placement_hash(cluster)},
    }
    if spec.secured and cluster.pki_rotation:
        pod_meta["annotations"][CERTIFICATES_ANNOTATION] = cluster.pki_rotation
    if spec.metrics.enabled:
        pod_meta["annotations"].update(
            {
                "prometheus.io/scrape": "true",
                "prometheus.io/port": str(HTTP_PORT),
                "prometheus.io/path": "/metrics",
            }
        )
    ports: list[Obj] = [{"name": "kafka", "containerPort": port}] if spec.listeners.plain else []
    ports.append({"name": "http", "containerPort": HTTP_PORT})
    if spec.listeners.external is not None:
        ports.append({"name": "external", "containerPort": external_container_port(cluster)})
    ports += [{"name": n, "containerPort": p} for n, p in listener_ports(cluster)]
    mounts: list[Obj] = [
        {"name": "data", "mountPath": "/var/lib/samsa"},
        {"name": "run", "mountPath": RUN_DIR},
        {"name": "tmp", "mountPath": "/tmp"},
    ]
    if spec.secured:
        mounts.append({"name": "tls", "mountPath": security.TLS_DIR, "readOnly": True})
    broker: Obj = {
        "name": "broker",
        "image": cluster.broker_image,
        "command": ["samsa", "broker"],
        "args": ["--data-dir", DATA_DIR, "--config", f"{RUN_DIR}/server.properties"],
        "ports": ports,
        "readinessProbe": {
            "httpGet": {"path": "/readyz", "port": "http"},
            "periodSeconds": 5,
            "failureThreshold": 3,
        },
        "livenessProbe": {
            "httpGet": {"path": "/healthz", "port": "http"},
            "initialDelaySeconds": 10,
            "periodSeconds": 10,
            "failureThreshold": 6,
        },
        "lifecycle": {"preStop": {"exec": {"command": ["sh", "-c", _PRE_STOP]}}},
        "securityContext": CONTAINER_SECURITY,
        "terminationMessagePolicy": TERMINATION_MESSAGE,
        "volumeMounts": mounts,
    }
    resources = _resources(spec.brokers.resources)
    if resources:
        broker["resources"] = resources
    init: Obj = {
        "name": "config",
        "image": cluster.broker_image,
        "command": ["sh", "-c", _COMPOSE_SECURED if spec.secured else _COMPOSE_CONFIG],
        "env": [
            {"name": "RACK_ENABLED", "value": "true" if spec.rack else "false"},
            {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
        ],
        "securityContext": CONTAINER_SECURITY,
        "terminationMessagePolicy": TERMINATION_MESSAGE,
        "volumeMounts": [
            {"name": "config", "mountPath": CONFIG_DIR, "readOnly": True},
            {"name": "podinfo", "mountPath": PODINFO_DIR, "readOnly": True},
            {"name": "run", "mountPath": RUN_DIR},
        ],
    }
    if spec.secured:
        init["volumeMounts"].append(
            {"name": "tls", "mountPath": security.TLS_DIR, "readOnly": True}
        )
    pod_spec: Obj = {
        "securityContext": _pod_security(cluster),
        "terminationGracePeriodSeconds": spec.brokers.termination_grace_period_seconds,
        "initContainers": [init],
        "containers": [broker],
        "volumes": [
            {"name": "config", "configMap": {"name": cluster.broker_config}},
            {
                "name": "podinfo",
                "downwardAPI": {
                    "items": [
                        {"path": "annotations", "fieldRef": {"fieldPath": "metadata.annotations"}}
                    ]
                },
            },
            {"name": "run", "emptyDir": {}},
            {"name": "tmp", "emptyDir": {}},
        ],
    }
    if spec.secured:
        secret = security.broker_certs_secret(cluster.name)
        pod_spec["volumes"].append(
            {"name": "tls", "secret": {"secretName": secret, "defaultMode": 0o400}}
        )
    _apply_pod_template(cluster, pod_meta, pod_spec)
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": cluster.meta(cluster.broker_sts, component),
        "spec": {
            "serviceName": cluster.broker_headless,
            "replicas": cluster.broker_count,
            "podManagementPolicy": "Parallel",
            # Pods are restarted by the operator, one at a time, never by the controller.
            "updateStrategy": {"type": "OnDelete"},
            "selector": {"matchLabels": cluster.selector(component)},
            "persistentVolumeClaimRetentionPolicy": _retention(spec.brokers.storage),
            "template": {"metadata": pod_meta, "spec": pod_spec},
            "volumeClaimTemplates": [_pvc_template("data", spec.brokers.storage)],
        },
    }


def broker_configmap(cluster: Cluster) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": cluster.meta(cluster.broker_config, "kafka"),
        "data": broker_configs(cluster),
    }


def broker_children(cluster: Cluster) -> list[Obj]:
    c = "kafka"
    port = cluster.internal_port
    kafka_port: list[Obj] = []
    if cluster.spec.listeners.plain:
        kafka_port.append({"name": "kafka", "port": port, "targetPort": "kafka"})
    kafka_port += [{"name": n, "port": p, "targetPort": n} for n, p in listener_ports(cluster)]
    headless_ports = [*kafka_port, {"name": "http", "port": HTTP_PORT, "targetPort": "http"}]
    children = [
        broker_configmap(cluster),
        broker_statefulset(cluster),
        _service(cluster, cluster.broker_headless, c, headless_ports, headless=True),
        _service(cluster, cluster.bootstrap, c, kafka_port),
        _pdb(cluster, cluster.broker_sts, c, cluster.spec.brokers.pod_disruption_budget),
    ]
    children += external_services(cluster)
    if cluster.network_policy:
        children.append(network_policy(cluster))
    return children


def network_policy(cluster: Cluster) -> Obj:
    """Only the brokers' ports are open; the replication listener only to the brokers and
    the operator."""
    open_ports = [cluster.internal_port] if cluster.spec.listeners.plain else []
    open_ports.append(HTTP_PORT)
    if cluster.spec.listeners.external is not None:
        open_ports.append(external_container_port(cluster))
    open_ports += [p for n, p in listener_ports(cluster) if n != "replication"]
    rules: list[Obj] = [{"ports": [{"protocol": "TCP", "port": p} for p in open_ports]}]
    if cluster.spec.secured:
        rules.append(
            {
                "ports": [{"protocol": "TCP", "port": REPLICATION_PORT}],
                "from": [
                    {"podSelector": {"matchLabels": cluster.selector("kafka")}},
                    {
                        "namespaceSelector": {},
                        "podSelector": {
                            "matchLabels": {"app.kubernetes.io/name": "samsa-operator"}
                        },
                    },
                ],
            }
        )
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": cluster.meta(cluster.broker_sts, "kafka"),
        "spec": {
            "podSelector": {"matchLabels": cluster.selector("kafka")},
            "policyTypes": ["Ingress"],
            "ingress": rules,
        },
    }


def pki_secrets(cluster: Cluster, pki: security.Pki) -> list[Obj]:
    """The Secrets of a secured cluster's PKI (data as `security.secret_data` says)."""
    return [
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": cluster.meta(name, "pki"),
            "type": "Opaque",
            "data": security.encode(data),
        }
        for name, data in security.secret_data(cluster, pki).items()
    ]


def external_services(cluster: Cluster) -> list[Obj]:
    """Per external listener: a Service of its type per broker, and for LoadBalancers one
    for bootstrapping."""
    c = "kafka"
    out = []
    for exposure in cluster.exposures:
        ext, target = exposure.spec, exposure.name
        for i in range(cluster.broker_count):
            address = ext.address(i)
            port: Obj = {"name": target, "port": address[1], "targetPort": target}
            if ext.type == "NodePort":
                port["nodePort"] = address[1]
            selector = {
                **cluster.selector(c),
                "statefulset.kubernetes.io/pod-name": cluster.broker_pod(i),
            }
            svc = _service(
                cluster,
                cluster.exposure_service(exposure.name, i),
                c,
                [port],
                selector=selector,
                service_type=ext.type,
            )
            if ext.type == "LoadBalancer":
                # The balancer sends only to the node that runs the broker (its health check
                # says which), and the broker sees the client's address.
                svc["spec"]["externalTrafficPolicy"] = "Local"
            # A NodePort keeps the default, Cluster: every node forwards the port to the
            # broker, wherever its pod runs. The advertised host is fixed before the pod is
            # scheduled; with Local, only the broker's own node would answer, and a client
            # told another node's address would never connect.
            out.append(svc)
        if ext.type == "LoadBalancer":  # with NodePorts, any broker's address bootstraps
            bootstrap_port: Obj = {"name": target, "port": ext.port, "targetPort": target}
            out.append(
                _service(
                    cluster,
                    cluster.exposure_bootstrap(exposure.name),
                    c,
                    [bootstrap_port],
                    service_type=ext.type,
                )
            )
    return out


def children(cluster: Cluster) -> list[Obj]:
    """Every object the operator keeps in line with the KafkaCluster."""
    return zookeeper_children(cluster) + broker_children(cluster)


def key(obj: Obj) -> tuple[str, str, str]:
    return (obj["apiVersion"], obj["kind"], obj["metadata"]["name"])
