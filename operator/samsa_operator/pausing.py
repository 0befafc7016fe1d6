"""The pause switch: ``kafka.samsa.dev/pause-reconciliation: "true"`` on a KafkaCluster, Topic
or KafkaUser, as Strimzi's ``strimzi.io/pause-reconciliation``.

While it is set the operator changes nothing for that resource: no child is applied or
pruned (a hand edit stays), no spec change is carried out, no day-2 step (roll, rebalance,
reassignment, certificate renewal) is taken, and a paused Topic or KafkaUser deleted leaves
its topic, credentials and ACLs in Kafka. The status says so with a ReconciliationPaused
condition; taking the annotation off (or setting anything but "true") resumes, and the next
reconcile carries out what waited. Pure logic: the handlers do the I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

PAUSE_ANNOTATION = "kafka.samsa.dev/pause-reconciliation"
PAUSED = "ReconciliationPaused"


def paused(body: Mapping[str, Any]) -> bool:
    """Whether the resource asks the operator to leave it alone."""
    annotations = (body.get("metadata") or {}).get("annotations") or {}
    return str(annotations.get(PAUSE_ANNOTATION, "")).lower() == "true"


def paused_condition(generation: int | None) -> dict[str, Any]:
    return {
        "type": PAUSED,
        "status": "True",
        "reason": "PauseAnnotation",
        "message": f"{PAUSE_ANNOTATION} is true: nothing is changed until it is removed",
        "observedGeneration": generation,
    }


def was_paused(conditions: Iterable[Mapping[str, Any]]) -> bool:
    return any(c.get("type") == PAUSED for c in conditions)


def without_paused(conditions: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The conditions once reconciliation resumed: the ReconciliationPaused one goes."""
    return [dict(c) for c in conditions if c.get("type") != PAUSED]
