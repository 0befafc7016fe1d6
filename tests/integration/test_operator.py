"""The real operator, installed by its chart, on the real control plane: its children and
their owner references, spec changes and reverted edits, racks from the real Nodes' zones,
deletion, and Topics reconciled on a real Samsa broker process. The node agent runs only the
operator's pod here (the cluster's pods stay Pending): these tests are about the objects."""

from __future__ import annotations

import contextlib
import json
import logging
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import TopicCollection
from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType
from kube_support import CHART, EXAMPLES, OPERATOR_ENV, condition

from samsa.local_cluster.ports import free_port
from samsa_dev.kube.harness import KubeNamespace, eventually
from samsa_operator import reconcile

QUIET = logging.getLogger("test-admin")  # librdkafka's reconnect chatter after the broker stops
MINIMAL = (EXAMPLES / "kafkacluster-minimal.yaml").read_text()
PAUSE = "kafka.samsa.dev/pause-reconciliation"

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


async def operator(kube: KubeNamespace) -> None:
    kube.run_only_the_operator()
    await kube.install_operator(CHART, **OPERATOR_ENV)


async def apply(kube: KubeNamespace, text: str) -> None:
    await kube.kubectl("apply", "-f", "-", stdin=text)


async def merge(kube: KubeNamespace, kind: str, name: str, patch: dict[str, Any]) -> None:
    await kube.kubectl("patch", kind, name, "--type=merge", "-p", json.dumps(patch))


async def reason(kube: KubeNamespace, kind: str, name: str) -> str | None:
    return condition(await kube.maybe_get(kind, name)).get("reason")


async def test_examples_create_every_child_with_owner_references(kube: KubeNamespace) -> None:
    await operator(kube)
    for example in ("kafkacluster-minimal.yaml", "kafkacluster-production.yaml"):
        await kube.kubectl("apply", "-f", str(EXAMPLES / example))
    for name in ("demo", "prod"):
        cluster = await eventually(lambda name=name: kube.maybe_get("kc", name), what=name)
        uid = cluster["metadata"]["uid"]
        wanted = {(kind, obj.replace("demo", name)) for kind, obj in CHILDREN}
        if name == "prod":
            wanted |= {("service", f"prod-kafka-external-{i}") for i in range(5)}
            wanted |= {("service", "prod-kafka-external-bootstrap")}

        async def children(wanted: set[tuple[str, str]] = wanted) -> list[Any] | None:
            found = await kube.get("statefulsets,services,configmaps,poddisruptionbudgets")
            items = {(i["kind"].lower(), i["metadata"]["name"]): i for i in found["items"]}
            return [items[w] for w in wanted] if wanted <= set(items) else None

        for child in await eventually(children, what=f"the children of {name}"):
            [owner] = child["metadata"]["ownerReferences"]
            assert (owner["kind"], owner["name"], owner["uid"]) == ("KafkaCluster", name, uid)
            assert owner["controller"] is True

    async def status_written() -> Any:
        return ((await kube.get("kc", "demo")).get("status") or {}).get("observedGeneration")

    await eventually(status_written, what="demo's status")
    status = (await kube.get("kc", "demo"))["status"]
    assert status["bootstrapServers"]["internal"] == f"demo-kafka-bootstrap.{kube.name}.svc:9092"
    assert [b["pod"] for b in status["brokers"]] == [f"demo-kafka-{i}" for i in range(3)]
    # The StatefulSet controller made the pods, the scheduler placed them; none runs here,
    # and the condition says what is missing.
    cond = condition(await kube.get("kc", "demo"))
    assert (cond["status"], cond["reason"]) == ("False", "ZooKeeperNotReady")

    async def placed() -> bool:
        pods = (await kube.get("pods", "-l", "app.kubernetes.io/instance=demo"))["items"]
        return len(pods) == 6 and all(p["spec"].get("nodeName") for p in pods)

    # Placed once their claims are provisioned on the node picked (WaitForFirstConsumer).
    await eventually(placed, what="demo's 6 pods placed on nodes")
    bootstrap = await eventually(lambda: _external_bootstrap(kube), what="prod's status")
    assert bootstrap["external"].split(",")[0] == "broker-0.kafka.example.com:9094"


