"""A clock for the coordinators' tests that only moves when told to: ``ManualClock`` is a
``samsa.coordinator.timers.Clock`` whose timers fire inside ``advance``, so no test sleeps."""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable

from samsa.coordinator.timers import TimerHandle


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
