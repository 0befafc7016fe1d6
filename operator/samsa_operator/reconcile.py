"""Pure decisions, no I/O: replica assignment, the plan that brings a topic to its spec, and
the rules the day-2 operations build on (restart order, "may this broker restart now",
preferred-leader imbalance).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

Assignment = dict[int, list[int]]  # partition -> replicas, the preferred leader first


@dataclass(frozen=True)
class Broker:
    id: int
    rack: str | None = None


@dataclass(frozen=True)
class ClusterInfo:
    """What the cluster says of itself (DescribeCluster)."""

    cluster_id: str | None
    controller_id: int | None
    brokers: list[Broker]


@dataclass
class Load:
    """Replicas and preferred leaders per broker, over the whole cluster."""

    replicas: Counter[int] = field(default_factory=Counter)
    leaders: Counter[int] = field(default_factory=Counter)

    @classmethod
    def of(cls, assignments: Iterable[Mapping[int, Sequence[int]]]) -> Load:
        load = cls()
        for assignment in assignments:
            load.add(assignment)
        return load

    def add(self, assignment: Mapping[int, Sequence[int]]) -> None:
        for replicas in assignment.values():
            if replicas:
                self.leaders[replicas[0]] += 1
            self.replicas.update(replicas)


class AssignmentError(ValueError):
    pass


def _check_replication_factor(replication_factor: int, brokers: Sequence[Broker]) -> None:
    if replication_factor < 1:
        raise AssignmentError("the replication factor must be at least 1")
    if replication_factor > len(brokers):
        raise AssignmentError(
            f"replication factor {replication_factor} is larger than the {len(brokers)} "
            "available brokers"
        )


def assign(
    brokers: Sequence[Broker],
    partitions: int,
    replication_factor: int,
    *,
    existing: Mapping[int, Sequence[int]] | None = None,
    cluster_load: Load | None = None,
) -> Assignment:
    """Replicas for `partitions` new partitions, numbered after those in `existing`.

    Greedy and deterministic: each partition's preferred leader is the broker leading the
    fewest partitions (of this topic first, then of the cluster), and each follower the broker
    holding the fewest replicas, on a rack this partition does not use yet while one is left.
    """
    _check_replication_factor(replication_factor, brokers)
    existing = existing or {}
    topic = Load.of([existing])
    cluster = cluster_load or Load()
    rack_of = {b.id: b.rack for b in brokers}
    racks = set(rack_of.values())
    first = max(existing, default=-1) + 1
    result: Assignment = {}
    for p in range(first, first + partitions):
        leader = min(
            rack_of,
            key=lambda b: (
                topic.leaders[b],
                cluster.leaders[b],
                topic.replicas[b],
                cluster.replicas[b],
                b,
            ),
        )
        replicas = [leader]
        used = {rack_of[leader]}
        while len(replicas) < replication_factor:
            follower = min(
                (b for b in rack_of if b not in replicas),
                key=lambda b: (
                    rack_of[b] in used and len(used) < len(racks),
                    topic.replicas[b],
                    cluster.replicas[b],
                    b,
                ),
            )
            replicas.append(follower)
            used.add(rack_of[follower])
        result[p] = replicas
        topic.add({p: replicas})
        cluster.add({p: replicas})
    return result


def change_replication_factor(
    assignment: Mapping[int, Sequence[int]],
    replication_factor: int,
    brokers: Sequence[Broker],
    cluster_load: Load | None = None,
) -> Assignment:
    """New replicas for the partitions whose replica count is not `replication_factor`.

    Growing appends followers on the brokers (and racks) holding fewest replicas, ties going
    round-robin from the leader as Kafka places them; shrinking drops the followers on the
    busiest brokers. The preferred leader stays where it is.
    """
    _check_replication_factor(replication_factor, brokers)
    rack = {b.id: b.rack for b in brokers}
    ids = sorted(rack)
    topic = Load.of([assignment])
    cluster = cluster_load or Load.of([assignment])
    result: Assignment = {}
    for p in sorted(assignment):
        replicas = list(assignment[p])
        if len(replicas) == replication_factor:
            continue
        while len(replicas) < replication_factor:
            used = {rack.get(r) for r in replicas}
            new = min(
                (b for b in rack if b not in replicas),
                key=lambda b: (
                    rack[b] is not None and rack[b] in used,
                    topic.replicas[b],
                    cluster.replicas[b],
                    (ids.index(b) - ids.index(replicas[0])) % len(ids)
                    if replicas[0] in rack
                    else b,
                    b,
                ),
            )
            replicas.append(new)
            topic.replicas[new] += 1
            cluster.replicas[new] += 1
        while len(replicas) > replication_factor:
            drop = max(
                replicas[1:],
                key=lambda b: (b not in rack, topic.replicas[b], cluster.replicas[b], b),
            )
            replicas.remove(drop)
            topic.replicas[drop] -= 1
            cluster.replicas[drop] -= 1
        result[p] = replicas
    return result


# -- topics -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class DesiredTopic:
    name: str
    partitions: int
    replication_factor: int
    config: Mapping[str, str]


@dataclass(frozen=True)
class TopicState:
    """A topic as the cluster reports it."""

    name: str
    assignment: Mapping[int, Sequence[int]]
    config: Mapping[str, str]  # the topic's own (dynamic) configs, not defaults
    topic_id: str | None = None

    @property
    def partitions(self) -> int:
        return len(self.assignment)

    @property
    def replication_factor(self) -> int:
        return min((len(r) for r in self.assignment.values()), default=0)


@dataclass(frozen=True)
class Refusal:
    reason: str
    message: str


@dataclass(frozen=True)
class TopicPlan:
    create: Assignment | None = None
    add_partitions: Assignment | None = None
    config_set: Mapping[str, str] = field(default_factory=dict)
    config_delete: Sequence[str] = ()
    refusal: Refusal | None = None
    # Existing partitions whose replicas change (a replication-factor change).
    reassign: Assignment | None = None

    @property
    def in_sync(self) -> bool:
        return not (
            self.create
            or self.add_partitions
            or self.config_set
            or self.config_delete
            or self.refusal
            or self.reassign
        )


def plan_topic(
    desired: DesiredTopic,
    current: TopicState | None,
    brokers: Sequence[Broker],
    cluster_load: Load | None = None,
) -> TopicPlan:
    """What to do so the cluster matches the Topic's spec, or why it must not be done."""
    rf = desired.replication_factor
    if current is None:
        if rf > len(brokers):
            return TopicPlan(
                refusal=Refusal(
                    "ReplicationFactorTooLarge",
                    f"spec.replicationFactor {rf} exceeds the {len(brokers)} brokers "
                    "of the cluster",
                )
            )
        assignment = assign(brokers, desired.partitions, rf, cluster_load=cluster_load)
        return TopicPlan(create=assignment, config_set=dict(desired.config))
    if desired.partitions < current.partitions:
        return TopicPlan(
            refusal=Refusal(
                "PartitionDecrease",
                f"spec.partitions cannot go from {current.partitions} down to "
                f"{desired.partitions}: Kafka topics only grow",
            )
        )
    if rf > len(brokers):
        return TopicPlan(
            refusal=Refusal(
                "ReplicationFactorTooLarge",
                f"spec.replicationFactor {rf} exceeds the {len(brokers)} brokers of the cluster",
            )
        )
    reassign = change_replication_factor(current.assignment, rf, brokers, cluster_load) or None
    add = None
    if desired.partitions > current.partitions:
        add = assign(
            brokers,
            desired.partitions - current.partitions,
            rf,
            existing=current.assignment,
            cluster_load=cluster_load,
        )
    config_set = {k: v for k, v in desired.config.items() if current.config.get(k) != v}
    config_delete = sorted(k for k in current.config if k not in desired.config)
    return TopicPlan(
        add_partitions=add, config_set=config_set, config_delete=config_delete, reassign=reassign
    )


