"""The controller's decisions, as tables: new and offline partitions, admin elections, ISR
changes on failure, shutdown and AlterPartition, reassignment steps, broker registrations."""

from __future__ import annotations

import pytest

from samsa.controller.broker_liveness import (
    LivenessPolicy,
    Probe,
    ProbeTracker,
    Verdict,
    registration_changes,
)
from samsa.controller.partition_state_machine import (
    PREFERRED,
    UNCLEAN,
    Refused,
    admin_election,
    new_partition_state,
    offline_partition_change,
)
from samsa.controller.reassignment import (
    ReassignmentFinish,
    ReassignmentStart,
    reassignment_finish,
    reassignment_start,
    target_error,
)
from samsa.controller.replica_state_machine import (
    controlled_shutdown_changes,
    isr_proposal_decision,
    isr_removals,
)
from samsa.metadata.model import BrokerInfo, TopicPartition
from samsa.metadata.zk_data import NO_LEADER, LeaderIsrAndEpoch, RegisteredBroker
from samsa.protocol.errors import ErrorCode

TP = TopicPartition("t", 0)


def state(leader: int, isr: tuple[int, ...], epoch: int = 5, version: int = 7) -> LeaderIsrAndEpoch:
    return LeaderIsrAndEpoch(leader, epoch, isr, controller_epoch=1, zk_version=version)


@pytest.mark.parametrize(
    ("replicas", "live", "expected"),
    [
        ([0, 1, 2], {0, 1, 2}, (0, 0, (0, 1, 2))),
        ([0, 1, 2], {1, 2}, (1, 0, (1, 2))),
        ([2, 0], {0}, (0, 0, (0,))),
        ([0, 1], set(), (NO_LEADER, 0, (0, 1))),
    ],
)
def test_new_partition_state(replicas: list[int], live: set[int], expected: tuple) -> None:
    assert new_partition_state(replicas, live) == expected


@pytest.mark.parametrize(
    ("s", "replicas", "live", "unclean", "expected"),
    [
        # The leader lives: nothing to do.
        (state(0, (0, 1)), [0, 1], {0, 1}, False, None),
        # The first live in-sync replica, in assignment order, leads; the epoch moves on.
        (state(0, (0, 1, 2)), [0, 1, 2], {1, 2}, False, (1, 6, (1, 2))),
        (state(0, (0, 2)), [0, 1, 2], {1, 2}, False, (2, 6, (2,))),
        # No live in-sync replica: offline, the ISR kept (the last one in sync may return).
        (state(0, (0,)), [0, 1], {1}, False, (NO_LEADER, 6, (0,))),
        # Already offline: nothing to write.
        (state(NO_LEADER, (0,)), [0, 1], {1}, False, None),
        # Unclean: an out-of-sync live replica leads, alone in the ISR.
        (state(0, (0,)), [0, 1], {1}, True, (1, 6, (1,))),
        (state(NO_LEADER, (0,)), [0, 1], {1}, True, (1, 6, (1,))),
        # Nothing live at all, even unclean.
        (state(0, (0,)), [0, 1], set(), True, (NO_LEADER, 6, (0,))),
    ],
)
def test_offline_partition_change(
    s: LeaderIsrAndEpoch, replicas: list[int], live: set[int], unclean: bool, expected: object
) -> None:
    assert offline_partition_change(s, replicas, live, unclean) == expected


@pytest.mark.parametrize(
    ("kind", "s", "replicas", "live", "expected"),
    [
        (PREFERRED, state(1, (0, 1)), [0, 1], {0, 1}, (0, 6, (0, 1))),
        (PREFERRED, state(0, (0, 1)), [0, 1], {0, 1}, ErrorCode.election_not_needed),
        (PREFERRED, state(1, (1,)), [0, 1], {0, 1}, ErrorCode.preferred_leader_not_available),
        (PREFERRED, state(1, (0, 1)), [0, 1], {1}, ErrorCode.preferred_leader_not_available),
        (UNCLEAN, state(0, (0,)), [0, 1], {1}, (1, 6, (1,))),
        (UNCLEAN, state(0, (0,)), [0, 1], {0, 1}, ErrorCode.election_not_needed),
        (UNCLEAN, state(0, (0,)), [0, 1], set(), ErrorCode.eligible_leaders_not_available),
        (7, state(0, (0,)), [0, 1], {0, 1}, ErrorCode.invalid_request),
    ],
)
def test_admin_election(
    kind: int, s: LeaderIsrAndEpoch, replicas: list[int], live: set[int], expected: object
) -> None:
    decided = admin_election(kind, TP, s, replicas, live)
    if isinstance(decided, Refused):
        assert decided.error == expected
    else:
        assert decided == expected


