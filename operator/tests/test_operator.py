"""The real operator (`python -m samsa_operator`, as its image runs it) against the API
stand-in, driven by a real kubectl; Topics are reconciled on a real Samsa broker process."""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from confluent_kafka import TopicCollection
from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType
from kube_stand import KubeStand
from op_support import (
    EXAMPLES,
    BrokerProcess,
    Kubectl,
    OperatorProcess,
    eventually,
    helm_template,
    rbac_gaps,
    verbs_used,
)

from samsa_operator import reconcile

Start = Callable[..., Awaitable[OperatorProcess]]
QUIET = logging.getLogger("test-admin")  # librdkafka's reconnect chatter after the broker stops

CHILDREN = [
    ("statefulset", "demo-zookeeper"),
    ("service", "demo-zookeeper-nodes"),
    ("service", "demo-zookeeper-client"),
    ("poddisruptionbudget", "demo-zookeeper"),
    ("configmap", "demo-kafka-config"),
    ("statefulset", "demo-kafka"),
    ("service", "demo-kafka-brokers"),
    ("service", "demo-kafka-bootstrap"),
    ("poddisruptionbudget", "demo-kafka"),
]


def ready(obj: dict[str, Any] | None) -> dict[str, Any] | None:
    for c in ((obj or {}).get("status") or {}).get("conditions", []):
        if c["type"] == "Ready":
            return dict(c)
    return None


async def apply(kubectl: Kubectl, text: str) -> None:
    await kubectl("apply", "--validate=false", "-f", "-", stdin=text)


async def merge(kubectl: Kubectl, kind: str, name: str, patch: dict[str, Any]) -> None:
    await kubectl("patch", kind, name, "--type=merge", "-p", json.dumps(patch))


async def test_examples_create_every_child_with_owner_references(
    kubectl: Kubectl, operator: Start
) -> None:
    await operator()
    await kubectl("apply", "--validate=false", "-f", str(EXAMPLES))
    for name in ("demo", "prod"):
        cluster = await eventually(
            lambda name=name: kubectl.maybe_get("kc", name), what=f"kc {name}"
        )
        uid = cluster["metadata"]["uid"]
        wanted = {(kind, obj.replace("demo", name)) for kind, obj in CHILDREN}
        if name == "prod":
            wanted |= {("service", f"prod-kafka-external-{i}") for i in range(5)}
            wanted |= {("service", "prod-kafka-external-bootstrap")}

        async def children(wanted: set[tuple[str, str]] = wanted) -> list[Any] | None:
            found = await kubectl.get("statefulsets,services,configmaps,poddisruptionbudgets")
            items = {(i["kind"].lower(), i["metadata"]["name"]): i for i in found["items"]}
            return [items[w] for w in wanted] if wanted <= set(items) else None

        for child in await eventually(children, what=f"the children of {name}"):
            [owner] = child["metadata"]["ownerReferences"]
            assert (owner["kind"], owner["name"], owner["uid"]) == ("KafkaCluster", name, uid)
            assert owner["controller"] is True

    async def status_written() -> Any:
        return (await kubectl.get("kc", "demo")).get("status", {}).get("observedGeneration")

    await eventually(status_written, what="demo's status")
    status = (await kubectl.get("kc", "demo"))["status"]
    assert status["bootstrapServers"]["internal"] == "demo-kafka-bootstrap.default.svc:9092"
    assert [b["pod"] for b in status["brokers"]] == [f"demo-kafka-{i}" for i in range(3)]
    # No kubelet here: nothing runs, and the condition says what is missing.
    cond = ready(await kubectl.get("kc", "demo"))
    assert cond is not None and (cond["status"], cond["reason"]) == ("False", "ZooKeeperNotReady")
    bootstrap = await eventually(lambda: _external_bootstrap(kubectl), what="prod's status")
    assert bootstrap["external"].split(",")[0] == "broker-0.kafka.example.com:9094"


async def _external_bootstrap(kubectl: Kubectl) -> Any:
    return ((await kubectl.get("kc", "prod")).get("status") or {}).get("bootstrapServers")


MINIMAL = (EXAMPLES / "kafkacluster-minimal.yaml").read_text()


