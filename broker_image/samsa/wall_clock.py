"""The broker's wall clock: system time plus an offset a test may inject.

Everything the broker stamps or ages by wall time (LogAppendTime, retention.ms, segment.ms,
offsets and group expiry, transaction timeouts, producer id expiration) reads ``wall_clock_ms``.
A fault campaign steps one broker's clock without touching the machine's: the file named by
``SAMSA_CLOCK_OFFSET_FILE`` holds a signed number of milliseconds that is added to the system
time; the file is re-read at most every ``REREAD_S`` seconds, so a running broker sees a step
within that time. An absent variable or file means no offset. Timeouts and liveness use
``time.monotonic`` and are deliberately not affected.
"""

from __future__ import annotations

import os
import threading
import time

ENV_VAR = "SAMSA_CLOCK_OFFSET_FILE"
REREAD_S = 0.1

_monotonic = time.monotonic
_time_ns = time.time_ns


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
        self._maybe_reread()
        return self._offset_ms

    def now_ms(self) -> int:
        # On every append's path: the re-read check is one monotonic read.
        if _monotonic() >= self._next_read:
            self._reread()
        return _time_ns() // 1_000_000 + self._offset_ms

    def _maybe_reread(self) -> None:
        if _monotonic() >= self._next_read:
            self._reread()

    def _reread(self) -> None:
        if not self._rereading.acquire(blocking=False):
            return  # another thread is reading the file; the offset it replaces serves meanwhile
        try:
            path = self._path if self._path is not None else os.environ.get(ENV_VAR)
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


_SYSTEM = OffsetClock()


def wall_clock_ms() -> int:
    """This broker's wall-clock time in milliseconds (system time plus the injected offset)."""
    return _SYSTEM.now_ms()


def monotonic_ms() -> int:
    """Milliseconds for measuring intervals (ISR lag): never stepped, by the system or a test."""
    return time.monotonic_ns() // 1_000_000
