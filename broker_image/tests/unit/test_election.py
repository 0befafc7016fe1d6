"""Kafka's leader election rules, as the controller applies them."""

from __future__ import annotations

from samsa.controller.election import (
    controlled_shutdown_leader,
    leader_imbalance,
    offline_partition_leader,
    preferred_leader,
    reassignment_leader,
)


def test_offline_partition_leader_is_the_first_live_in_sync_replica() -> None:
    assert offline_partition_leader([0, 1, 2], [1, 2], {1, 2}, unclean=False) == (1, (1, 2))
    assert offline_partition_leader([2, 1, 0], [0, 1], {0, 1}, unclean=False) == (1, (0, 1))


def test_a_replica_out_of_sync_leads_only_when_unclean_election_is_allowed() -> None:
    # The ISR's only member is dead; broker 1 lives but may lack acknowledged records.
    assert offline_partition_leader([0, 1], [0], {1}, unclean=False) is None
    assert offline_partition_leader([0, 1], [0], {1}, unclean=True) == (1, (1,))
    assert offline_partition_leader([0, 1], [0], set(), unclean=True) is None


def test_reassignment_leader_comes_from_the_target_replicas() -> None:
    assert reassignment_leader([3, 1], [0, 1, 3], {0, 1, 3}) == (3, (0, 1, 3))
    assert reassignment_leader([3, 1], [0, 1], {0, 1, 3}) == (1, (0, 1))
    assert reassignment_leader([3], [0, 1], {0, 1, 3}) is None


def test_preferred_leader_only_when_it_is_live_and_in_sync() -> None:
    assert preferred_leader([2, 0, 1], [0, 1, 2], {0, 1, 2}) == (2, (0, 1, 2))
    assert preferred_leader([2, 0, 1], [0, 1], {0, 1, 2}) is None
    assert preferred_leader([2, 0, 1], [0, 1, 2], {0, 1}) is None


def test_controlled_shutdown_moves_leadership_and_drops_the_broker_from_the_isr() -> None:
    assert controlled_shutdown_leader([0, 1, 2], [0, 1, 2], {0, 1, 2}, {0}) == (1, (1, 2))
    assert controlled_shutdown_leader([0, 1], [0], {0, 1}, {0}) is None


def test_leader_imbalance_is_the_share_of_preferred_leaderships_lost() -> None:
    assignments = {("t", p): [p % 3, (p + 1) % 3] for p in range(6)}
    leaders = {("t", p): p % 3 for p in range(6)}
    assert leader_imbalance(assignments, leaders) == {0: 0.0, 1: 0.0, 2: 0.0}
    leaders[("t", 0)] = 1
    assert leader_imbalance(assignments, leaders) == {0: 0.5, 1: 0.0, 2: 0.0}