async def test_spec_changes_propagate_and_edits_are_reverted(
    kubectl: Kubectl, operator: Start, stand: KubeStand, helm: str
) -> None:
    await operator()
    await apply(kubectl, MINIMAL)
    await eventually(lambda: kubectl.maybe_get("sts", "demo-kafka"), what="broker sts")

    await merge(kubectl, "kc", "demo", {"spec": {"brokers": {"replicas": 4}}})

    async def scaled() -> bool:
        sts = await kubectl.get("sts", "demo-kafka")
        cm = await kubectl.get("cm", "demo-kafka-config")
        return sts["spec"]["replicas"] == 4 and "broker-3.properties" in cm["data"]

    await eventually(scaled, what="4 brokers in the StatefulSet and the ConfigMap")

    await merge(kubectl, "kc", "demo", {"spec": {"config": {"min.insync.replicas": 2}}})

    async def configured() -> bool:
        cm = await kubectl.get("cm", "demo-kafka-config")
        return all("min.insync.replicas=2\n" in v for v in cm["data"].values())

    await eventually(configured, what="min.insync.replicas in every broker's properties")

    # A user's edits of children are reverted by the next resync.
    await merge(kubectl, "sts", "demo-kafka", {"spec": {"replicas": 1}})
    await merge(kubectl, "cm", "demo-kafka-config", {"data": {"broker-0.properties": "x=1"}})
    await merge(kubectl, "svc", "demo-kafka-bootstrap", {"spec": {"ports": [{"port": 1}]}})

    async def reverted() -> bool:
        sts = await kubectl.get("sts", "demo-kafka")
        cm = await kubectl.get("cm", "demo-kafka-config")
        svc = await kubectl.get("svc", "demo-kafka-bootstrap")
        return (
            sts["spec"]["replicas"] == 4
            and "broker.id=0" in cm["data"]["broker-0.properties"]
            and svc["spec"]["ports"][0]["port"] == 9092
        )

    await eventually(reverted, what="the edits reverted")

    # A child the spec no longer wants goes: an external ZooKeeper replaces the deployed one.
    await merge(kubectl, "kc", "demo", {"spec": {"zookeeper": {"connect": "zk.example:2181"}}})

    async def zookeeper_gone() -> bool:
        return await kubectl.maybe_get("sts", "demo-zookeeper") is None

    await eventually(zookeeper_gone, what="the ZooKeeper StatefulSet deleted")
    cm = await kubectl.get("cm", "demo-kafka-config")
    assert "zookeeper.connect=zk.example:2181" in cm["data"]["broker-0.properties"]
    assert_rbac_suffices(stand, helm)


def assert_rbac_suffices(stand: KubeStand, helm: str) -> None:
    """Every request the operator made is granted by the chart's ClusterRole."""
    [role] = [d for d in helm_template(helm) if d["kind"] == "ClusterRole"]
    used = verbs_used(stand)
    assert ("apps", "statefulsets", "create") in used
    assert rbac_gaps(used, role["rules"]) == set()


async def test_invalid_spec_gets_a_condition_and_touches_nothing(
    kubectl: Kubectl, operator: Start
) -> None:
    await operator()
    await apply(kubectl, MINIMAL)
    await eventually(lambda: _ready_reason(kubectl, "kc", "demo"), what="a first status")
    sts = await kubectl.get("sts", "demo-kafka")

    cases = [
        ({"config": {"broker.id": 7}}, "spec.config: broker.id is set by the operator"),
        ({"brokers": {"replicas": -1}}, "spec.brokers.replicas"),
        ({"brokers": {"storage": {"size": "lots"}}}, "spec.brokers.storage.size"),
        ({"brokers": {"replica": 3}}, "spec.brokers.replica: unknown field"),
    ]
    for patch, message in cases:
        await apply(
            kubectl,
            MINIMAL.replace("spec:\n  brokers:\n    replicas: 3", "spec: " + json.dumps(patch)),
        )

        async def refused(message: str = message) -> bool:
            cond = ready(await kubectl.get("kc", "demo"))
            return bool(cond and cond["reason"] == "InvalidSpec" and message in cond["message"])

        await eventually(refused, what=f"Ready=False naming {message}")
        after = await kubectl.get("sts", "demo-kafka")
        assert after["metadata"]["resourceVersion"] == sts["metadata"]["resourceVersion"]

    await apply(kubectl, MINIMAL)
    await eventually(
        lambda: _reason_is(kubectl, "kc", "demo", "ZooKeeperNotReady"), what="valid again"
    )


