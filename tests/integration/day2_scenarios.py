"""The day-2 scenarios' shared body, used by tests/integration (the local control plane) and
tests/e2e (real nodes and kind, through tests/e2e/day2_k8s.py): the KafkaCluster they run,
and what each scenario waits for and expects of the cluster's status and layout. The suites
differ only in how they reach the cluster (local processes here, pods and `kubectl` there)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any

NAME = "day2"
Status = dict[str, Any]


def cluster(
    brokers: int = 3,
    *,
    zookeeper: dict[str, Any] | None = None,
    delete_claim: bool = False,
    throttle: int | None = None,
    **config: Any,
) -> dict[str, Any]:
    """The day-2 KafkaCluster: min.insync.replicas 2 of 3, the operator alone moves leaders."""
    spec: dict[str, Any] = {
        "brokers": {"replicas": brokers, "storage": {"size": "1Gi", "deleteClaim": delete_claim}},
        "zookeeper": zookeeper or {"replicas": 3},
        "config": {
            "min.insync.replicas": 2,
            "default.replication.factor": 3,
            "offsets.topic.replication.factor": 3,
            "auto.leader.rebalance.enable": False,  # preferred leaders are the operator's job
            **config,
        },
    }
    if throttle is not None:
        spec["operations"] = {"reassignmentThrottleBytesPerSecond": throttle}
    return {
        "apiVersion": "kafka.samsa.dev/v1alpha1",
        "kind": "KafkaCluster",
        "metadata": {"name": NAME},
        "spec": spec,
    }


def condition(status: Status, kind: str) -> dict[str, Any]:
    for c in status.get("conditions", []):
        if c["type"] == kind:
            return dict(c)
    return {}


def ready(brokers: int) -> Callable[[Status], bool]:
    """Ready, with `brokers` brokers each ready and a controller."""

    def check(status: Status) -> bool:
        every = [b.get("ready") for b in status.get("brokers", [])] == [True] * brokers
        ok = condition(status, "Ready").get("status") == "True"
        return ok and every and status.get("controllerId") is not None

    return check


def roll_finished(brokers: int) -> Callable[[Status], bool]:
    """The roll is over and restarted every broker."""

    def check(status: Status) -> bool:
        last = status.get("lastRoll") or {}
        return status.get("roll") is None and len(last.get("restarted", [])) == brokers

    return check


def roll_blocked(status: Status) -> bool:
    return condition(status, "RollingRestart").get("reason") == "Blocked"


def scaled_to(brokers: int) -> Callable[[Status], bool]:
    """The scaling is over and ended at `brokers`."""

    def check(status: Status) -> bool:
        last = status.get("lastScaling") or {}
        return status.get("scaling") is None and last.get("toReplicas") == brokers

    return check


def scale_down_refused(status: Status) -> bool:
    return condition(status, "Scaling").get("reason") == "ScaleDownRefused"


def per_broker(
    partitions: Iterable[tuple[list[int], int]], brokers: int
) -> tuple[Counter[int], Counter[int]]:
    """Replicas and leaders per broker, from each partition's (replicas, leader)."""
    replicas: Counter[int] = Counter({i: 0 for i in range(brokers)})
    leaders: Counter[int] = Counter({i: 0 for i in range(brokers)})
    for assigned, leader in partitions:
        replicas.update(assigned)
        leaders[leader] += 1
    return replicas, leaders


def spread(counts: Counter[int]) -> int:
    return max(counts.values()) - min(counts.values())
