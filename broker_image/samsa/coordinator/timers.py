"""Time for the group coordinator: reading the clock and running timers.

Every deadline in the coordinator (session timeouts, rebalance timeouts, the initial rebalance
delay, pending syncs, the offsets retention check) goes through a ``Clock`` so that tests can
drive time by hand and never sleep.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections.abc import Callable
from typing import Protocol

from samsa.wall_clock import wall_clock_ms


class TimerHandle(Protocol):
    """A scheduled callback that can be called off."""

    def cancel(self) -> None: ...


class Clock(Protocol):
    """Wall-clock milliseconds and one-shot timers."""

    def now_ms(self) -> int: ...

    def call_later(self, delay_ms: int, fn: Callable[[], None]) -> TimerHandle: ...


class AsyncioClock:
    """The real clock: the broker's wall clock for timestamps, the running event loop for timers.

    Timestamps are wall-clock because they are persisted (commit timestamps, the time a group
    became empty) and compared after a restart or on another broker.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop | None = None) -> None:
        self._loop = loop

    def now_ms(self) -> int:
        return wall_clock_ms()

    def call_later(self, delay_ms: int, fn: Callable[[], None]) -> TimerHandle:
        loop = self._loop or asyncio.get_running_loop()
        return loop.call_later(max(delay_ms, 0) / 1000.0, fn)


class _ManualTimer:
    __slots__ = ("cancelled", "deadline_ms", "fn")

    def __init__(self, deadline_ms: int, fn: Callable[[], None]) -> None:
        self.deadline_ms = deadline_ms
        self.fn = fn
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class ManualClock:
    """A clock that only moves when told to; timers fire in deadline order inside ``advance``."""

    def __init__(self, start_ms: int = 1_700_000_000_000) -> None:
        self._now = start_ms
        self._heap: list[tuple[int, int, _ManualTimer]] = []
        self._seq = itertools.count()

    def now_ms(self) -> int:
        return self._now

    def call_later(self, delay_ms: int, fn: Callable[[], None]) -> TimerHandle:
        timer = _ManualTimer(self._now + max(delay_ms, 0), fn)
        heapq.heappush(self._heap, (timer.deadline_ms, next(self._seq), timer))
        return timer

    def advance(self, delta_ms: int) -> None:
        """Move time forward, firing every timer that falls due, each at its own deadline."""
        target = self._now + delta_ms
        while self._heap and self._heap[0][0] <= target:
            deadline, _, timer = heapq.heappop(self._heap)
            if timer.cancelled:
                continue
            self._now = max(self._now, deadline)
            timer.fn()
        self._now = target

    def pending(self) -> int:
        """How many live timers are waiting."""
        return sum(1 for _, _, t in self._heap if not t.cancelled)

    def next_deadline_ms(self) -> int | None:
        live = [d for d, _, t in self._heap if not t.cancelled]
        return min(live) if live else None