@pytest.mark.parametrize(
    ("states", "live_leaders", "gone", "expected"),
    [
        # A dead follower leaves the ISR of a partition whose leader lives.
        ({TP: state(0, (0, 1, 2))}, {0, 1}, {2}, {TP: (0, 6, (0, 1))}),
        # Not in the ISR: nothing to write.
        ({TP: state(0, (0, 1))}, {0, 1}, {2}, {}),
        # The leader is gone: an election decides, not a shrink.
        ({TP: state(2, (0, 1, 2))}, {0, 1}, {2}, {}),
    ],
)
def test_isr_removals(states: dict, live_leaders: set[int], gone: set[int], expected: dict) -> None:
    assert isr_removals(states, live_leaders, gone) == expected


@pytest.mark.parametrize(
    ("s", "replicas", "expected"),
    [
        # Leader: leadership moves to the next in-sync replica, which it leaves.
        (state(0, (0, 1, 2)), [0, 1, 2], {TP: (1, 6, (1, 2))}),
        # Leader with no other in-sync replica: it stays (reported as remaining).
        (state(0, (0,)), [0, 1, 2], {}),
        # Follower in sync: leaves the ISR, the leader stays.
        (state(1, (0, 1)), [1, 0], {TP: (1, 6, (1,))}),
        # The only one in the ISR is never removed from it.
        (state(1, (1,)), [1, 0], {}),
        # A single replica: nowhere to move it.
        (state(0, (0,)), [0], {}),
        # Not a replica at all.
        (state(1, (1, 2)), [1, 2], {}),
    ],
)
def test_controlled_shutdown_changes(
    s: LeaderIsrAndEpoch, replicas: list[int], expected: dict
) -> None:
    assert controlled_shutdown_changes({TP: s}, {TP: replicas}, 0, {1, 2}, {0}) == expected


@pytest.mark.parametrize(
    ("proposer", "proposal", "s", "deleting", "expected"),
    [
        (0, (TP, 5, 7, (0, 1)), state(0, (0, 1, 2)), False, (0, 5, (0, 1))),
        (0, (TP, 5, 7, (0, 1, 2)), state(0, (0, 1)), False, (0, 5, (0, 1, 2))),
        (0, (TP, 5, 7, (1, 0)), state(0, (0, 1)), False, ErrorCode.none),
        (0, (TP, 5, 7, (0,)), None, False, ErrorCode.unknown_topic_or_partition),
        (0, (TP, 5, 7, (0,)), state(0, (0, 1)), True, ErrorCode.unknown_topic_or_partition),
        (1, (TP, 5, 7, (1,)), state(0, (0, 1)), False, ErrorCode.not_leader_or_follower),
        (0, (TP, 4, 7, (0,)), state(0, (0, 1)), False, ErrorCode.fenced_leader_epoch),
        (0, (TP, 5, 6, (0,)), state(0, (0, 1)), False, ErrorCode.invalid_update_version),
        (0, (TP, 5, 7, (1,)), state(0, (0, 1)), False, ErrorCode.invalid_request),
        (0, (TP, 5, 7, (0, 9)), state(0, (0, 1)), False, ErrorCode.invalid_request),
        # Broker 3 is a replica but not live (dead, fenced or shutting down): it may not join.
        (0, (TP, 5, 7, (0, 3)), state(0, (0,)), False, ErrorCode.ineligible_replica),
    ],
)
def test_isr_proposal_decision(
    proposer: int, proposal: tuple, s: LeaderIsrAndEpoch | None, deleting: bool, expected: object
) -> None:
    live = {0, 1, 2}
    assert isr_proposal_decision(proposer, proposal, s, [0, 1, 2, 3], live, deleting) == expected


@pytest.mark.parametrize(
    ("assignment", "adding", "in_progress", "target", "expected"),
    [
        ([0, 1], [], False, [0, 1], None),
        ([0, 1], [], False, [1, 2], ReassignmentStart((0, 1), (1, 2, 0), (2,), (0,))),
        ([0, 1], [], False, [2, 3], ReassignmentStart((0, 1), (2, 3, 0, 1), (2, 3), (0, 1))),
        # Replacing a reassignment in progress starts from the original replicas.
        ([2, 0, 1], [2], True, [3, 1], ReassignmentStart((0, 1), (3, 1, 0), (3,), (0,))),
        # Back to the original set while one is in progress: a reassignment that removes the
        # replicas being added.
        ([2, 0, 1], [2], True, [0, 1], ReassignmentStart((0, 1), (0, 1), (), ())),
    ],
)
def test_reassignment_start(
    assignment: list[int], adding: list[int], in_progress: bool, target: list[int], expected: object
) -> None:
    assert reassignment_start(assignment, adding, in_progress, target) == expected


