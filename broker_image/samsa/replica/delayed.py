"""Delayed operations: fetches parked until data arrives or their wait runs out.

Followers read to the log end and consumers only below the high watermark, so a follower's
parked fetch wakes when its partition is appended to, and a consumer's when the high watermark
moves (as Kafka's DelayedFetch completes on the bytes each can read): an append alone would
wake consumers of a replicated partition to find nothing yet, and the high watermark's every
step would wake followers that already have those records. A follower learns the high
watermark in the answer to its next fetch, as in Kafka since KAFKA-9731: answering it at once
cost every follower a round trip more per step of the high watermark.

read_committed consumers read below the last stable offset, which moves only when the high
watermark does (a marker's transaction holds it until the marker is below the high
watermark), so the same wake serves them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from time import perf_counter

from samsa.metadata.model import TopicPartition

Waiters = dict[TopicPartition, list[asyncio.Future[float | None]]]

# A partition's list of parked futures is cleared of ended waits when it grows to this.
_PRUNE_AT = 8


def _wake(waiters: Waiters, tp: TopicPartition) -> None:
    parked = waiters.pop(tp, None)
    if parked:
        at = perf_counter()
        for fut in parked:
            if not fut.done():
                fut.set_result(at)


def _run_out(fut: asyncio.Future[float | None]) -> None:
    if not fut.done():
        fut.set_result(None)


class DataWaiters:
    """Futures keyed by partition, completed with the time they were woken.

    A long-polling fetch registers one future on each partition it reads and waits for the
    first to complete; Kafka's DelayedFetch purgatory keyed the same way.
    """

    def __init__(self) -> None:
        self._followers: Waiters = {}
        self._consumers: Waiters = {}

    def watch(
        self, partitions: Iterable[TopicPartition], follower: bool = False
    ) -> asyncio.Future[float | None]:
        fut: asyncio.Future[float | None] = asyncio.get_running_loop().create_future()
        waiters = self._followers if follower else self._consumers
        for tp in partitions:
            parked = waiters.get(tp)
            if parked is None:
                waiters[tp] = [fut]
                continue
            if len(parked) >= _PRUNE_AT:
                # Futures of waits that ended stay until their partition wakes or here: taking
                # each out of every partition it watched, at the end of every wait, was a
                # tenth of a follower's fetch on a leader of many idle partitions.
                parked[:] = [f for f in parked if not f.done()]
            parked.append(fut)
        return fut

    def appended(self, tp: TopicPartition) -> None:
        """The leader's log grew: followers may read more."""
        _wake(self._followers, tp)

    def committed(self, tp: TopicPartition) -> None:
        """The high watermark moved: consumers may read more."""
        _wake(self._consumers, tp)

    def notify(self, tp: TopicPartition) -> None:
        """Anything changed (leadership, the log cut back or gone): every fetch looks again."""
        _wake(self._followers, tp)
        _wake(self._consumers, tp)

    def forget(self, fut: asyncio.Future[float | None]) -> None:
        """The wait of ``fut`` ended: it wakes nothing more, and goes from its partitions'
        lists when they wake or grow."""
        if not fut.done():
            fut.cancel()

    def notify_all(self) -> None:
        for tp in {*self._followers, *self._consumers}:
            self.notify(tp)

    async def wait(
        self,
        partitions: list[TopicPartition],
        timeout_s: float,
        follower: bool = False,
        watched: asyncio.Future[float | None] | None = None,
    ) -> float | None:
        """When one of the partitions had news for this kind of fetch (perf_counter time), or
        None if none did in time. ``watched``: the future of a ``watch`` made earlier, when the
        fetch read the partitions, so that news between that read and this wait counts."""
        fut = watched if watched is not None else self.watch(partitions, follower)
        # A timer ending the wait, not asyncio.timeout around asyncio.shield: those cost a
        # cancellation scope and a second future on every parked fetch. The future is this
        # fetch's own, so cancelling it with its task wakes nobody else.
        timer = (
            asyncio.get_running_loop().call_later(timeout_s, _run_out, fut)
            if timeout_s > 0
            else None
        )
        try:
            if timer is None:
                return fut.result() if fut.done() else None
            return await fut
        finally:
            if timer is not None:
                timer.cancel()
            self.forget(fut)
