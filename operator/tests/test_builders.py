"""The pure builders: every child, for several specs, is valid Kubernetes (1.29 to 1.34,
strict) and says what the operator promises."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
from op_support import EXAMPLES, K8S_VERSIONS, load_yaml_documents

from samsa.config import KafkaConfig
from samsa_operator import models, resources
from samsa_operator.resources import Cluster


def example_spec(name: str) -> dict[str, Any]:
    [doc] = load_yaml_documents(EXAMPLES / name)
    return dict(doc["spec"])


SPECS: dict[str, dict[str, Any]] = {
    "defaults": {},
    "minimal-example": example_spec("kafkacluster-minimal.yaml"),
    "production-example": example_spec("kafkacluster-production.yaml"),
    "nodeport": {
        "brokers": {"replicas": 2},
        "listeners": {
            "internalPort": 19092,
            "external": {
                "type": "NodePort",
                "nodePortBase": 31000,
                "advertisedHostTemplate": "node-{id}.example.com",
            },
        },
    },
    "external-zookeeper": {
        "brokers": {"replicas": 1, "storage": {"deleteClaim": True, "storageClass": "std"}},
        "zookeeper": {"connect": "zk-0:2181,zk-1:2181/kafka"},
        "metrics": {"enabled": False},
        "config": {"auto.create.topics.enable": False, "num.partitions": 6},
    },
}

# (kind, name) of every child, per spec.
EXPECTED: dict[str, set[tuple[str, str]]] = {}
_BASE = {
    ("ConfigMap", "c-kafka-config"),
    ("StatefulSet", "c-kafka"),
    ("Service", "c-kafka-brokers"),
    ("Service", "c-kafka-bootstrap"),
    ("PodDisruptionBudget", "c-kafka"),
}
_ZK = {
    ("StatefulSet", "c-zookeeper"),
    ("Service", "c-zookeeper-nodes"),
    ("Service", "c-zookeeper-client"),
    ("PodDisruptionBudget", "c-zookeeper"),
}
EXPECTED["defaults"] = _BASE | _ZK
EXPECTED["minimal-example"] = _BASE | _ZK
EXPECTED["production-example"] = (
    _BASE
    | _ZK
    | {("Service", f"c-kafka-external-{i}") for i in range(5)}
    | {("Service", "c-kafka-external-bootstrap")}
)
EXPECTED["nodeport"] = _BASE | _ZK | {("Service", f"c-kafka-external-{i}") for i in range(2)}
EXPECTED["external-zookeeper"] = _BASE


def cluster(spec: str | dict[str, Any], name: str = "c") -> Cluster:
    raw = SPECS[spec] if isinstance(spec, str) else spec
    return Cluster(name, "ns1", "uid-1", models.KafkaClusterSpec.model_validate(raw))


def child(c: Cluster, kind: str, name: str) -> dict[str, Any]:
    [found] = [
        o for o in resources.children(c) if (o["kind"], o["metadata"]["name"]) == (kind, name)
    ]
    return found


@pytest.mark.parametrize("version", K8S_VERSIONS)
@pytest.mark.parametrize("spec", SPECS)
def test_every_child_is_valid_kubernetes(spec: str, version: str) -> None:
    for obj in resources.children(cluster(spec)):
        kubernetes_validate.validate(obj, version, strict=True)


@pytest.mark.parametrize("spec", SPECS)
def test_children_and_their_owner(spec: str) -> None:
    objs = resources.children(cluster(spec))
    assert {(o["kind"], o["metadata"]["name"]) for o in objs} == EXPECTED[spec]
    for obj in objs:
        meta = obj["metadata"]
        assert meta["namespace"] == "ns1"
        assert meta["ownerReferences"] == [
            {
                "apiVersion": "kafka.samsa.dev/v1alpha1",
                "kind": "KafkaCluster",
                "name": "c",
                "uid": "uid-1",
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ]
        assert meta["labels"]["app.kubernetes.io/managed-by"] == "samsa-operator"


@pytest.mark.parametrize("spec", SPECS)
def test_broker_statefulset(spec: str) -> None:
    c = cluster(spec)
    sts = child(c, "StatefulSet", "c-kafka")["spec"]
    pod = sts["template"]["spec"]
    [broker] = pod["containers"]
    assert sts["updateStrategy"] == {"type": "OnDelete"}
    assert sts["replicas"] == c.spec.brokers.replicas
    assert sts["serviceName"] == "c-kafka-brokers"
    [claim] = sts["volumeClaimTemplates"]
    assert claim["spec"]["resources"]["requests"]["storage"] == c.spec.brokers.storage.size
    assert claim["spec"].get("storageClassName") == c.spec.brokers.storage.storage_class
    policy = "Delete" if c.spec.brokers.storage.delete_claim else "Retain"
    assert sts["persistentVolumeClaimRetentionPolicy"]["whenDeleted"] == policy
    assert broker["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert broker["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert "kill -TERM 1" in broker["lifecycle"]["preStop"]["exec"]["command"][-1]
    assert pod["terminationGracePeriodSeconds"] >= 60
    assert pod["securityContext"]["runAsNonRoot"] is True
    for container in pod["containers"] + pod["initContainers"]:
        assert container["securityContext"]["readOnlyRootFilesystem"] is True
        assert container["securityContext"]["allowPrivilegeEscalation"] is False
    mounts = {m["mountPath"] for m in broker["volumeMounts"]}
    assert {"/var/lib/samsa", "/tmp", "/var/run/samsa"} <= mounts
    assert broker["args"] == [
        "--data-dir",
        "/var/lib/samsa/data",
        "--config",
        "/var/run/samsa/server.properties",
    ]
    scrape = pod_meta_annotations(sts).get("prometheus.io/scrape")
    assert scrape == ("true" if c.spec.metrics.enabled else None)


def pod_meta_annotations(sts: dict[str, Any]) -> dict[str, str]:
    return dict(sts["template"]["metadata"].get("annotations", {}))


def test_pod_template_overrides() -> None:
    c = cluster("production-example", name="c")
    tpl = child(c, "StatefulSet", "c-kafka")["spec"]["template"]
    assert tpl["metadata"]["labels"]["team"] == "data-platform"
    assert tpl["metadata"]["labels"]["app.kubernetes.io/component"] == "kafka"
    assert tpl["metadata"]["annotations"]["example.com/owner"] == "data-platform"
    assert tpl["spec"]["priorityClassName"] == "high-priority"
    assert tpl["spec"]["tolerations"][0]["key"] == "dedicated"
    assert "podAntiAffinity" in tpl["spec"]["affinity"]
    assert tpl["spec"]["nodeSelector"] == {"kubernetes.io/os": "linux"}
    [spread] = tpl["spec"]["topologySpreadConstraints"]
    assert spread["topologyKey"] == "topology.kubernetes.io/zone"
    assert tpl["spec"]["imagePullSecrets"] == [{"name": "registry-credentials"}]
    zookeeper = child(c, "StatefulSet", "c-zookeeper")["spec"]["template"]["spec"]
    assert zookeeper["imagePullSecrets"] == [{"name": "registry-credentials"}]
    [broker] = tpl["spec"]["containers"]
    assert broker["resources"] == {
        "requests": {"cpu": "2", "memory": "4Gi"},
        "limits": {"memory": "4Gi"},
    }
    overridden = cluster({"podTemplate": {"securityContext": {"runAsUser": 2000}}})
    pod = child(overridden, "StatefulSet", "c-kafka")["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsUser"] == 2000
    assert pod["securityContext"]["runAsNonRoot"] is True


@pytest.mark.parametrize("spec", SPECS)
def test_disruption_budgets_allow_one(spec: str) -> None:
    for obj in resources.children(cluster(spec)):
        if obj["kind"] == "PodDisruptionBudget":
            assert obj["spec"]["maxUnavailable"] == 1


def test_disruption_budgets_follow_the_spec() -> None:
    c = cluster(
        {
            "brokers": {"podDisruptionBudget": {"maxUnavailable": 0}},
            "zookeeper": {"podDisruptionBudget": {"maxUnavailable": 2}},
        }
    )
    assert child(c, "PodDisruptionBudget", "c-kafka")["spec"]["maxUnavailable"] == 0
    assert child(c, "PodDisruptionBudget", "c-zookeeper")["spec"]["maxUnavailable"] == 2
    with pytest.raises(models.SpecError, match="maxUnavailable"):
        models.parse_spec(
            models.KafkaClusterSpec, {"brokers": {"podDisruptionBudget": {"maxUnavailable": -1}}}
        )


def properties(c: Cluster, broker_id: int) -> dict[str, str]:
    text = child(c, "ConfigMap", "c-kafka-config")["data"][f"broker-{broker_id}.properties"]
    lines = [line for line in text.splitlines() if line and not line.startswith("#")]
    return dict(line.split("=", 1) for line in lines)


def test_broker_properties_the_kafka_way() -> None:
    c = cluster("defaults")
    for broker_id in range(3):
        props = properties(c, broker_id)
        assert props["broker.id"] == str(broker_id)
        # Bound to and advertised from the pod's IP, which the init container fills in.
        assert props["listeners"] == "PLAINTEXT://$(POD_IP):9092"
        assert props["advertised.listeners"] == "PLAINTEXT://$(POD_IP):9092"
        assert props["http.listener"] == "$(POD_IP):9644"
        assert props["zookeeper.connect"] == "c-zookeeper-client.ns1.svc:2181"
        assert "broker.rack" not in props  # added at pod start from the node's label
    ext = cluster("external-zookeeper")
    props = properties(ext, 0)
    assert props["zookeeper.connect"] == "zk-0:2181,zk-1:2181/kafka"
    assert props["auto.create.topics.enable"] == "false"
    assert props["num.partitions"] == "6"
    nodeport = properties(cluster("nodeport"), 1)
    assert nodeport["listeners"] == "INTERNAL://$(POD_IP):19092,EXTERNAL://$(POD_IP):19094"
    assert nodeport["advertised.listeners"] == (
        "INTERNAL://$(POD_IP):19092,EXTERNAL://node-1.example.com:31001"
    )
    assert nodeport["inter.broker.listener.name"] == "INTERNAL"


@pytest.mark.parametrize("spec", ["defaults", "external-zookeeper"])
def test_broker_properties_pass_the_brokers_own_validation(spec: str) -> None:
    c = cluster(spec)
    for broker_id in range(c.spec.brokers.replicas):
        started = {
            k: v.replace("$(POD_IP)", "10.0.0.7") for k, v in properties(c, broker_id).items()
        }
        config = KafkaConfig(started)
        assert config.broker_id == broker_id


def test_config_hash_is_per_broker_and_out_of_the_pod_template() -> None:
    three = cluster({"brokers": {"replicas": 3}})
    four = cluster({"brokers": {"replicas": 4}})
    tuned = cluster({"brokers": {"replicas": 3}, "config": {"log.retention.hours": 24}})
    h3, h4, ht = (resources.broker_config_hashes(c) for c in (three, four, tuned))
    assert {b: h4[b] for b in h3} == h3  # adding a broker changes no other broker's hash
    assert all(ht[b] != h3[b] for b in h3)  # a shared key changes every broker's hash
    assert len(set(h3.values())) == 3
    # The pod template does not change with the config: nothing rolls by itself.
    sts = [child(c, "StatefulSet", "c-kafka")["spec"]["template"] for c in (three, tuned)]
    assert sts[0] == sts[1]


def test_zookeeper_ensemble() -> None:
    c = cluster("defaults")
    sts = child(c, "StatefulSet", "c-zookeeper")["spec"]
    env = {e["name"]: e["value"] for e in sts["template"]["spec"]["containers"][0]["env"]}
    assert env["ZOO_SERVERS"].split() == [
        f"server.{i + 1}=c-zookeeper-{i}.c-zookeeper-nodes.ns1.svc:2888:3888;2181" for i in range(3)
    ]
    assert sts["replicas"] == 3
    assert sts["updateStrategy"] == {"type": "OnDelete"}
    [claim] = sts["volumeClaimTemplates"]
    assert claim["spec"]["resources"]["requests"]["storage"] == "5Gi"
    client = child(c, "Service", "c-zookeeper-client")["spec"]
    assert client["ports"][0]["port"] == 2181
    headless = child(c, "Service", "c-zookeeper-nodes")["spec"]
    assert headless["clusterIP"] == "None"


def test_external_services_reach_one_broker_each() -> None:
    c = cluster("nodeport")
    for broker_id in range(2):
        svc = child(c, "Service", f"c-kafka-external-{broker_id}")["spec"]
        assert svc["type"] == "NodePort"
        assert svc["ports"][0]["nodePort"] == 31000 + broker_id
        assert svc["selector"]["statefulset.kubernetes.io/pod-name"] == f"c-kafka-{broker_id}"
        # Every node forwards the port, not only the broker's: the advertised node need not
        # be the one its pod runs on.
        assert "externalTrafficPolicy" not in svc
    assert (
        c.external_bootstrap_servers(c.spec.listeners.external)
        == "node-0.example.com:31000,node-1.example.com:31001"
    )


def test_load_balancers_send_to_the_brokers_node_only() -> None:
    c = cluster("production-example")
    for broker_id in range(5):
        svc = child(c, "Service", f"c-kafka-external-{broker_id}")["spec"]
        assert svc["type"] == "LoadBalancer"
        assert svc["externalTrafficPolicy"] == "Local"


def run_compose(tmp_path: Path, rack: bool, annotations: str | None) -> subprocess.Popen[bytes]:
    """Run the broker pod's init container script, with its paths moved into tmp_path."""
    config, run, podinfo = (tmp_path / d for d in ("config", "run", "podinfo"))
    for d in (config, run, podinfo):
        d.mkdir(exist_ok=True)
    (config / "broker-2.properties").write_text(
        "broker.id=2\nlisteners=PLAINTEXT://$(POD_IP):9092\n"
    )
    if annotations is not None:
        (podinfo / "annotations").write_text(annotations)
    else:
        (podinfo / "annotations").write_text('other="x"\n')
    script = (
        resources._COMPOSE_CONFIG.replace(resources.CONFIG_DIR, str(config))
        .replace(resources.RUN_DIR, str(run))
        .replace(resources.PODINFO_DIR, str(podinfo))
        .replace("sleep 2", "sleep 0.05")
    )
    env = {
        "HOSTNAME": "c-kafka-2",
        "RACK_ENABLED": "true" if rack else "false",
        "POD_IP": "10.1.2.3",
        "PATH": "/usr/bin:/bin",
    }
    return subprocess.Popen(["sh", "-c", script], env=env, stdout=subprocess.PIPE, text=True)


def test_init_container_composes_the_properties(tmp_path: Path) -> None:
    proc = run_compose(tmp_path, rack=False, annotations=None)
    assert proc.wait(10) == 0
    assert (tmp_path / "run" / "server.properties").read_text() == (
        "broker.id=2\nlisteners=PLAINTEXT://10.1.2.3:9092\n"
    )


def test_init_container_waits_for_the_rack(tmp_path: Path) -> None:
    proc = run_compose(tmp_path, rack=True, annotations=None)
    assert proc.stdout is not None
    assert proc.stdout.readline() == "waiting for the operator to record this pod's rack\n"
    assert proc.poll() is None
    assert not (tmp_path / "run" / "server.properties").read_text().count("broker.rack")
    (tmp_path / "podinfo" / "annotations").write_text(
        f'other="x"\n{resources.RACK_ANNOTATION}="eu-west-1a"\n'
    )
    assert proc.wait(10) == 0
    text = (tmp_path / "run" / "server.properties").read_text()
    assert text == "broker.id=2\nlisteners=PLAINTEXT://10.1.2.3:9092\nbroker.rack=eu-west-1a\n"