async def _ready_reason(kubectl: Kubectl, kind: str, name: str) -> str | None:
    cond = ready(await kubectl.get(kind, name))
    return cond["reason"] if cond else None


async def _reason_is(kubectl: Kubectl, kind: str, name: str, reason: str) -> bool:
    return await _ready_reason(kubectl, kind, name) == reason


async def test_deleting_a_cluster_completes(kubectl: Kubectl, operator: Start) -> None:
    await operator()
    await apply(kubectl, MINIMAL)

    async def finalized() -> bool:
        kc = await kubectl.get("kc", "demo")
        return "kafka.samsa.dev/finalizer" in kc["metadata"].get("finalizers", [])

    await eventually(finalized, what="the finalizer")
    await kubectl("delete", "kc", "demo", "--timeout=60s")
    assert await kubectl.maybe_get("kc", "demo") is None


async def test_racks_come_from_the_nodes(kubectl: Kubectl, operator: Start) -> None:
    await operator()
    await apply(
        kubectl,
        MINIMAL.replace("replicas: 3", "replicas: 1\n  rack:\n    topologyKey: example.com/zone"),
    )
    await eventually(lambda: kubectl.maybe_get("sts", "demo-kafka"), what="broker sts")
    # Play the scheduler: a node with a zone, and the broker pod placed on it.
    await apply(
        kubectl,
        """
apiVersion: v1
kind: Node
metadata: {name: node-a, labels: {example.com/zone: zone-a}}
---
apiVersion: v1
kind: Pod
metadata:
  name: demo-kafka-0
  labels: {app.kubernetes.io/instance: demo, app.kubernetes.io/component: kafka}
spec:
  nodeName: node-a
  containers: [{name: broker, image: samsa}]
""",
    )

    async def racked() -> Any:
        status = (await kubectl.get("kc", "demo")).get("status") or {}
        return [b.get("rack") for b in status.get("brokers", [])] == ["zone-a"]

    await eventually(racked, what="broker 0 in zone-a")
    pod = await kubectl.get("pod", "demo-kafka-0")
    assert pod["metadata"]["annotations"]["kafka.samsa.dev/rack"] == "zone-a"

    # Play the kubelet and the StatefulSet controller: everything ready, so is the cluster.
    ready_pod = {"status": {"conditions": [{"type": "Ready", "status": "True"}]}}
    zk_ready = {"status": {"replicas": 3, "readyReplicas": 3}}
    for kind, name, patch in (
        ("pod", "demo-kafka-0", ready_pod),
        ("sts", "demo-zookeeper", zk_ready),
    ):
        await kubectl(
            "patch", kind, name, "--subresource=status", "--type=merge", "-p", json.dumps(patch)
        )
    await kubectl("wait", "--for=condition=Ready", "kc/demo", "--timeout=60s")
    status = (await kubectl.get("kc", "demo"))["status"]
    assert status["readyBrokers"] == 1 and status["zookeeper"]["ready"] is True


def cluster_on(broker: BrokerProcess) -> str:
    return f"""
apiVersion: kafka.samsa.dev/v1alpha1
kind: KafkaCluster
metadata:
  name: local
  annotations:
    kafka.samsa.dev/bootstrap-servers: "{broker.bootstrap}"
spec:
  brokers:
    replicas: 1
"""


def topic(partitions: int, rf: int = 1, config: str = "retention.ms: 3600000") -> str:
    return f"""
apiVersion: kafka.samsa.dev/v1alpha1
kind: Topic
metadata:
  name: clicks
spec:
  clusterRef: local
  topicName: web.clicks
  partitions: {partitions}
  replicationFactor: {rf}
  config:
    {config}
"""


