"""Leader election rules of Kafka's controller, as pure functions over replicas and ISR.

Each returns the new (leader, isr), or None when no replica may lead (the partition goes
offline).  The order of ``assignment`` is the preference order: its first replica is the
preferred leader.
"""

from __future__ import annotations

from collections.abc import Collection, Hashable, Mapping, Sequence
from typing import TypeVar

Election = tuple[int, tuple[int, ...]] | None

# A partition's key: the controller's TopicPartition, or any other hashable name.
P = TypeVar("P", bound=Hashable)


def offline_partition_leader(
    assignment: Sequence[int],
    isr: Sequence[int],
    live: Collection[int],
    unclean: bool,
) -> Election:
    """The first live replica in the ISR; with ``unclean``, else the first live replica
    (which may have lost acknowledged records: only when the topic allows it)."""
    live_isr = [r for r in isr if r in live]
    for r in assignment:
        if r in live_isr:
            return r, tuple(live_isr)
    if unclean:
        for r in assignment:
            if r in live:
                return r, (r,)
    return None


def reassignment_leader(
    target: Sequence[int], isr: Sequence[int], live: Collection[int]
) -> Election:
    """During a reassignment: the first replica of the target set that is live and in sync."""
    for r in target:
        if r in live and r in isr:
            return r, tuple(isr)
    return None


def preferred_leader(
    assignment: Sequence[int], isr: Sequence[int], live: Collection[int]
) -> Election:
    """The first replica of the assignment, if it is live and in sync."""
    if assignment and assignment[0] in live and assignment[0] in isr:
        return assignment[0], tuple(isr)
    return None


def controlled_shutdown_leader(
    assignment: Sequence[int],
    isr: Sequence[int],
    live: Collection[int],
    shutting_down: Collection[int],
) -> Election:
    """Move leadership off brokers that are shutting down, to a live in-sync replica."""
    new_isr = tuple(r for r in isr if r not in shutting_down)
    for r in assignment:
        if r in new_isr and r in live:
            return r, new_isr
    return None


def leader_imbalance(
    assignments: Mapping[P, Sequence[int]],
    leaders: Mapping[P, int],
) -> dict[int, float]:
    """Per broker: the share of the partitions it should lead (as preferred replica) that it
    does not lead. auto.leader.rebalance.enable compares this with
    leader.imbalance.per.broker.percentage."""
    preferred: dict[int, int] = {}
    not_led: dict[int, int] = {}
    for tp, replicas in assignments.items():
        if not replicas:
            continue
        broker = replicas[0]
        preferred[broker] = preferred.get(broker, 0) + 1
        if leaders.get(tp) != broker:
            not_led[broker] = not_led.get(broker, 0) + 1
    return {b: not_led.get(b, 0) / n for b, n in preferred.items()}
