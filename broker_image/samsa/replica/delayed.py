"""Delayed operations: fetches parked until data arrives or their wait runs out."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterable
from time import perf_counter

from samsa.metadata.model import TopicPartition


class DataWaiters:
    """Futures keyed by partition, completed (with the time) when that partition's log grows
    or its high watermark moves.

    A long-polling fetch registers one future on each partition it reads and waits for the
    first to complete; Kafka's DelayedFetch purgatory keyed the same way.
    """

    def __init__(self) -> None:
        self._waiters: dict[TopicPartition, list[asyncio.Future[float]]] = {}

    def watch(self, partitions: Iterable[TopicPartition]) -> asyncio.Future[float]:
        fut: asyncio.Future[float] = asyncio.get_running_loop().create_future()
        for tp in partitions:
            self._waiters.setdefault(tp, []).append(fut)
        return fut

    def notify(self, tp: TopicPartition) -> None:
        waiters = self._waiters.pop(tp, None)
        if waiters:
            at = perf_counter()
            for fut in waiters:
                if not fut.done():
                    fut.set_result(at)

    def forget(self, fut: asyncio.Future[float], partitions: Iterable[TopicPartition]) -> None:
        for tp in partitions:
            waiters = self._waiters.get(tp)
            if waiters is not None:
                with contextlib.suppress(ValueError):
                    waiters.remove(fut)
                if not waiters:
                    del self._waiters[tp]

    def notify_all(self) -> None:
        for tp in list(self._waiters):
            self.notify(tp)

    async def wait(self, partitions: list[TopicPartition], timeout_s: float) -> float | None:
        """When one of the partitions grew (perf_counter time), or None if none did in time."""
        if timeout_s <= 0:
            return None
        fut = self.watch(partitions)
        try:
            async with asyncio.timeout(timeout_s):
                return await asyncio.shield(fut)
        except TimeoutError:
            return None
        finally:
            self.forget(fut, partitions)