async def _external_bootstrap(kube: KubeNamespace) -> Any:
    return ((await kube.get("kc", "prod")).get("status") or {}).get("bootstrapServers")


async def test_spec_changes_propagate_and_edits_are_reverted(kube: KubeNamespace) -> None:
    await operator(kube)
    await apply(kube, MINIMAL)
    await eventually(lambda: kube.maybe_get("sts", "demo-kafka"), what="broker sts")

    await merge(kube, "kc", "demo", {"spec": {"brokers": {"replicas": 4}}})

    async def scaled() -> bool:
        sts = await kube.get("sts", "demo-kafka")
        cm = await kube.get("cm", "demo-kafka-config")
        return sts["spec"]["replicas"] == 4 and "broker-3.properties" in cm["data"]

    await eventually(scaled, what="4 brokers in the StatefulSet and the ConfigMap")

    await merge(kube, "kc", "demo", {"spec": {"config": {"min.insync.replicas": 2}}})

    async def configured() -> bool:
        cm = await kube.get("cm", "demo-kafka-config")
        return all("min.insync.replicas=2\n" in v for v in cm["data"].values())

    await eventually(configured, what="min.insync.replicas in every broker's properties")

    # A user's edits of children are reverted by the next resync.
    await merge(kube, "sts", "demo-kafka", {"spec": {"replicas": 1}})
    await merge(kube, "cm", "demo-kafka-config", {"data": {"broker-0.properties": "x=1"}})
    await merge(kube, "svc", "demo-kafka-bootstrap", {"spec": {"ports": [{"port": 1}]}})

    async def reverted() -> bool:
        sts = await kube.get("sts", "demo-kafka")
        cm = await kube.get("cm", "demo-kafka-config")
        svc = await kube.get("svc", "demo-kafka-bootstrap")
        return (
            sts["spec"]["replicas"] == 4
            and "broker.id=0" in cm["data"]["broker-0.properties"]
            and svc["spec"]["ports"][0]["port"] == 9092
        )

    await eventually(reverted, what="the edits reverted")

    # A child the spec no longer wants goes: an external ZooKeeper replaces the deployed one.
    await merge(kube, "kc", "demo", {"spec": {"zookeeper": {"connect": "zk.example:2181"}}})

    async def zookeeper_gone() -> bool:
        return await kube.maybe_get("sts", "demo-zookeeper") is None

    await eventually(zookeeper_gone, what="the ZooKeeper StatefulSet deleted")
    cm = await kube.get("cm", "demo-kafka-config")
    assert "zookeeper.connect=zk.example:2181" in cm["data"]["broker-0.properties"]


async def test_a_paused_cluster_is_left_alone_and_resumes_what_waited(
    kube: KubeNamespace,
) -> None:
    await operator(kube)
    await apply(kube, MINIMAL)
    await eventually(lambda: kube.maybe_get("sts", "demo-kafka"), what="broker sts")
    await merge(kube, "kc", "demo", {"metadata": {"annotations": {PAUSE: "true"}}})

    async def paused_at(generation: int) -> bool:
        cond = condition(await kube.get("kc", "demo"), "ReconciliationPaused")
        return cond.get("status") == "True" and cond.get("observedGeneration") == generation

    generation = (await kube.get("kc", "demo"))["metadata"]["generation"]
    await eventually(lambda: paused_at(generation), what="the ReconciliationPaused condition")
    # A hand edit, then a spec change: the operator sees the change (its condition names the
    # new generation), and the reconcile that would have carried it out, and reverted the
    # edit on the way, does neither.
    await merge(kube, "cm", "demo-kafka-config", {"data": {"broker-0.properties": "x=1"}})
    await merge(kube, "kc", "demo", {"spec": {"brokers": {"replicas": 4}}})
    await eventually(lambda: paused_at(generation + 1), what="the change seen while paused")
    sts = await kube.get("sts", "demo-kafka")
    cm = await kube.get("cm", "demo-kafka-config")
    assert sts["spec"]["replicas"] == 3
    assert cm["data"]["broker-0.properties"] == "x=1"

    await merge(kube, "kc", "demo", {"metadata": {"annotations": {PAUSE: None}}})

    async def resumed() -> bool:
        kc = await kube.get("kc", "demo")
        sts = await kube.get("sts", "demo-kafka")
        cm = await kube.get("cm", "demo-kafka-config")
        return (
            not condition(kc, "ReconciliationPaused")
            and sts["spec"]["replicas"] == 4
            and "broker.id=0" in cm["data"]["broker-0.properties"]
            and "broker-3.properties" in cm["data"]
        )

    await eventually(resumed, what="the change carried out and the edit reverted")


