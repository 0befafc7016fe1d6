"""The broker's wall clock: system time plus the offset a fault campaign may inject.

Everything the broker stamps or ages by wall time (LogAppendTime, retention.ms, segment.ms,
offsets and group expiry, transaction timeouts, producer id expiration) reads ``wall_clock_ms``.
The offset is samsa.faults' clock step (``SAMSA_CLOCK_OFFSET_FILE``): 0 unless a campaign or a
test sets it. Timeouts and liveness use ``time.monotonic`` and are deliberately not affected.
"""

from __future__ import annotations

import time

from samsa import faults

_time_ns = time.time_ns


def wall_clock_ms() -> int:
    """This broker's wall-clock time in milliseconds (system time plus the injected offset)."""
    offset_ms = faults.clock_offset_ms()  # re-read first: a step is never half-applied
    return _time_ns() // 1_000_000 + offset_ms


def monotonic_ms() -> int:
    """Milliseconds for measuring intervals (ISR lag): never stepped, by the system or a test."""
    return time.monotonic_ns() // 1_000_000