def describe(admin: AdminClient, name: str) -> tuple[dict[int, list[int]], str, dict[str, str]]:
    desc = admin.describe_topics(TopicCollection([name]))[name].result(10)
    resource = ConfigResource(ResourceType.TOPIC, name)
    configs = admin.describe_configs([resource])[resource].result(10)
    return (
        {p.id: [r.id for r in p.replicas] for p in desc.partitions},
        str(desc.topic_id),
        {k: v.value for k, v in configs.items()},
    )


async def test_topic_is_created_with_the_operators_assignment_and_grown(
    kubectl: Kubectl, operator: Start, broker_process: BrokerProcess, stand: KubeStand, helm: str
) -> None:
    await operator()
    admin = AdminClient({"bootstrap.servers": broker_process.bootstrap, "logger": QUIET})
    await apply(kubectl, cluster_on(broker_process))
    await apply(kubectl, topic(3))
    await kubectl("wait", "--for=condition=Ready", "kt/clicks", "--timeout=60s")

    # The cluster's status comes from the broker itself, over DescribeCluster.
    async def described() -> Any:
        status = (await kubectl.get("kc", "local")).get("status") or {}
        return status if status.get("clusterId") else None

    assert (await eventually(described, what="the cluster id"))["controllerId"] == 0

    assignment, topic_id, configs = describe(admin, "web.clicks")
    brokers = [reconcile.Broker(0)]
    assert assignment == reconcile.assign(brokers, 3, 1)
    assert configs["retention.ms"] == "3600000"
    status = (await kubectl.get("kt", "clicks"))["status"]
    assert (status["topicId"], status["partitions"], status["replicationFactor"]) == (
        topic_id,
        3,
        1,
    )

    await apply(kubectl, topic(5, config="retention.ms: 7200000"))

    async def grown() -> bool:
        status = (await kubectl.get("kt", "clicks")).get("status") or {}
        return status.get("partitions") == 5 and status.get("observedGeneration") == 2

    await eventually(grown, what="5 partitions")
    assignment, _, configs = describe(admin, "web.clicks")
    first = {p: r for p, r in assignment.items() if p < 3}
    assert assignment == {**first, **reconcile.assign(brokers, 2, 1, existing=first)}
    assert configs["retention.ms"] == "7200000"

    # Partitions never shrink; a replication factor above the brokers: both refused.
    await apply(kubectl, topic(2))
    await eventually(
        lambda: _reason_is(kubectl, "kt", "clicks", "PartitionDecrease"), what="refusal"
    )
    await apply(kubectl, topic(5, rf=2))
    await eventually(
        lambda: _reason_is(kubectl, "kt", "clicks", "ReplicationFactorTooLarge"), what="refusal"
    )
    assert len(describe(admin, "web.clicks")[0]) == 5

    await kubectl("delete", "kt", "clicks", "--timeout=60s")
    assert "web.clicks" not in admin.list_topics(timeout=10).topics
    assert_rbac_suffices(stand, helm)


async def test_topic_replication_factor_above_the_brokers_is_refused(
    kubectl: Kubectl, operator: Start, broker_process: BrokerProcess
) -> None:
    await operator()
    await apply(kubectl, cluster_on(broker_process))
    await apply(kubectl, topic(3, rf=3))
    cond = await eventually(
        lambda: _condition_if(kubectl, "ReplicationFactorTooLarge"), what="refusal"
    )
    assert "spec.replicationFactor 3 exceeds the 1 brokers" in cond["message"]
    admin = AdminClient({"bootstrap.servers": broker_process.bootstrap, "logger": QUIET})
    assert "web.clicks" not in admin.list_topics(timeout=10).topics


async def _condition_if(kubectl: Kubectl, reason: str) -> dict[str, Any] | None:
    cond = ready(await kubectl.get("kt", "clicks"))
    return cond if cond and cond["reason"] == reason else None


async def test_topic_finalizer_lets_go_when_the_cluster_is_gone(
    kubectl: Kubectl, operator: Start
) -> None:
    await operator()
    await apply(kubectl, topic(1).replace("clusterRef: local", "clusterRef: nowhere"))
    await eventually(
        lambda: _reason_is(kubectl, "kt", "clicks", "ClusterNotFound"), what="ClusterNotFound"
    )
    await kubectl("delete", "kt", "clicks", "--timeout=60s")
    assert await kubectl.maybe_get("kt", "clicks") is None
