"""Delayed operations: fetches parked until data arrives or their wait runs out."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterable

from samsa.metadata.model import TopicPartition


class DataWaiters:
    """Futures keyed by partition, completed when that partition's log grows.

    A long-polling fetch registers one future on each partition it reads and waits for the
    first to complete; Kafka's DelayedFetch purgatory keyed the same way.
    """

    def __init__(self) -> None:
        self._waiters: dict[TopicPartition, list[asyncio.Future[None]]] = {}

    def watch(self, partitions: Iterable[TopicPartition]) -> asyncio.Future[None]:
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        for tp in partitions:
            self._waiters.setdefault(tp, []).append(fut)
        return fut

    def notify(self, tp: TopicPartition) -> None:
        waiters = self._waiters.pop(tp, None)
        if waiters:
            for fut in waiters:
                if not fut.done():
                    fut.set_result(None)

    def forget(self, fut: asyncio.Future[None], partitions: Iterable[TopicPartition]) -> None:
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

    async def wait(self, partitions: list[TopicPartition], timeout_s: float) -> bool:
        """True if one of the partitions grew before the timeout."""
        if timeout_s <= 0:
            return False
        fut = self.watch(partitions)
        try:
            async with asyncio.timeout(timeout_s):
                await asyncio.shield(fut)
            return True
        except TimeoutError:
            return False
        finally:
            self.forget(fut, partitions)
