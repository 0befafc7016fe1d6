"""Parked fetches: a follower's wakes when the log grows, a consumer's when the high watermark
moves, and both when anything else changes (leadership, truncation)."""

from __future__ import annotations

from samsa.metadata.model import TopicPartition
from samsa.replica.delayed import DataWaiters

TP = TopicPartition("t", 0)
OTHER = TopicPartition("t", 1)


async def test_an_append_wakes_followers_only() -> None:
    waiters = DataWaiters()
    follower = waiters.watch([TP, OTHER], follower=True)
    consumer = waiters.watch([TP, OTHER])
    waiters.appended(TP)
    assert follower.done() and follower.result() > 0
    assert not consumer.done()
    waiters.committed(TP)
    assert consumer.done()


async def test_the_high_watermark_wakes_consumers_only() -> None:
    waiters = DataWaiters()
    follower = waiters.watch([TP], follower=True)
    consumer = waiters.watch([TP])
    waiters.committed(TP)
    assert consumer.done() and not follower.done()
    waiters.committed(OTHER)
    waiters.appended(OTHER)
    assert not follower.done()


async def test_a_change_of_any_other_kind_wakes_both() -> None:
    waiters = DataWaiters()
    follower = waiters.watch([TP], follower=True)
    consumer = waiters.watch([TP])
    waiters.notify(TP)
    assert follower.done() and consumer.done()
    late = waiters.watch([OTHER], follower=True)
    waiters.notify_all()
    assert late.done()


async def test_a_forgotten_fetch_is_not_woken() -> None:
    waiters = DataWaiters()
    consumer = waiters.watch([TP])
    waiters.forget(consumer)
    waiters.committed(TP)
    assert consumer.cancelled()


async def test_ended_waits_on_an_idle_partition_do_not_pile_up() -> None:
    """A follower's fetches watch every partition of its session, most of them idle: what
    the ended waits leave behind is cleared as the lists grow, and the live waits stay."""
    waiters = DataWaiters()
    live = waiters.watch([TP], follower=True)
    for _ in range(1000):
        ended = waiters.watch([TP, OTHER], follower=True)
        waiters.appended(OTHER)
        assert ended.done()
    assert len(waiters._followers[TP]) <= 9
    waiters.appended(TP)
    assert live.done()


async def test_wait_answers_with_the_wake_time_or_none() -> None:
    waiters = DataWaiters()
    assert await waiters.wait([TP], 0) is None
    assert await waiters.wait([TP], 0.01) is None  # nothing happens: the wait runs out
