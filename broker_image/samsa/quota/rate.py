"""Kafka's Rate over a SampledStat of sums (org.apache.kafka.common.metrics.stats), and the
throttle time of a quota violation (QuotaUtils.throttleTime): the arithmetic client quotas
are enforced with, kept to Kafka's so that a client is throttled here as it would be there.

A rate keeps ``samples`` windows of ``window_ms`` each, plus one that may overlap the start of
the monitored span. A window is complete after ``window_ms``; a sample with no event for
``samples * window_ms`` is reset. The rate is the sum of the samples over the elapsed time
since the oldest sample began, counted as at least ``samples - 1`` whole windows, so that a
client's first burst is not measured over a few milliseconds.
"""

from __future__ import annotations

import math


class _Sample:
    __slots__ = ("last_event_ms", "start_ms", "value")

    def __init__(self, now_ms: int) -> None:
        self.start_ms = now_ms
        self.last_event_ms = now_ms
        self.value = 0.0

    def reset(self, now_ms: int) -> None:
        self.start_ms = now_ms
        self.last_event_ms = now_ms
        self.value = 0.0


class Rate:
    """Units per second over ``samples`` windows of ``window_ms`` milliseconds."""

    __slots__ = ("_current", "_slots", "samples", "window_ms")

    def __init__(self, samples: int, window_ms: int) -> None:
        self.samples = samples
        self.window_ms = window_ms
        self._slots: list[_Sample] = []
        self._current = 0

    def _current_sample(self, now_ms: int) -> _Sample:
        if not self._slots:
            self._slots.append(_Sample(now_ms))
        return self._slots[self._current]

    def record(self, value: float, now_ms: int) -> None:
        sample = self._current_sample(now_ms)
        if now_ms - sample.start_ms >= self.window_ms:
            # Kafka keeps one slot more than the samples: the one overlapping the span's start.
            self._current = (self._current + 1) % (self.samples + 1)
            if self._current >= len(self._slots):
                sample = _Sample(now_ms)
                self._slots.append(sample)
            else:
                sample = self._slots[self._current]
                sample.reset(now_ms)
        sample.value += value
        sample.last_event_ms = now_ms

    def _purge(self, now_ms: int) -> None:
        expire = self.samples * self.window_ms
        for sample in self._slots:
            if now_ms - sample.last_event_ms >= expire:
                sample.reset(now_ms)

    def window_size_ms(self, now_ms: int) -> int:
        """The span the rate is measured over (Kafka's Rate.windowSize)."""
        self._purge(now_ms)
        if not self._slots:
            self._slots.append(_Sample(now_ms))
        oldest = min(s.start_ms for s in self._slots)
        elapsed = now_ms - oldest
        full = elapsed // self.window_ms
        if full < self.samples - 1:
            elapsed += (self.samples - 1 - full) * self.window_ms
        return max(elapsed, 1)

    def total(self, now_ms: int) -> float:
        self._purge(now_ms)
        return sum(s.value for s in self._slots)

    def measure(self, now_ms: int) -> float:
        """Units per second now."""
        total = self.total(now_ms)
        return total / (self.window_size_ms(now_ms) / 1000.0)


def throttle_time_ms(observed: float, bound: float, window_ms: int) -> int:
    """How long a client over its quota must wait for its rate to come back to the bound,
    if it sends nothing meanwhile: O * W / (W + X) = T gives X = (O - T) / T * W."""
    # Java's Math.round: halves go up (Python's round goes to even).
    return math.floor((observed - bound) / bound * window_ms + 0.5)
