"""The operator killed (kill -9) in the middle of a roll and of a drain: a new one takes up
where it was and finishes, with no broker restarted twice and no replica left behind."""

from __future__ import annotations

import os
import signal
import time
from typing import Any

import pytest
from cluster_support import consume_all, create_topic
from confluent_kafka import Producer
from day2_support import (
    OPERATOR_ENV,
    Brokers,
    Start,
    cluster_status,
    hosted,
    in_thread,
    layout,
    merge,
    start_cluster,
    wait_status,
)
from kafka.admin import KafkaAdminClient
from kube_stand import KubeStand
from kubelet import USER_AGENT, Kubelet
from op_support import (
    Kubectl,
    OperatorProcess,
    eventually,
    helm_template,
    rbac_gaps,
    verbs_used,
)

from samsa.local import ZooKeeperServer

RECORDS, SIZE = 16_000, 1024  # 16 MB: a drain throttled to 1 MB/s takes seconds
CLAIMS = "/api/v1/namespaces/default/persistentvolumeclaims"


def fill(brokers: Brokers, topic: str) -> None:
    producer = Producer({"bootstrap.servers": brokers.bootstrap_servers, "acks": "all"})
    for i in range(RECORDS):
        while True:
            try:
                producer.produce(topic, value=b"%08d" % i + b"x" * (SIZE - 8))
                break
            except BufferError:
                producer.poll(0.1)
    assert producer.flush(60) == 0


def moving(brokers: Brokers) -> bool:
    admin = KafkaAdminClient(bootstrap_servers=brokers.bootstrap_servers.split(","))
    try:
        return bool(admin.list_partition_reassignments())
    finally:
        admin.close()


async def kill(op: OperatorProcess) -> None:
    os.killpg(op.proc.pid, signal.SIGKILL)
    await op.proc.wait()


@pytest.mark.slow
async def test_operator_killed_mid_roll_and_mid_drain_resumes(
    kubectl: Kubectl,
    operator: Start,
    kubelet: Kubelet,
    zookeeper: ZooKeeperServer,
    stand: KubeStand,
    helm: str,
) -> None:
    status, brokers, first = await start_cluster(
        kubectl, operator, kubelet, zookeeper, 4, delete_claim=True, throttle=1 << 20
    )
    api = kubelet.api
    await in_thread(create_topic, brokers, "data", 8, 3, **{"min.insync.replicas": "2"})
    await in_thread(fill, brokers, "data")

    # -- a roll, the operator killed once the first broker is on its way down
    controller = status["controllerId"]
    started = time.monotonic()
    await kubectl("annotate", "kc", "day2", "kafka.samsa.dev/manual-rolling-update=true")
    await eventually(lambda: _stopped_since(kubelet, started), 60, "the first restart")
    await kill(first)
    second = await operator(**OPERATOR_ENV)

    def roll_done(s: dict[str, Any]) -> bool:
        return s.get("roll") is None and len((s.get("lastRoll") or {}).get("restarted", [])) == 4

    status = await wait_status(api, roll_done, "the roll to finish", 300)
    order = kubelet.starts(since=started)
    assert sorted(order) == [0, 1, 2, 3], f"each broker restarted once: {order}"
    assert order[-1] == controller, order

    # -- a drain, the operator killed while partitions move off broker 3
    held_when_stopped: dict[int, list[str]] = {}

    async def before_stop(ordinal: int) -> None:
        held_when_stopped[ordinal] = await in_thread(hosted, brokers, ordinal)

    kubelet.before_stop = before_stop
    await merge(kubectl, {"spec": {"brokers": {"replicas": 3}}})

    async def draining() -> bool:
        phase = ((await cluster_status(api)).get("scaling") or {}).get("phase")
        return phase == "Draining" and await in_thread(moving, brokers)

    await eventually(draining, 120, "partitions moving off broker 3")
    await kill(second)
    await operator(**OPERATOR_ENV)

    def drained(s: dict[str, Any]) -> bool:
        return s.get("scaling") is None and (s.get("lastScaling") or {}).get("toReplicas") == 3

    await wait_status(api, drained, "the drain to finish", 300)
    await eventually(lambda: _claim_gone(kubelet, "data-day2-kafka-3"), 60, "claim 3 deleted")
    assert held_when_stopped == {3: []}
    assert not (kubelet.workdir / "claims" / "data-day2-kafka-3").exists()
    parts = (await in_thread(layout, brokers))["data"]
    assert all(set(p.replicas) == {0, 1, 2} for p in parts.values())
    # Every record is still there.
    got = await in_thread(consume_all, brokers, "data", 8)
    assert sum(len(v) for v in got.values()) == RECORDS
    # What the operator did, the chart's RBAC allows: restarts, stamps, resizes included.
    [role] = [d for d in helm_template(helm) if d["kind"] == "ClusterRole"]
    used = verbs_used(stand, others=("kubectl", USER_AGENT))
    assert {
        ("", "pods", "delete"),
        ("", "pods", "patch"),
        ("apps", "statefulsets", "patch"),
    } <= used
    assert rbac_gaps(used, role["rules"]) == set()


async def _stopped_since(kubelet: Kubelet, moment: float) -> bool:
    return any(e.kind == "stop" and e.at > moment for e in kubelet.events)


async def _claim_gone(kubelet: Kubelet, name: str) -> bool:
    return await kubelet.api.get(f"{CLAIMS}/{name}") is None
