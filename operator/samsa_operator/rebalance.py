"""Pure reassignment plans, no I/O: balance replicas and preferred leaders over a set of
brokers (after a scale-up), and move every replica off the brokers that go (the drain before
a scale-down). A topic's replication-factor change is planned in `reconcile`.

A plan moves as little as it can. Replicas leave brokers outside the target set first; then
one replica at a time moves from the busiest broker to the idlest until their counts differ
by at most one; then preferred leaders (each partition's first replica) are evened out, by
reordering a partition's replicas where that suffices (no data moves). Ties go to the topic
whose own spread is worst, so topics stay balanced too, and a move never reduces the number
of racks a partition spans.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Mapping, Sequence

from samsa_operator.reconcile import AssignmentError, Broker

TopicPartition = tuple[str, int]
# topic -> partition -> replicas (the preferred leader first)
Assignments = Mapping[str, Mapping[int, Sequence[int]]]
# (topic, partition) -> the new replicas, for the partitions that change only
Plan = dict[TopicPartition, list[int]]


class _State:
    """Replica and preferred-leader counts, kept up to date as replicas move."""

    def __init__(self, assignments: Assignments, brokers: Sequence[Broker]) -> None:
        self.replicas: dict[TopicPartition, list[int]] = {
            (t, p): list(r) for t, parts in assignments.items() for p, r in parts.items()
        }
        self.targets = sorted(b.id for b in brokers)
        self.rack = {b.id: b.rack for b in brokers}
        self.count: Counter[int] = Counter({b: 0 for b in self.targets})
        self.leads: Counter[int] = Counter({b: 0 for b in self.targets})
        self.topic_count: defaultdict[str, Counter[int]] = defaultdict(Counter)
        self.topic_leads: defaultdict[str, Counter[int]] = defaultdict(Counter)
        for (t, _), replicas in self.replicas.items():
            self._tally(t, replicas, +1)

    def _tally(self, topic: str, replicas: Sequence[int], sign: int) -> None:
        for r in replicas:
            self.count[r] += sign
            self.topic_count[topic][r] += sign
        if replicas:
            self.leads[replicas[0]] += sign
            self.topic_leads[topic][replicas[0]] += sign

    def set(self, tp: TopicPartition, replicas: list[int]) -> None:
        self._tally(tp[0], self.replicas[tp], -1)
        self.replicas[tp] = replicas
        self._tally(tp[0], replicas, +1)

    def racks(self, replicas: Sequence[int]) -> int:
        known = [self.rack.get(r) for r in replicas]
        return len({r for r in known if r is not None})

    def keeps_racks(self, before: Sequence[int], after: Sequence[int]) -> bool:
        return self.racks(after) >= min(self.racks(before), len(after))


def balance(assignments: Assignments, brokers: Sequence[Broker]) -> Plan:
    """The partitions to move so every replica is on `brokers`, and replicas and preferred
    leaders per broker differ by at most one (cluster-wide)."""
    state = _State(assignments, brokers)
    original = {tp: list(r) for tp, r in state.replicas.items()}
    _evacuate(state)
    _even_replicas(state)
    _even_leaders(state)
    return {tp: r for tp, r in sorted(state.replicas.items()) if r != original[tp]}


def _evacuate(state: _State) -> None:
    targets = set(state.targets)
    for tp in sorted(state.replicas):
        for i, r in enumerate(list(state.replicas[tp])):
            if r in targets:
                continue
            current = state.replicas[tp]
            others = [x for x in current if x != r]
            candidates = [b for b in state.targets if b not in current]
            if not candidates:
                raise AssignmentError(
                    f"{tp[0]}-{tp[1]} has {len(current)} replicas, more than the "
                    f"{len(state.targets)} brokers it may stay on"
                )
            used = {state.rack.get(x) for x in others}
            best = min(
                candidates,
                key=lambda b: (
                    state.rack.get(b) is not None and state.rack.get(b) in used,
                    state.topic_count[tp[0]][b],
                    state.count[b],
                    b,
                ),
            )
            new = list(current)
            new[i] = best
            state.set(tp, new)


def _even_replicas(state: _State) -> None:
    while True:
        move = _replica_move(state)
        if move is None:
            return
        tp, new = move
        state.set(tp, new)


def _replica_move(state: _State) -> tuple[TopicPartition, list[int]] | None:
    """One replica from a busier broker to an idler one (two apart at least)."""
    by_load = sorted(state.targets, key=lambda b: (state.count[b], b))
    for hi in reversed(by_load):
        for lo in by_load:
            if state.count[hi] - state.count[lo] <= 1:
                break
            best: tuple[tuple[int, int, TopicPartition], TopicPartition, list[int]] | None = None
            for tp, replicas in state.replicas.items():
                if hi not in replicas or lo in replicas:
                    continue
                new = [lo if r == hi else r for r in replicas]
                if not state.keeps_racks(replicas, new):
                    continue
                tc = state.topic_count[tp[0]]
                # The topic that gains most from the move, and a follower before a leader.
                key = (-(tc[hi] - tc[lo]), int(replicas[0] == hi), tp)
                if best is None or key < best[0]:
                    best = (key, tp, new)
            if best is not None:
                return best[1], best[2]
    return None


def _even_leaders(state: _State) -> None:
    # Each move lowers the sum of squared leader counts, so this ends; the cap is a guard.
    for _ in range(10 * len(state.replicas) + 10):
        move = _leader_move(state)
        if move is None:
            return
        for tp, new in move:
            state.set(tp, new)


def _leader_move(state: _State) -> list[tuple[TopicPartition, list[int]]] | None:
    by_leads = sorted(state.targets, key=lambda b: (state.leads[b], b))
    for hi in reversed(by_leads):
        for lo in by_leads:
            if state.leads[hi] - state.leads[lo] <= 1:
                break
            move = _reorder(state, hi, lo) or _exchange(state, hi, lo)
            if move:
                return move
    return None


def _reorder(state: _State, hi: int, lo: int) -> list[tuple[TopicPartition, list[int]]] | None:
    """A partition led by `hi` that has `lo` as a follower: make `lo` its preferred leader."""

    def key(tp: TopicPartition) -> tuple[int, TopicPartition]:
        tl = state.topic_leads[tp[0]]
        return (-(tl[hi] - tl[lo]), tp)

    found = _best(state, key, lambda r: r[0] == hi and lo in r)
    if found is None:
        return None
    replicas = state.replicas[found]
    j = replicas.index(lo)
    new = list(replicas)
    new[0], new[j] = lo, hi
    return [(found, new)]


def _exchange(state: _State, hi: int, lo: int) -> list[tuple[TopicPartition, list[int]]] | None:
    """`lo` takes `hi`'s place as leader of one partition, and `hi` takes `lo`'s place as a
    follower of another: leaders move, replica counts stay."""
    for p in sorted(tp for tp, r in state.replicas.items() if r[0] == hi and lo not in r):
        lead = state.replicas[p]
        new_lead = [lo, *lead[1:]]
        if not state.keeps_racks(lead, new_lead):
            continue
        for q in sorted(tp for tp, r in state.replicas.items() if lo in r[1:] and hi not in r):
            if q == p:
                continue
            follow = state.replicas[q]
            new_follow = [hi if r == lo else r for r in follow]
            if state.keeps_racks(follow, new_follow):
                return [(p, new_lead), (q, new_follow)]
    return None


def _best(
    state: _State,
    key: Callable[[TopicPartition], tuple[int, TopicPartition]],
    wanted: Callable[[list[int]], bool],
) -> TopicPartition | None:
    found = [tp for tp, r in state.replicas.items() if r and wanted(r)]
    return min(found, key=key) if found else None


def hosted_on(assignments: Assignments, brokers: Sequence[int]) -> list[TopicPartition]:
    """The partitions with a replica on any of `brokers`."""
    gone = set(brokers)
    return sorted(
        (t, p) for t, parts in assignments.items() for p, r in parts.items() if gone & set(r)
    )


def spread(counts: Mapping[int, int], brokers: Sequence[int]) -> int:
    """Largest minus smallest count over `brokers` (absent brokers count zero)."""
    values = [counts.get(b, 0) for b in brokers]
    return max(values) - min(values) if values else 0
