"""Fetch sessions (KIP-227): the leader's cache of sessions and what an incremental answer
carries, and the follower's plan of each request."""

from __future__ import annotations

import itertools

import pytest

from samsa.metadata.model import TopicPartition
from samsa.protocol.errors import ErrorCode
from samsa.replica.fetch_session import (
    FINAL_EPOCH,
    INITIAL_EPOCH,
    FetchSessionCache,
    FetchSessionError,
    FetchSessionHandler,
)

A, B, C = (TopicPartition("t", p) for p in range(3))


def cache(slots: int = 10) -> FetchSessionCache[int]:
    ids = itertools.count(100)
    return FetchSessionCache(slots, lambda: next(ids))


def test_epoch_zero_opens_a_session_and_each_fetch_carries_the_next_epoch() -> None:
    sessions = cache()
    session, incremental = sessions.context(0, INITIAL_EPOCH, replica_id=1)
    assert session is not None and session.id == 100 and not incremental
    for epoch in (1, 2, 3):
        again, incremental = sessions.context(100, epoch, replica_id=1)
        assert again is session and incremental


@pytest.mark.parametrize(
    ("session_id", "epoch", "replica_id", "code"),
    [
        (100, 2, 1, ErrorCode.invalid_fetch_session_epoch),  # out of step
        (100, 0 + 5, 1, ErrorCode.invalid_fetch_session_epoch),
        (999, 1, 1, ErrorCode.fetch_session_id_not_found),  # never opened
        (100, 1, 2, ErrorCode.fetch_session_id_not_found),  # another follower's
        (0, 1, 1, ErrorCode.fetch_session_id_not_found),  # an incremental fetch of no session
    ],
)
def test_a_session_unknown_or_out_of_step_is_refused(
    session_id: int, epoch: int, replica_id: int, code: ErrorCode
) -> None:
    sessions = cache()
    sessions.context(0, INITIAL_EPOCH, replica_id=1)
    with pytest.raises(FetchSessionError) as refused:
        sessions.context(session_id, epoch, replica_id)
    assert refused.value.code is code


def test_the_final_epoch_closes_the_session_and_fetches_without_one() -> None:
    sessions = cache()
    sessions.context(0, INITIAL_EPOCH, replica_id=1)
    assert sessions.context(100, FINAL_EPOCH, replica_id=1) == (None, False)
    assert len(sessions) == 0
    with pytest.raises(FetchSessionError):
        sessions.context(100, 1, replica_id=1)


def test_full_slots_evict_the_least_recently_used_session() -> None:
    sessions = cache(slots=2)
    sessions.context(0, INITIAL_EPOCH, replica_id=1)  # 100
    sessions.context(0, INITIAL_EPOCH, replica_id=2)  # 101
    sessions.context(100, 1, replica_id=1)  # 100 used since
    sessions.context(0, INITIAL_EPOCH, replica_id=3)  # 102 evicts 101
    assert len(sessions) == 2
    sessions.context(100, 2, replica_id=1)
    with pytest.raises(FetchSessionError):
        sessions.context(101, 1, replica_id=2)


def test_no_slots_no_session() -> None:
    assert cache(slots=0).context(0, INITIAL_EPOCH, replica_id=1) == (None, False)


def test_an_incremental_answer_carries_only_partitions_with_news() -> None:
    session, _ = cache().context(0, INITIAL_EPOCH, replica_id=1)
    assert session is not None
    # The first answer tells the follower everything.
    assert session.must_answer(A, 0, False, 10, 10, 0)
    assert not session.must_answer(A, 0, False, 10, 10, 0)
    assert session.must_answer(A, 0, True, 10, 10, 0)  # records
    assert session.must_answer(A, 0, False, 11, 10, 0)  # high watermark
    assert session.must_answer(A, 0, False, 11, 11, 0)  # last stable offset
    assert session.must_answer(A, 0, False, 11, 11, 5)  # log start offset
    assert session.must_answer(A, 6, False, 11, 11, 5)  # an error, every time
    assert session.must_answer(A, 6, False, 11, 11, 5)
    assert not session.must_answer(A, 0, False, 11, 11, 5)


def test_a_forgotten_partition_is_told_everything_when_it_comes_back() -> None:
    session, _ = cache().context(0, INITIAL_EPOCH, replica_id=1)
    assert session is not None
    session.update([(A, 1), (B, 2)], ())
    session.must_answer(A, 0, False, 10, 10, 0)
    session.update((), [A])
    assert list(session.fetches) == [B]
    session.update([(A, 3)], ())
    assert session.fetches == {B: 2, A: 3}
    assert session.must_answer(A, 0, False, 10, 10, 0)


def test_the_follower_sends_everything_first_then_only_what_changed() -> None:
    handler: FetchSessionHandler[int] = FetchSessionHandler()
    first = handler.plan([(A, 1), (B, 1), (C, 1)])
    assert (first.session_id, first.epoch) == (0, INITIAL_EPOCH)
    assert first.send == [(A, 1), (B, 1), (C, 1)] and first.forgotten == []
    handler.answered(42)
    second = handler.plan([(A, 2), (B, 1), (C, 1)])
    assert (second.session_id, second.epoch) == (42, 1)
    assert second.send == [(A, 2)] and second.forgotten == []
    handler.answered(42)
    third = handler.plan([(A, 2), (C, 1)])
    assert (third.session_id, third.epoch) == (42, 2)
    assert third.send == [] and third.forgotten == [B]
    handler.answered(42)
    fourth = handler.plan([(A, 2), (B, 1), (C, 1)])
    assert fourth.send == [(B, 1)] and fourth.epoch == 3


