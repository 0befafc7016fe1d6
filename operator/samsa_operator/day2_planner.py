"""The day-2 decision, pure: from what is observed, the one next step of a KafkaCluster.

Everything is derived from the cluster as it is (pods, the StatefulSet, the brokers' own
metadata), plus the little the status must remember: that a size change still owes a
rebalance, and which brokers a roll has restarted. So an operator that dies at any point
takes up where it was: a drain is done only when the brokers that go hold no replica, a roll
only when no broker needs a restart.

One step at a time, in this order:
1. scaling: refuse a size below a topic's replication factor; drain the brokers that go
   (reassignment), then shrink the StatefulSet; after any size change, rebalance replicas and
   leaders over the brokers, then elect preferred leaders;
2. nothing while partitions move;
3. the rolling restart: one broker at a time, the active controller last, each only when
   every broker is ready (back in every ISR) and the restart rule allows it; then elect
   preferred leaders;
4. the ZooKeeper roll: followers first, the leader last, each while the rest keep a quorum;
5. preferred-leader election whenever a broker's leader imbalance exceeds the threshold.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from samsa_operator import rebalance, reconcile, rolling
from samsa_operator.reconcile import AssignmentError, Broker, PartitionState

Obj = dict[str, Any]

ROLLING, SCALING = "RollingRestart", "Scaling"


@dataclass(frozen=True)
class PodView:
    """One broker pod (or ZooKeeper pod) as Kubernetes reports it."""

    ordinal: int
    ready: bool
    terminating: bool = False
    outdated: bool = False  # its template revision is not the StatefulSet's update revision
    manual_restart: bool = False  # the manual-rolling-update annotation

    @property
    def serving(self) -> bool:
        return self.ready and not self.terminating


@dataclass(frozen=True)
class KafkaView:
    """What the brokers say of the cluster."""

    controller_id: int | None
    brokers: Sequence[Broker]  # registered
    partitions: Sequence[PartitionState]
    reassigning: frozenset[tuple[str, int]] = frozenset()

    def assignments(self) -> dict[str, dict[int, list[int]]]:
        out: dict[str, dict[int, list[int]]] = {}
        for p in self.partitions:
            out.setdefault(p.topic, {})[p.partition] = list(p.replicas)
        return out

    @property
    def max_replication_factor(self) -> int:
        return max((len(p.replicas) for p in self.partitions), default=0)


@dataclass(frozen=True)
class ClusterView:
    wanted_brokers: int  # spec.brokers.replicas
    sts_replicas: int  # the broker StatefulSet's current size
    pods: Mapping[int, PodView]
    kafka: KafkaView | None  # None when no broker answers
    restart_reasons: Mapping[int, Sequence[str]] = field(default_factory=dict)  # config diffs
    scaling: Mapping[str, Any] | None = None  # status.scaling as persisted
    roll: Mapping[str, Any] | None = None  # status.roll as persisted
    leader_imbalance_percent: int = 10
    zookeeper_pods: Mapping[int, PodView] = field(default_factory=dict)
    zookeeper_replicas: int = 0  # the ZooKeeper StatefulSet's size (0: none deployed)
    zookeeper_modes: Mapping[int, str | None] = field(default_factory=dict)


# -- actions --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Restart:
    broker_id: int
    reasons: Sequence[str]


@dataclass(frozen=True)
class RestartZooKeeper:
    ordinal: int


@dataclass(frozen=True)
class Reassign:
    plan: rebalance.Plan
    why: str


@dataclass(frozen=True)
class Resize:
    replicas: int


@dataclass(frozen=True)
class ElectPreferred:
    partitions: Sequence[tuple[str, int]]


Action = Restart | RestartZooKeeper | Reassign | Resize | ElectPreferred


@dataclass(frozen=True)
class Condition:
    type: str
    ok: bool
    reason: str
    message: str


@dataclass
class Step:
    """The next action (or none), the conditions to show and the status to persist first."""

    action: Action | None = None
    conditions: list[Condition] = field(default_factory=list)
    status: Obj = field(default_factory=dict)  # status fields to set (None clears)


def next_step(v: ClusterView, now: str) -> Step:
    if v.kafka is None:
        return Step(
            conditions=[
                Condition(ROLLING, False, "KafkaUnreachable", "no broker answers"),
                Condition(SCALING, False, "KafkaUnreachable", "no broker answers"),
            ]
        )
    step = _scaling(v, v.kafka, now)
    if step.action is not None or step.status.get("scaling"):
        step.conditions.append(Condition(ROLLING, False, "Waiting", "waiting for the scaling"))
        return step
    if v.kafka.reassigning:
        n = len(v.kafka.reassigning)
        message = f"{n} partitions are being reassigned"
        step.conditions.append(Condition(ROLLING, False, "Waiting", message))
        return step
    roll = _roll(v, v.kafka, now)
    roll.conditions = step.conditions + roll.conditions
    roll.status = {**step.status, **roll.status}
    if roll.action is not None or roll.status.get("roll"):
        return roll
    zk = _zookeeper_roll(v)
    if zk is not None:
        roll.action = zk.action
        roll.conditions = [c for c in roll.conditions if c.type != ROLLING] + zk.conditions
        return roll
    if roll.action is None and _all_serving(v):
        elect = _imbalanced_leaders(v.kafka, v.leader_imbalance_percent)
        if elect:
            roll.action = ElectPreferred(elect)
    return roll


# -- scaling --------------------------------------------------------------------------------


def _scaling(v: ClusterView, k: KafkaView, now: str) -> Step:
    step = Step()
    if v.wanted_brokers < v.sts_replicas:
        return _scale_down(v, k, now)
    if v.scaling is None:
        step.conditions.append(Condition(SCALING, False, "Idle", f"{v.sts_replicas} brokers"))
        return step
    if v.wanted_brokers > v.sts_replicas:
        progress = {**dict(v.scaling), "phase": "Growing"}
        return _scaling_progress(step, progress, "waiting for the StatefulSet to grow")
    # After a size change: every broker up and registered, then balanced, then leaders.
    ids = list(range(v.sts_replicas))
    progress = dict(v.scaling)
    missing = [i for i in ids if not _serving(v, i)]
    unregistered = sorted(set(ids) - {b.id for b in k.brokers})
    if missing or unregistered:
        waiting = sorted(set(missing) | set(unregistered))
        progress["phase"] = "WaitingForBrokers"
        return _scaling_progress(step, progress, f"waiting for brokers {_ids(waiting)} to join")
    if k.reassigning:
        progress["phase"] = "Rebalancing"
        progress["remaining"] = len(k.reassigning)
        message = f"rebalancing: {len(k.reassigning)} partitions still moving"
        return _scaling_progress(step, progress, message)
    targets = [b for b in k.brokers if b.id in ids]
    plan = rebalance.balance(k.assignments(), targets)
    if plan:
        progress["phase"] = "Rebalancing"
        progress["remaining"] = len(plan)
        step.action = Reassign(plan, f"balance over {len(targets)} brokers")
        return _scaling_progress(step, progress, f"rebalancing {len(plan)} partitions")
    elect = _election(k, progress)
    if elect is not None:
        step.action = elect
        return _scaling_progress(step, progress, "electing preferred leaders")
    step.status["scaling"] = None
    step.status["lastScaling"] = {**dict(v.scaling), "phase": "Done", "finishedAt": now}
    step.conditions.append(
        Condition(SCALING, False, "Idle", f"balanced over {v.sts_replicas} brokers")
    )
    return step


def _scale_down(v: ClusterView, k: KafkaView, now: str) -> Step:
    step = Step()
    keep = list(range(v.wanted_brokers))
    going = list(range(v.wanted_brokers, v.sts_replicas))
    need = k.max_replication_factor
    if need > v.wanted_brokers:
        topics = sorted({p.topic for p in k.partitions if len(p.replicas) == need})
        step.conditions.append(
            Condition(
                SCALING,
                False,
                "ScaleDownRefused",
                f"spec.brokers.replicas {v.wanted_brokers} is below the replication factor "
                f"{need} of {', '.join(topics)}; the cluster keeps {v.sts_replicas} brokers",
            )
        )
        return step
    progress: Obj = {
        **dict(v.scaling or {}),
        "fromReplicas": (v.scaling or {}).get("fromReplicas", v.sts_replicas),
        "toReplicas": v.wanted_brokers,
        "startedAt": (v.scaling or {}).get("startedAt", now),
    }
    if k.reassigning:
        progress.update(phase="Draining", remaining=len(k.reassigning))
        message = f"draining brokers {_ids(going)}: {len(k.reassigning)} partitions moving"
        return _scaling_progress(step, progress, message)
    hosted = rebalance.hosted_on(k.assignments(), going)
    if hosted:
        unready = [i for i in range(v.sts_replicas) if not _serving(v, i)]
        if unready:
            progress["phase"] = "Draining"
            message = f"draining brokers {_ids(going)} waits for brokers {_ids(unready)}"
            return _scaling_progress(step, progress, message)
        targets = [b for b in k.brokers if b.id in keep]
        try:
            plan = rebalance.balance(k.assignments(), targets)
        except AssignmentError as exc:  # a registered broker is missing: wait for it
            progress["phase"] = "Draining"
            return _scaling_progress(step, progress, f"cannot drain yet: {exc}")
        progress.update(phase="Draining", remaining=len(plan))
        step.action = Reassign(plan, f"drain brokers {_ids(going)}")
        message = f"draining brokers {_ids(going)}: moving {len(hosted)} partitions"
        return _scaling_progress(step, progress, message)
    # Nothing is left on the brokers that go: only now may their pods go.
    progress["phase"] = "Shrinking"
    step.action = Resize(v.wanted_brokers)
    return _scaling_progress(step, progress, f"brokers {_ids(going)} drained; removing them")


def _scaling_progress(step: Step, progress: Obj, message: str) -> Step:
    progress["message"] = message
    step.status["scaling"] = progress
    step.conditions.append(Condition(SCALING, True, progress["phase"], message))
    return step


# -- rolling restart ------------------------------------------------------------------------


def restart_candidates(v: ClusterView) -> dict[int, list[str]]:
    """Brokers that need a restart, with why."""
    out: dict[int, list[str]] = {}
    for i in range(v.sts_replicas):
        pod = v.pods.get(i)
        if pod is None or pod.terminating:
            continue
        reasons = []
        if pod.outdated:
            reasons.append("pod template changed")
        if pod.manual_restart:
            reasons.append("manual rolling update")
        changed = v.restart_reasons.get(i)
        if changed:
            reasons.append("config changed: " + ", ".join(changed))
        if reasons:
            out[i] = reasons
    return out


def _roll(v: ClusterView, k: KafkaView, now: str) -> Step:
    step = Step()
    candidates = restart_candidates(v)
    if not candidates:
        if v.roll is not None:
            if not _all_serving(v):
                step.conditions.append(
                    Condition(ROLLING, True, "Waiting", _unready_message(v, "the roll"))
                )
                return step
            ending = dict(v.roll)
            elect = _election(k, ending)
            if elect is not None:
                step.action = elect
                step.conditions.append(
                    Condition(ROLLING, True, "ElectingLeaders", "electing preferred leaders")
                )
                step.status["roll"] = ending
                return step
            step.status["roll"] = None
            step.status["lastRoll"] = {**dict(v.roll), "pending": [], "finishedAt": now}
        step.conditions.append(Condition(ROLLING, False, "Idle", "no broker needs a restart"))
        return step
    order = reconcile.restart_order(candidates, k.controller_id)
    restarted = list((v.roll or {}).get("restarted", []))
    roll: Obj = {
        "startedAt": (v.roll or {}).get("startedAt", now),
        "pending": order,
        "restarted": restarted,
        "reasons": {str(b): "; ".join(candidates[b]) for b in order},
    }
    nxt = order[0]
    blockers = reconcile.restart_blockers(nxt, k.partitions)
    unready = [i for i in range(v.sts_replicas) if not _serving(v, i)]
    if unready or blockers:
        why = []
        if unready:
            why.append(f"brokers {_ids(unready)} not ready (not yet back in every ISR)")
        if blockers:
            more = f" (+{len(blockers) - 3} more)" if len(blockers) > 3 else ""
            shown = "; ".join(blockers[:3]) + more
            why.append(f"restarting broker {nxt} would break the rule: {shown}")
        roll["phase"] = "Blocked"
        message = f"broker {nxt} waits: " + "; ".join(why)
        step.status["roll"] = {**roll, "message": message}
        step.conditions.append(Condition(ROLLING, True, "Blocked", message))
        return step
    roll["phase"] = "Restarting"
    roll["restarted"] = [*(b for b in restarted if b != nxt), nxt]
    roll["pending"] = order[1:]
    message = (
        f"restarting broker {nxt} ({'; '.join(candidates[nxt])}); {len(order) - 1} to go after it"
    )
    step.status["roll"] = {**roll, "message": message}
    step.action = Restart(nxt, candidates[nxt])
    step.conditions.append(Condition(ROLLING, True, "Restarting", message))
    return step


def _zookeeper_roll(v: ClusterView) -> Step | None:
    if not v.zookeeper_replicas:
        return None
    candidates = {
        i: p
        for i, p in v.zookeeper_pods.items()
        if i < v.zookeeper_replicas and (p.outdated or p.manual_restart) and not p.terminating
    }
    if not candidates:
        return None
    ready = [i for i, p in v.zookeeper_pods.items() if p.serving and i < v.zookeeper_replicas]
    unready = sorted(set(range(v.zookeeper_replicas)) - set(ready))
    modes = {i: v.zookeeper_modes.get(i) for i in candidates}
    order = rolling.zookeeper_restart_order(modes)
    nxt = order[0]
    quorum_ok = v.zookeeper_replicas == 1 or rolling.zookeeper_may_restart(
        nxt, ready, v.zookeeper_replicas
    )
    if unready or not quorum_ok:
        message = f"ZooKeeper server {nxt} waits: servers {_ids(unready)} not ready"
        return Step(conditions=[Condition(ROLLING, True, "Blocked", message)])
    role = modes.get(nxt) or "unknown role"
    message = f"restarting ZooKeeper server {nxt} ({role}); {len(order) - 1} to go after it"
    return Step(
        action=RestartZooKeeper(nxt), conditions=[Condition(ROLLING, True, "Restarting", message)]
    )


# -- leaders --------------------------------------------------------------------------------


# Elections that end a roll or a scaling: the metadata read may lag the ISR, and an election
# may not take every partition; after this many the threshold rule carries on.
ELECTIONS = 5


def _election(k: KafkaView, record: Obj) -> ElectPreferred | None:
    """The next preferred-leader election that ends an operation, counted in its record;
    None once every partition is led by its preferred replica (or enough were tried)."""
    pending = sorted(
        (p.topic, p.partition) for p in k.partitions if p.replicas and p.leader != p.replicas[0]
    )
    tried = int(record.get("elections", 0))
    if not pending or tried >= ELECTIONS:
        return None
    record.update(phase="ElectingLeaders", elections=tried + 1)
    return ElectPreferred(_not_preferred(k) or pending)


def _not_preferred(k: KafkaView) -> list[tuple[str, int]]:
    """Partitions not led by their preferred replica, where that replica could lead."""
    return sorted(
        (p.topic, p.partition)
        for p in k.partitions
        if p.replicas and p.leader != p.replicas[0] and p.replicas[0] in p.isr
    )


def _imbalanced_leaders(k: KafkaView, threshold_percent: int) -> list[tuple[str, int]]:
    imbalance = reconcile.leader_imbalance(k.partitions)
    if not any(share * 100 > threshold_percent for share in imbalance.values()):
        return []
    return _not_preferred(k)


# -- helpers --------------------------------------------------------------------------------


def _serving(v: ClusterView, i: int) -> bool:
    pod = v.pods.get(i)
    return pod is not None and pod.serving


def _all_serving(v: ClusterView) -> bool:
    return all(_serving(v, i) for i in range(v.sts_replicas))


def _unready_message(v: ClusterView, what: str) -> str:
    unready = [i for i in range(v.sts_replicas) if not _serving(v, i)]
    return f"{what} waits for brokers {_ids(unready)} to be ready"


def _ids(ids: Sequence[int]) -> str:
    return ", ".join(str(i) for i in ids)