@pytest.mark.parametrize(
    ("target", "s", "live", "expected"),
    [
        # A target replica not yet in sync: wait.
        ([1, 2], state(0, (0, 1)), {0, 1, 2}, None),
        # All in sync, the leader is in the target: keep it, drop the rest.
        ([1, 2], state(1, (0, 1, 2)), {0, 1, 2}, ReassignmentFinish(1, (1, 2), (0,))),
        # The leader leaves: the first live in-sync target replica takes over.
        ([2, 1], state(0, (0, 1, 2)), {0, 1, 2}, ReassignmentFinish(2, (1, 2), (0,))),
        ([2, 1], state(0, (0, 1, 2)), {0, 1}, ReassignmentFinish(1, (1, 2), (0,))),
        # No live target replica may lead: wait.
        ([2], state(0, (0, 2)), {0}, None),
    ],
)
def test_reassignment_finish(
    target: list[int], s: LeaderIsrAndEpoch, live: set[int], expected: object
) -> None:
    assert reassignment_finish(target, [0, 1, 2], s, live) == expected


@pytest.mark.parametrize(
    ("target", "expected"),
    [
        ([0, 1], None),
        ([], ErrorCode.invalid_replica_assignment),
        ([0, 0], ErrorCode.invalid_replica_assignment),
        ([0, 5], ErrorCode.invalid_replica_assignment),
    ],
)
def test_reassignment_target_error(target: list[int], expected: ErrorCode | None) -> None:
    refused = target_error(TP, target, {0, 1, 2})
    assert (refused[0] if refused else None) == expected


def reg(broker_id: int, epoch: int) -> RegisteredBroker:
    return RegisteredBroker(BrokerInfo(broker_id, "127.0.0.1", 9092 + broker_id), epoch)


@pytest.mark.parametrize(
    ("known", "current", "expected"),
    [
        ({0: 10, 1: 11}, {0: 10, 1: 11}, (set(), set())),
        ({0: 10, 1: 11}, {0: 10}, ({1}, set())),
        ({0: 10}, {0: 10, 1: 11}, (set(), {1})),
        # Registered anew (a new czxid): the old one died, a new one was born.
        ({0: 10, 1: 11}, {0: 10, 1: 12}, ({1}, {1})),
    ],
)
def test_registration_changes(
    known: dict[int, int], current: dict[int, int], expected: tuple
) -> None:
    k = {b: reg(b, e) for b, e in known.items()}
    c = {b: reg(b, e) for b, e in current.items()}
    assert registration_changes(k, c) == expected


@pytest.mark.parametrize(
    ("known", "current", "fenced", "expected"),
    [
        # Fenced while still registered: not new again while that registration lasts...
        ({0: 10}, {0: 10, 1: 11}, {1: 11}, (set(), set())),
        # ...but new once it registers anew.
        ({0: 10}, {0: 10, 1: 12}, {1: 11}, (set(), {1})),
    ],
)
def test_registration_changes_of_fenced_brokers(
    known: dict[int, int], current: dict[int, int], fenced: dict[int, int], expected: tuple
) -> None:
    k = {b: reg(b, e) for b, e in known.items()}
    c = {b: reg(b, e) for b, e in current.items()}
    assert registration_changes(k, c, fenced) == expected


A, L, S = Probe.ANSWERED, Probe.LOST, Probe.SLOW


@pytest.mark.parametrize(
    ("probes", "expected"),
    [
        ([A, A], Verdict.LIVE),
        # Connection lost: suspect at once, dead after three losses in a row.
        ([L], Verdict.SUSPECT),
        ([L, L], Verdict.SUSPECT),
        ([L, L, L], Verdict.DEAD),
        # An answer clears the suspicion and the count.
        ([L, L, A, L, L], Verdict.SUSPECT),
        # Slow probes (a paused or busy broker) never make it dead, however many.
        ([S] * 50, Verdict.LIVE),
        ([L] + [S] * 50, Verdict.SUSPECT),
        # Slow probes between losses neither clear nor add to them.
        ([L, S, L, S, L], Verdict.DEAD),
        # Dead stays dead through more losses and slow probes...
        ([L, L, L, L, S, L], Verdict.DEAD),
        # ...until it answers again (cut off, not crashed).
        ([L, L, L, A], Verdict.LIVE),
    ],
)
def test_probe_tracker_verdicts(probes: list[Probe], expected: Verdict) -> None:
    tracker = ProbeTracker(LivenessPolicy(confirm_probes=3, confirm_within_s=2.0))
    for i, probe in enumerate(probes):
        verdict = tracker.observe(probe, now=i * 0.1)
    assert verdict == expected


def test_losses_spread_beyond_the_window_start_the_count_again() -> None:
    tracker = ProbeTracker(LivenessPolicy(confirm_probes=3, confirm_within_s=2.0))
    assert tracker.observe(L, 0.0) == Verdict.SUSPECT
    assert tracker.observe(L, 1.0) == Verdict.SUSPECT
    assert tracker.observe(L, 2.5) == Verdict.SUSPECT  # a new window: one loss in it
    assert tracker.observe(L, 2.6) == Verdict.SUSPECT
    assert tracker.observe(L, 2.7) == Verdict.DEAD
