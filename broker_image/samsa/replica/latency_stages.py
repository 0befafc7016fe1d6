"""Replication stage timings: where a record's milliseconds go between producer and consumer.

A leader partition remembers when each of its recent batches was appended (``AppendTimes``),
so that the later steps can be timed against the append: a follower's fetch carrying the
batch, the high watermark passing it, a consumer's fetch carrying it. The timings go to an
injected sink (the broker's prometheus histograms); with none, recording costs one call.

Stages (all measured on the broker named):
  produce_append     leader    produce request handled, until its batches are appended
  follower_fetch     leader    appended, until a follower's fetch response carries it
  follower_append    follower  fetch response received, until appended
  follower_refetch   leader    a fetch response with records sent to a follower, until that
                               follower's next fetch arrives (its round trip)
  high_watermark     leader    appended, until the high watermark passes it
  ack_wait           leader    acks=all: appended, until the producer is answered
  consumer_wake      leader    a parked consumer fetch woken, until its response is ready
  consumer_fetch     leader    appended, until a consumer's fetch response carries it
"""

from __future__ import annotations

import bisect
import time
from collections.abc import Callable

STAGES = (
    "produce_append",
    "follower_fetch",
    "follower_append",
    "follower_refetch",
    "high_watermark",
    "ack_wait",
    "consumer_wake",
    "consumer_fetch",
)

# Batches remembered per partition: enough for a live tail; older reads are backlog, untimed.
_KEEP = 1024

now = time.perf_counter


class StageClock:
    """Where stage timings go: ``sink(stage, seconds)``, or nowhere."""

    __slots__ = ("sink",)

    def __init__(self) -> None:
        self.sink: Callable[[str, float], None] | None = None

    def observe(self, stage: str, seconds: float) -> None:
        sink = self.sink
        if sink is not None:
            sink(stage, seconds)

    def since(self, stage: str, started: float) -> None:
        sink = self.sink
        if sink is not None:
            sink(stage, now() - started)


class AppendTimes:
    """When each recent batch of one partition was appended, by its end offset (exclusive)."""

    __slots__ = ("_committed", "_ends", "_times")

    def __init__(self) -> None:
        self._ends: list[int] = []
        self._times: list[float] = []
        # Entries below this index are below the high watermark (already timed as committed).
        self._committed = 0

    def appended(self, end_offset: int, at: float) -> None:
        ends = self._ends
        if ends and end_offset <= ends[-1]:
            self.clear()  # the log was truncated and written again
        ends.append(end_offset)
        self._times.append(at)
        if len(ends) > 2 * _KEEP:
            drop = len(ends) - _KEEP
            del ends[:drop]
            del self._times[:drop]
            self._committed = max(self._committed - drop, 0)

    def time_of(self, offset: int) -> float | None:
        """When the batch holding ``offset`` was appended, if it is among the remembered ones
        (the first one's start is unknown, so it counts as forgotten)."""
        i = bisect.bisect_right(self._ends, offset)
        if i == 0 or i >= len(self._ends):
            return None
        return self._times[i]

    def committed(self, high_watermark: int, clock: StageClock, at: float) -> None:
        """The high watermark reached ``high_watermark``: time each batch it passed."""
        ends, times, i = self._ends, self._times, self._committed
        while i < len(ends) and ends[i] <= high_watermark:
            clock.observe("high_watermark", at - times[i])
            i += 1
        self._committed = i

    def clear(self) -> None:
        self._ends.clear()
        self._times.clear()
        self._committed = 0