def test_a_lost_request_or_a_declined_session_means_full_fetches() -> None:
    handler: FetchSessionHandler[int] = FetchSessionHandler()
    handler.plan([(A, 1)])
    handler.answered(0)  # the leader keeps no session for this follower
    again = handler.plan([(A, 2)])
    assert (again.session_id, again.epoch, again.send) == (0, INITIAL_EPOCH, [(A, 2)])
    handler.answered(7)
    handler.plan([(A, 3)])
    handler.failed()  # timed out: the leader may or may not have taken it
    after = handler.plan([(A, 3), (B, 1)])
    assert (after.session_id, after.epoch, after.send) == (0, INITIAL_EPOCH, [(A, 3), (B, 1)])


def test_leader_and_follower_agree_on_what_the_session_holds() -> None:
    """Driven together through adds, changes and drops, the leader's session holds exactly
    the fetches the follower wants after each answered request."""
    sessions = cache()
    handler: FetchSessionHandler[int] = FetchSessionHandler()
    steps = [
        [(A, 1), (B, 1)],
        [(A, 2), (B, 1), (C, 1)],
        [(C, 2)],
        [(A, 3), (C, 2)],
        [(A, 3), (B, 4), (C, 2)],
    ]
    for wanted in steps:
        plan = handler.plan(wanted)
        session, incremental = sessions.context(plan.session_id, plan.epoch, replica_id=1)
        assert session is not None
        if not incremental:
            session.fetches.clear()
        session.update(plan.send, plan.forgotten)
        handler.answered(session.id)
        assert session.fetches == dict(wanted)


def test_a_partition_answered_with_an_error_is_named_again() -> None:
    """The leader keeps a partition of a topic it does not know yet out of the session; the
    follower, backing off, must name it again rather than believe the session holds it."""
    handler: FetchSessionHandler[int] = FetchSessionHandler()
    handler.plan([(A, 0)])
    handler.answered(9)
    handler.resend(A)
    again = handler.plan([(A, 0)])
    assert (again.session_id, again.send, again.forgotten) == (9, [(A, 0)], [])


def test_a_partition_backing_off_after_an_error_is_forgotten_until_wanted_again() -> None:
    """The leader keeps a partition whose read failed (it no longer leads it, a fenced epoch)
    in the session, and answers its error at once on every fetch. The follower backs that
    partition off: its next requests must forget it, or the leader answers every one of them
    at once and the follower spins (an idle cluster served about a thousand fetches a second
    after a leader moved)."""
    handler: FetchSessionHandler[int] = FetchSessionHandler()
    handler.plan([(A, 0), (B, 0)])
    handler.answered(9)
    handler.plan([(A, 0), (B, 0)])
    handler.answered(9)
    handler.resend(A)  # answered with NOT_LEADER_OR_FOLLOWER: backs off, not wanted now
    backing_off = handler.plan([(B, 0)])
    assert (backing_off.send, backing_off.forgotten) == ([], [A])
    handler.answered(9)
    back = handler.plan([(A, 0), (B, 0)])
    assert (back.send, back.forgotten) == ([(A, 0)], [])


def test_a_partition_answered_though_no_longer_fetched_is_forgotten() -> None:
    handler: FetchSessionHandler[int] = FetchSessionHandler()
    handler.plan([(A, 0), (B, 0)])
    handler.answered(9)
    handler.plan([(A, 0)])  # B moved to another leader's fetcher meanwhile
    handler.answered(9)
    handler.resend(B)  # yet the leader answered it (it held B from before)
    assert handler.plan([(A, 0)]).forgotten == [B]


def test_leader_and_follower_agree_through_errors_and_moves() -> None:
    """Driven together, with partitions answered with errors, backing off and moving away,
    the leader's session holds exactly what the follower wants after each answered request."""
    sessions = cache()
    handler: FetchSessionHandler[int] = FetchSessionHandler()
    steps: list[tuple[list[tuple[TopicPartition, int]], list[TopicPartition]]] = [
        ([(A, 1), (B, 1), (C, 1)], []),
        ([(A, 1), (B, 1), (C, 1)], [B]),  # B answered with an error
        ([(A, 1), (C, 1)], []),  # B backs off
        ([(A, 1), (C, 1)], [C]),  # C errors, then moves to another leader
        ([(A, 2)], []),
        ([(A, 2), (B, 1)], []),  # B is wanted again
    ]
    for wanted, errored in steps:
        plan = handler.plan(wanted)
        session, incremental = sessions.context(plan.session_id, plan.epoch, replica_id=1)
        assert session is not None
        if not incremental:
            session.fetches.clear()
        session.update(plan.send, plan.forgotten)
        handler.answered(session.id)
        assert session.fetches == dict(wanted)
        for tp in errored:
            handler.resend(tp)