async def test_a_larger_storage_size_grows_every_claim_and_a_smaller_one_is_refused(
    kube: KubeNamespace,
) -> None:
    await operator(kube)
    await apply(kube, MINIMAL)
    claims = [f"data-demo-kafka-{i}" for i in range(3)] + [
        f"data-demo-zookeeper-{i}" for i in range(3)
    ]

    async def sizes() -> list[tuple[str, str]]:
        out = []
        for claim in claims:
            pvc = await kube.maybe_get("pvc", claim)
            status = (pvc or {}).get("status") or {}
            spec = (pvc or {}).get("spec") or {}
            out.append(
                (
                    spec.get("resources", {}).get("requests", {}).get("storage"),
                    (status.get("capacity") or {}).get("storage"),
                )
            )
        return out

    async def storage(reason: str) -> dict[str, Any] | None:
        kc = await kube.get("kc", "demo")
        return kc if condition(kc, "StorageResized").get("reason") == reason else None

    async def at(brokers: str, zookeeper: str) -> bool:
        return await sizes() == [(brokers, brokers)] * 3 + [(zookeeper, zookeeper)] * 3

    await eventually(lambda: at("10Gi", "5Gi"), what="every claim bound at its size")
    await merge(kube, "kc", "demo", {"spec": {"brokers": {"storage": {"size": "12Gi"}}}})
    await eventually(lambda: at("12Gi", "5Gi"), what="the brokers' claims grown to 12Gi")
    kc = await eventually(lambda: storage("Resized"), what="StorageResized")
    assert [c["phase"] for c in kc["status"]["storage"]["brokers"]] == ["Resized"] * 3
    assert kc["status"]["storage"]["brokers"][0]["capacity"] == "12Gi"
    # The StatefulSet's template cannot change, and stays as it was made.
    sts = await kube.get("sts", "demo-kafka")
    assert sts["spec"]["volumeClaimTemplates"][0]["spec"]["resources"]["requests"] == {
        "storage": "10Gi"
    }

    await merge(kube, "kc", "demo", {"spec": {"brokers": {"storage": {"size": "11Gi"}}}})
    kc = await eventually(lambda: storage("ShrinkRefused"), what="the shrink refused")
    assert condition(kc, "StorageResized")["status"] == "False"
    assert "data-demo-kafka-0" in condition(kc, "StorageResized")["message"]
    assert await at("12Gi", "5Gi")


async def test_racks_come_from_the_nodes_and_deleting_completes(kube: KubeNamespace) -> None:
    await operator(kube)
    # Each Node is in a zone of its own; the scheduler places the pods.
    text = MINIMAL.replace(
        "replicas: 3", "replicas: 2\n  rack:\n    topologyKey: topology.kubernetes.io/zone"
    )
    await apply(kube, text)

    async def racked() -> list[Any] | None:
        status = (await kube.get("kc", "demo")).get("status") or {}
        racks = [b.get("rack") for b in status.get("brokers", [])]
        return racks if len(racks) == 2 and all(racks) else None

    racks = await eventually(racked, what="racks of brokers 0 and 1")
    for i in range(2):
        pod = await kube.get("pod", f"demo-kafka-{i}")
        node = await kube.get("node", pod["spec"]["nodeName"])
        zone = node["metadata"]["labels"]["topology.kubernetes.io/zone"]
        assert racks[i] == zone
        assert pod["metadata"]["annotations"]["kafka.samsa.dev/rack"] == zone

    async def finalized() -> bool:
        kc = await kube.get("kc", "demo")
        return "kafka.samsa.dev/finalizer" in kc["metadata"].get("finalizers", [])

    await eventually(finalized, what="the finalizer")
    await kube.kubectl("delete", "kc", "demo", "--timeout=60s", within=90)
    assert await kube.maybe_get("kc", "demo") is None


