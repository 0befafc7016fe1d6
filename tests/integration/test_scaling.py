"""Scaling by the real operator on the real control plane, with real brokers the node agent
runs: 3 to 5 under load (balanced replicas and leaders), 5 to 3 (drained before the pods
go), a scale-down below a topic's replication factor refused, and a Topic's
replication-factor change."""

from __future__ import annotations

import json
from typing import Any

import day2_scenarios as scenarios
import pytest
from cluster_support import LoadProducer, check_exactly_once, consume_all, create_topic
from day2_support import (
    acked,
    apply,
    broker_config,
    broker_pid,
    cluster_status,
    condition,
    hosted,
    in_thread,
    layout,
    merge,
    not_led_by_preferred,
    per_broker,
    start_cluster,
    wait_status,
)

from samsa.local_cluster import ZooKeeperServer
from samsa_dev.kube.agent import ordinal
from samsa_dev.kube.harness import KubeNamespace, eventually

# A whole cluster on the control plane: more than the default 300 s under load.
pytestmark = pytest.mark.timeout(600)

THROTTLE = "follower.replication.throttled.rate"
DYNAMIC_BROKER_CONFIG = 2


scaled_to, spread = scenarios.scaled_to, scenarios.spread


@pytest.mark.slow
@pytest.mark.e2e  # day-2 under load: `make e2e` (docs/kubernetes.md)
async def test_scale_up_balances_and_scale_down_drains_under_load(
    kube: KubeNamespace, zookeeper: ZooKeeperServer
) -> None:
    _, brokers = await start_cluster(kube, zookeeper, throttle=10 << 20)
    await in_thread(create_topic, brokers, "load", 10, 3, **{"min.insync.replicas": "2"})
    held_when_stopped: dict[int, list[str]] = {}

    async def before_stop(pod: str) -> None:
        held_when_stopped[ordinal(pod)] = await in_thread(hosted, brokers, ordinal(pod))

    kube.agent.before_stop = before_stop
    load = LoadProducer(brokers, "load").start()
    throttles = []

    async def scaled(n: int) -> dict[str, Any]:
        async def probe() -> dict[str, Any] | None:
            status = await cluster_status(kube)
            throttles.append(status.get("throttle"))
            return status if scaled_to(n)(status) else None

        return await eventually(probe, 240, f"scaled to {n} brokers")

    try:
        await eventually(lambda: acked(load, 500), 60, "records acknowledged")
        await merge(kube, {"spec": {"brokers": {"replicas": 5}}})
        status = await scaled(5)
        replicas, leaders = await in_thread(per_broker, brokers, range(5))
        assert spread(replicas) <= 1 and spread(leaders) <= 1, (replicas, leaders)
        assert min(replicas.values()) == 6, replicas  # 30 replicas over 5 brokers
        # Moves were throttled on every broker staying, and the throttle is lifted after.
        assert {"rate": 10 << 20, "brokers": [0, 1, 2, 3, 4]} in throttles
        assert status.get("throttle") is None
        for b in range(5):
            _, source = await in_thread(broker_config, brokers, b, THROTTLE)
            assert source != DYNAMIC_BROKER_CONFIG

        before = load.oracle.count()
        await merge(kube, {"spec": {"brokers": {"replicas": 3}}})
        await scaled(3)
        await eventually(lambda: _pods_gone(kube, {3, 4}), 60, "pods 3 and 4 gone")
        await eventually(lambda: acked(load, before + 300), 60, "records after scaling")
    finally:
        oracle = load.stop()
    # The brokers that went held nothing, internal topics included, when their pods went.
    assert held_when_stopped == {3: [], 4: []}
    replicas, leaders = await in_thread(per_broker, brokers, range(3))
    assert set(replicas) == {0, 1, 2} and spread(leaders) <= 1, (replicas, leaders)
    assert await in_thread(not_led_by_preferred, brokers) == []
    # storage.deleteClaim is false: the claims (and the data) stay.
    claims = {c["metadata"]["name"] for c in (await kube.get("pvc"))["items"]}
    assert {"data-day2-kafka-3", "data-day2-kafka-4"} <= claims
    assert not oracle.errors, oracle.errors[:3]
    check_exactly_once(oracle, await in_thread(consume_all, brokers, "load", 10))


async def _pods_gone(kube: KubeNamespace, ordinals: set[int]) -> bool:
    names = {p["metadata"]["name"] for p in (await kube.get("pods"))["items"]}
    return not names & {f"day2-kafka-{i}" for i in ordinals}


TOPIC: dict[str, Any] = {
    "apiVersion": "kafka.samsa.dev/v1alpha1",
    "kind": "Topic",
    "metadata": {"name": "events"},
    "spec": {"clusterRef": "day2", "partitions": 4, "replicationFactor": 2},
}


async def test_scale_below_a_replication_factor_is_refused_and_rf_changes_by_reassignment(
    kube: KubeNamespace, zookeeper: ZooKeeperServer
) -> None:
    _, brokers = await start_cluster(kube, zookeeper)
    await in_thread(create_topic, brokers, "t", 3, 3)
    before = await in_thread(_replicas, brokers)
    pids = [broker_pid(kube, i) for i in range(3)]

    await merge(kube, {"spec": {"brokers": {"replicas": 2}}})
    status = await wait_status(
        kube,
        scenarios.scale_down_refused,
        "the scale-down refused",
    )
    message = condition(status, "Scaling")["message"]
    assert "spec.brokers.replicas 2 is below the replication factor 3 of" in message, message
    # Nothing changed: the StatefulSet, the pods, the assignment.
    assert (await kube.get("sts", "day2-kafka"))["spec"]["replicas"] == 3
    assert [broker_pid(kube, i) for i in range(3)] == pids
    assert await in_thread(_replicas, brokers) == before
    await merge(kube, {"spec": {"brokers": {"replicas": 3}}})
    await wait_status(
        kube, lambda s: condition(s, "Scaling").get("reason") == "Idle", "the refusal gone"
    )

    # A Topic's replication factor changes through a tracked reassignment.
    await apply(kube, json.dumps(TOPIC))
    await kube.kubectl("wait", "--for=condition=Ready", "kt/events", "--timeout=60s")
    grown = {**TOPIC, "spec": {**TOPIC["spec"], "replicationFactor": 3}}
    await apply(kube, json.dumps(grown))

    async def rf3() -> bool:
        topic = await kube.get("kt", "events")
        st = topic.get("status") or {}
        ready = [c for c in st.get("conditions", []) if c["type"] == "Ready"]
        return bool(
            st.get("replicationFactor") == 3
            and st.get("reassignment") is None
            and ready
            and ready[0]["status"] == "True"
        )

    await eventually(rf3, 90, "replication factor 3 applied")
    parts = (await in_thread(layout, brokers))["events"]
    assert all(
        sorted(p.replicas) == [0, 1, 2] and sorted(p.isrs) == [0, 1, 2] for p in parts.values()
    )
    assert [broker_pid(kube, i) for i in range(3)] == pids


def _replicas(brokers: Any) -> dict[str, dict[int, list[int]]]:
    return {t: {n: list(p.replicas) for n, p in ps.items()} for t, ps in layout(brokers).items()}
