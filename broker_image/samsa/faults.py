"""Fault injection: the hooks through which a fault campaign or a test breaks a broker on purpose.

Every hook is off unless its environment variable is set (to something non-empty), and a
disabled hook costs the broker one cheap check. Production code calls in here in one line;
nothing else in samsa reads these variables, so this module is the whole list:

- ``SAMSA_CLOCK_OFFSET_FILE``: :func:`clock_offset_ms` steps this broker's wall clock;
- ``SAMSA_TEST_CLEANER_CRASH_POINT``: :func:`cleaner_crash_hook` has the broker SIGKILL itself
  at a named point of a log clean.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from collections.abc import Callable

log = logging.getLogger(__name__)

CLOCK_OFFSET_FILE_ENV = "SAMSA_CLOCK_OFFSET_FILE"
CLEANER_CRASH_POINT_ENV = "SAMSA_TEST_CLEANER_CRASH_POINT"
ENV_VARS = (CLOCK_OFFSET_FILE_ENV, CLEANER_CRASH_POINT_ENV)

# Where a test may have the broker kill itself: writing a .cleaned segment, after writing
# it, after committing the swap (.swap), after deleting the first replaced segment, and
# after the swap is complete (the names the cleaner and samsa.log.swap call their hook with).
CLEANER_CRASH_POINTS = ("cleaning", "cleaned", "swap", "deleting", "swapped")

REREAD_S = 0.1

_monotonic = time.monotonic
_time_ns = time.time_ns


def active() -> dict[str, str]:
    """The hooks switched on in this process: their variables and values (empty: none)."""
    return {name: value for name in ENV_VARS if (value := os.environ.get(name, ""))}


# -- the clock step ------------------------------------------------------------------------


class OffsetClock:
    """System time plus the offset in a file, re-read at most every ``reread_s`` seconds.

    ``path`` None: the file is the one ``SAMSA_CLOCK_OFFSET_FILE`` names when re-read."""

    def __init__(self, path: str | None = None, reread_s: float = REREAD_S) -> None:
        self._path = path
        self._reread_s = reread_s
        self._next_read = float("-inf")
        self._offset_ms = 0
        # The broker's loop, its cleaner thread and an in-process test share this clock: one
        # re-read at a time, so a read begun before a step cannot land after a newer one.
        self._rereading = threading.Lock()

    @property
    def offset_ms(self) -> int:
        # On every append's path: the re-read check is one monotonic read.
        if _monotonic() >= self._next_read:
            self._reread()
        return self._offset_ms

    def now_ms(self) -> int:
        if _monotonic() >= self._next_read:
            self._reread()
        return _time_ns() // 1_000_000 + self._offset_ms

    def _reread(self) -> None:
        if not self._rereading.acquire(blocking=False):
            return  # another thread is reading the file; the offset it replaces serves meanwhile
        try:
            path = self._path if self._path is not None else os.environ.get(CLOCK_OFFSET_FILE_ENV)
            self._offset_ms = read_offset_ms(path, self._offset_ms)
            self._next_read = _monotonic() + self._reread_s
        finally:
            self._rereading.release()


def read_offset_ms(path: str | None, previous: int = 0) -> int:
    """The offset the file holds; 0 without a file; ``previous`` if its content is not a
    number (a writer caught half-way keeps the clock where it was)."""
    if not path:
        return 0
    try:
        with open(path, "rb") as f:
            text = f.read(64)
    except FileNotFoundError:
        return 0
    except OSError:
        return previous
    try:
        return int(text.strip() or b"0")
    except ValueError:
        return previous


_BROKER_CLOCK = OffsetClock()


def clock_offset_ms() -> int:
    """Milliseconds to add to the system time for this broker's wall clock (samsa.wall_clock).

    A fault campaign steps one broker's clock without touching the machine's: the file named
    by ``SAMSA_CLOCK_OFFSET_FILE`` holds a signed number of milliseconds, re-read at most every
    ``REREAD_S`` seconds, so a running broker sees a step within that time. An absent variable
    or file means 0. Used by the chaos campaign's clock steps (chaos/faults/clock.py, set per
    broker by chaos/cluster.py and chaos/netns_cluster.py), by
    broker_image/tests/robustness/test_robust_clock.py and
    broker_image/tests/cluster/test_clock_step_cluster.py."""
    return _BROKER_CLOCK.offset_ms


# -- the cleaner's crash points ------------------------------------------------------------


def cleaner_crash_hook() -> Callable[[str], None] | None:
    """The log cleaner's crash hook: kills the broker with SIGKILL the first time cleaning
    reaches the point ``SAMSA_TEST_CLEANER_CRASH_POINT`` names (one of CLEANER_CRASH_POINTS).

    None when the variable is not set: the cleaner then calls its no-op hook. Read when the
    broker starts its cleaner; an unknown point stops start-up with a ValueError naming it.
    Used by broker_image/tests/robustness/test_robust_compaction.py (kill -9 during
    cleaning loses nothing)."""
    point = os.environ.get(CLEANER_CRASH_POINT_ENV)
    if not point:
        return None
    if point not in CLEANER_CRASH_POINTS:
        expected = ", ".join(CLEANER_CRASH_POINTS)
        raise ValueError(f"{CLEANER_CRASH_POINT_ENV}={point!r}: expected one of {expected}")

    def crash(at: str) -> None:
        if at == point:
            log.warning("%s=%s: killing the broker", CLEANER_CRASH_POINT_ENV, point)
            os.kill(os.getpid(), signal.SIGKILL)

    return crash