# -- day-2 rules ------------------------------------------------------------------------------


@dataclass(frozen=True)
class PartitionState:
    topic: str
    partition: int
    replicas: Sequence[int]
    isr: Sequence[int]
    leader: int | None
    min_insync_replicas: int = 1


def restart_blockers(broker_id: int, partitions: Iterable[PartitionState]) -> list[str]:
    """Why `broker_id` may not restart now: partitions that would fall below min ISR.

    Topics whose replication factor is at or below min.insync.replicas are skipped, or they
    would block every restart forever.
    """
    blockers = []
    for p in partitions:
        if broker_id not in p.replicas:
            continue
        rf, min_isr = len(p.replicas), p.min_insync_replicas
        if rf <= min_isr:
            continue
        if len(p.isr) < min_isr:
            blockers.append(f"{p.topic}-{p.partition} has {len(p.isr)} in sync, below {min_isr}")
        elif len(p.isr) == min_isr and broker_id in p.isr:
            blockers.append(
                f"{p.topic}-{p.partition} would fall below min.insync.replicas={min_isr}"
            )
    return blockers


def restart_order(broker_ids: Iterable[int], controller_id: int | None) -> list[int]:
    """Brokers in the order to restart them: by id, the active controller last."""
    ids = sorted(set(broker_ids))
    if controller_id in ids:
        ids.remove(controller_id)
        ids.append(controller_id)
    return ids


def brokers_to_restart(
    wanted_hashes: Mapping[int, str], running_hashes: Mapping[int, str | None]
) -> list[int]:
    """Brokers whose running config hash differs from the one their spec gives."""
    return sorted(b for b, h in wanted_hashes.items() if running_hashes.get(b) != h)


def leader_imbalance(partitions: Iterable[PartitionState]) -> dict[int, float]:
    """Per broker, the share of partitions it should lead (as preferred replica) but does not."""
    preferred: Counter[int] = Counter()
    not_leading: Counter[int] = Counter()
    for p in partitions:
        if not p.replicas:
            continue
        first = p.replicas[0]
        preferred[first] += 1
        if p.leader != first:
            not_leading[first] += 1
    return {b: not_leading[b] / n for b, n in preferred.items()}
