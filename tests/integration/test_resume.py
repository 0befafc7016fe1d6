"""The operator's pod killed (kill -9 of its container) in the middle of a roll and of a
drain: the restarted container takes up where it was and finishes, with no broker restarted
twice and no replica left behind. It runs with the chart's ServiceAccount: a verb missing
from the chart's RBAC fails the test."""

from __future__ import annotations

import os
import signal
import time

import day2_scenarios as scenarios
import pytest
from cluster_support import consume_all, create_topic
from confluent_kafka import Producer
from day2_support import (
    Brokers,
    cluster_status,
    hosted,
    in_thread,
    layout,
    merge,
    operator_pod,
    start_cluster,
    starts,
    wait_status,
)
from kafka.admin import KafkaAdminClient

from samsa.local_cluster import ZooKeeperServer
from samsa_dev.kube.agent import ordinal
from samsa_dev.kube.harness import KubeNamespace, eventually

# A whole cluster on the control plane: more than the default 300 s under load.
pytestmark = pytest.mark.timeout(600)

RECORDS, SIZE = 16_000, 1024  # 16 MB: a drain throttled to 1 MB/s takes seconds


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


def kill_operator(kube: KubeNamespace) -> None:
    """kill -9 of the operator's container: the node agent starts it again (restartPolicy)."""
    pod = operator_pod(kube)
    pid = kube.agent.pid(pod)
    assert pid is not None
    os.kill(pid, signal.SIGKILL)


@pytest.mark.slow
@pytest.mark.e2e  # day-2 under load: `make e2e` (docs/kubernetes.md)
async def test_operator_killed_mid_roll_and_mid_drain_resumes(
    kube: KubeNamespace, zookeeper: ZooKeeperServer
) -> None:
    status, brokers = await start_cluster(kube, zookeeper, 4, delete_claim=True, throttle=1 << 20)
    await in_thread(create_topic, brokers, "data", 8, 3, **{"min.insync.replicas": "2"})
    await in_thread(fill, brokers, "data")

    # -- a roll, the operator killed once the first broker is on its way down
    controller = status["controllerId"]
    started = time.monotonic()
    await kube.kubectl("annotate", "kc", "day2", "kafka.samsa.dev/manual-rolling-update=true")
    await eventually(lambda: _stopped_since(kube, started), 60, "the first restart")
    kill_operator(kube)

    status = await wait_status(kube, scenarios.roll_finished(4), "the roll to finish", 300)
    order = starts(kube, started)
    assert sorted(order) == [0, 1, 2, 3], f"each broker restarted once: {order}"
    assert order[-1] == controller, order

    # -- a drain, the operator killed while partitions move off broker 3
    held_when_stopped: dict[int, list[str]] = {}

    async def before_stop(pod: str) -> None:
        if pod.startswith("day2-kafka-"):
            held_when_stopped[ordinal(pod)] = await in_thread(hosted, brokers, ordinal(pod))

    kube.agent.before_stop = before_stop
    volume = (await kube.get("pvc", "data-day2-kafka-3"))["spec"]["volumeName"]
    await merge(kube, {"spec": {"brokers": {"replicas": 3}}})

    async def draining() -> bool:
        phase = ((await cluster_status(kube)).get("scaling") or {}).get("phase")
        return phase == "Draining" and await in_thread(moving, brokers)

    await eventually(draining, 120, "partitions moving off broker 3")
    kill_operator(kube)

    await wait_status(kube, scenarios.scaled_to(3), "the drain to finish", 300)
    await eventually(lambda: _claim_gone(kube, "data-day2-kafka-3"), 60, "claim 3 deleted")
    assert held_when_stopped == {3: []}
    # Its volume went too, and the provisioner removed its folder.
    await eventually(lambda: _volume_gone(kube, volume), 60, "volume of claim 3 deleted")
    parts = (await in_thread(layout, brokers))["data"]
    assert all(set(p.replicas) == {0, 1, 2} for p in parts.values())
    # Every record is still there.
    got = await in_thread(consume_all, brokers, "data", 8)
    assert sum(len(v) for v in got.values()) == RECORDS


async def _stopped_since(kube: KubeNamespace, moment: float) -> bool:
    return any(
        e.kind == "stop" and e.at > moment and e.pod.startswith("day2-kafka-")
        for e in kube.agent.events
    )


async def _claim_gone(kube: KubeNamespace, name: str) -> bool:
    return await kube.maybe_get("pvc", name) is None


async def _volume_gone(kube: KubeNamespace, name: str) -> bool:
    return await kube.api.get(f"/api/v1/persistentvolumes/{name}") is None