@dataclass
class BrokerProcess:
    port: int
    proc: subprocess.Popen[bytes]

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"


@pytest.fixture
def broker_process(tmp_path: Path) -> Iterator[BrokerProcess]:
    """A real Samsa broker process (standalone) on free 127.0.0.1 ports."""
    port = free_port()
    log = (tmp_path / "broker.log").open("wb")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "samsa.cli",
            "broker",
            "--data-dir",
            str(tmp_path / "data"),
            "--listen",
            f"127.0.0.1:{port}",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 1):
                break
            if proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(
                    f"broker did not start: {(tmp_path / 'broker.log').read_text()}"
                )
            time.sleep(0.05)
        yield BrokerProcess(port, proc)
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


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


async def test_topic_is_created_with_the_operators_assignment_grown_and_refused(
    kube: KubeNamespace, broker_process: BrokerProcess
) -> None:
    await operator(kube)
    admin = AdminClient({"bootstrap.servers": broker_process.bootstrap, "logger": QUIET})
    await apply(kube, cluster_on(broker_process))
    # A replication factor above the brokers is refused, and nothing is created.
    await apply(kube, topic(3, rf=3))

    async def too_large() -> dict[str, Any] | None:
        cond = condition(await kube.get("kt", "clicks"))
        return cond if cond.get("reason") == "ReplicationFactorTooLarge" else None

    cond = await eventually(too_large, what="refusal")
    assert "spec.replicationFactor 3 exceeds the 1 brokers" in cond["message"]
    assert "web.clicks" not in admin.list_topics(timeout=10).topics

    await apply(kube, topic(3))
    await kube.kubectl("wait", "--for=condition=Ready", "kt/clicks", "--timeout=60s", within=90)

    # The cluster's status comes from the broker itself, over DescribeCluster.
    async def described() -> Any:
        status = (await kube.get("kc", "local")).get("status") or {}
        return status if status.get("clusterId") else None

    assert (await eventually(described, what="the cluster id"))["controllerId"] == 0

    assignment, topic_id, configs = describe(admin, "web.clicks")
    brokers = [reconcile.Broker(0)]
    assert assignment == reconcile.assign(brokers, 3, 1)
    assert configs["retention.ms"] == "3600000"
    status = (await kube.get("kt", "clicks"))["status"]
    assert (status["topicId"], status["partitions"], status["replicationFactor"]) == (
        topic_id,
        3,
        1,
    )

    await apply(kube, topic(5, config="retention.ms: 7200000"))

    async def grown() -> bool:
        status = (await kube.get("kt", "clicks")).get("status") or {}
        return status.get("partitions") == 5 and status.get("observedGeneration") == 3

    await eventually(grown, what="5 partitions")
    assignment, _, configs = describe(admin, "web.clicks")
    first = {p: r for p, r in assignment.items() if p < 3}
    assert assignment == {**first, **reconcile.assign(brokers, 2, 1, existing=first)}
    assert configs["retention.ms"] == "7200000"

    # Partitions never shrink.
    await apply(kube, topic(2))

    async def decrease() -> bool:
        return await reason(kube, "kt", "clicks") == "PartitionDecrease"

    await eventually(decrease, what="refusal")
    assert len(describe(admin, "web.clicks")[0]) == 5

    await kube.kubectl("delete", "kt", "clicks", "--timeout=60s", within=90)
    assert "web.clicks" not in admin.list_topics(timeout=10).topics

    # The finalizer lets go when the cluster is gone.
    await apply(kube, topic(1).replace("clusterRef: local", "clusterRef: nowhere"))

    async def not_found() -> bool:
        return await reason(kube, "kt", "clicks") == "ClusterNotFound"

    await eventually(not_found, what="ClusterNotFound")
    await kube.kubectl("delete", "kt", "clicks", "--timeout=60s", within=90)
    assert await kube.maybe_get("kt", "clicks") is None
