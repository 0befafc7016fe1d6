"""Reassignment plans: balance after a scale-up, drain before a scale-down, RF changes."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from samsa_operator import rebalance, reconcile
from samsa_operator.reconcile import AssignmentError, Broker, Load

Assignments = dict[str, dict[int, list[int]]]


def applied(assignments: Assignments, plan: rebalance.Plan) -> Assignments:
    out = {t: dict(parts) for t, parts in assignments.items()}
    for (t, p), replicas in plan.items():
        out[t][p] = replicas
    return out


def counts(assignments: Assignments) -> tuple[Counter[int], Counter[int]]:
    replicas: Counter[int] = Counter()
    leaders: Counter[int] = Counter()
    for parts in assignments.values():
        for r in parts.values():
            replicas.update(r)
            leaders[r[0]] += 1
    return replicas, leaders


@st.composite
def clusters(draw: st.DrawFn) -> tuple[Assignments, int]:
    before = draw(st.integers(1, 6))
    after = draw(st.integers(1, 7))
    assignments: Assignments = {}
    for t in range(draw(st.integers(1, 3))):
        rf = draw(st.integers(1, min(before, after)))
        parts = draw(st.integers(1, 12))
        assignments[f"t{t}"] = {p: draw(st.permutations(range(before)))[:rf] for p in range(parts)}
    return assignments, after


@settings(max_examples=300, deadline=None)
@given(clusters())
def test_balance_moves_everything_onto_the_targets_evenly(case: tuple[Assignments, int]) -> None:
    assignments, n = case
    brokers = [Broker(i) for i in range(n)]
    plan = rebalance.balance(assignments, brokers)
    after = applied(assignments, plan)
    for t, parts in after.items():
        for p, replicas in parts.items():
            assert len(set(replicas)) == len(replicas) == len(assignments[t][p])
            assert set(replicas) <= set(range(n))
    replicas, leaders = counts(after)
    assert rebalance.spread(replicas, range(n)) <= 1
    assert rebalance.spread(leaders, range(n)) <= 1
    # Only changed partitions are in the plan, and a balanced cluster needs no plan.
    assert all(assignments[t][p] != r for (t, p), r in plan.items())
    assert rebalance.balance(after, brokers) == {}


def test_scale_up_moves_a_fair_share_and_no_more() -> None:
    brokers = [Broker(i) for i in range(3)]
    topic = {p: [p % 3, (p + 1) % 3, (p + 2) % 3] for p in range(6)}  # 18 replicas on 3
    plan = rebalance.balance({"t": topic}, [*brokers, Broker(3), Broker(4)])
    replicas, leaders = counts(applied({"t": topic}, plan))
    assert sorted(replicas.values()) == [3, 3, 4, 4, 4]
    assert sorted(leaders.values()) == [1, 1, 1, 1, 2]
    # The new brokers get 3 replicas each, and no other replica moves.
    moved = sum(len(set(r) - set(topic[p])) for (_, p), r in plan.items())
    assert moved == 6


def test_drain_empties_the_brokers_that_go() -> None:
    five = [Broker(i) for i in range(5)]
    start = {"t": {p: [p % 5, (p + 1) % 5, (p + 2) % 5] for p in range(10)}}
    assert rebalance.balance(start, five) == {}
    plan = rebalance.balance(start, five[:3])
    after = applied(start, plan)
    assert rebalance.hosted_on(after, [3, 4]) == []
    assert rebalance.hosted_on(start, [3, 4]) == [("t", p) for p in range(10) if p % 5]
    replicas, leaders = counts(after)
    assert sorted(replicas.values()) == [10, 10, 10]
    assert rebalance.spread(leaders, range(3)) <= 1


def test_drain_below_the_replication_factor_is_impossible() -> None:
    with pytest.raises(AssignmentError, match="more than the 2 brokers"):
        rebalance.balance({"t": {0: [0, 1, 2]}}, [Broker(0), Broker(1)])


def test_moves_keep_partitions_on_distinct_racks() -> None:
    brokers = [Broker(0, "a"), Broker(1, "b"), Broker(2, "a"), Broker(3, "b")]
    start = {"t": {p: [p % 2, (p + 1) % 2] for p in range(8)}}  # racks a and b, on 0 and 1
    after = applied(start, rebalance.balance(start, brokers))
    rack = {b.id: b.rack for b in brokers}
    for replicas in after["t"].values():
        assert {rack[r] for r in replicas} == {"a", "b"}
    replicas, _ = counts(after)
    assert rebalance.spread(replicas, range(4)) <= 1


def test_replication_factor_grows_on_the_idlest_brokers_and_keeps_leaders() -> None:
    brokers = [Broker(i) for i in range(4)]
    assignment = {0: [0], 1: [1], 2: [2], 3: [3]}
    grown = reconcile.change_replication_factor(assignment, 3, brokers)
    assert sorted(grown) == [0, 1, 2, 3]
    for p, replicas in grown.items():
        assert replicas[0] == assignment[p][0] and len(set(replicas)) == 3
    load = Load.of([grown])
    assert rebalance.spread(load.replicas, range(4)) == 0

    shrunk = reconcile.change_replication_factor(grown, 2, brokers)
    for p, replicas in shrunk.items():
        assert replicas[0] == assignment[p][0] and len(replicas) == 2
    assert rebalance.spread(Load.of([shrunk]).replicas, range(4)) == 0
    assert reconcile.change_replication_factor(grown, 3, brokers) == {}


def test_replication_factor_above_the_brokers_is_refused() -> None:
    with pytest.raises(AssignmentError):
        reconcile.change_replication_factor({0: [0]}, 3, [Broker(0), Broker(1)])
