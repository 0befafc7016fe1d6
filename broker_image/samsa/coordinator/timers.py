"""Time for the group and transaction coordinators: reading the clock and running timers.

Every deadline in the coordinators (session timeouts, rebalance timeouts, the initial rebalance
delay, pending syncs, the offsets retention check, transaction timeouts) goes through a
``Clock``: the broker runs ``AsyncioClock``, and tests drive time by hand with a clock of their
own and never sleep.
"""

from __future__ import annotations

import asyncio
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
