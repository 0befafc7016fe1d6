"""Replication stage timings: batches found by offset, the high watermark timing each once."""

from __future__ import annotations

from samsa.replica.latency_stages import AppendTimes, StageClock


def _clock() -> tuple[StageClock, list[tuple[str, float]]]:
    seen: list[tuple[str, float]] = []
    clock = StageClock()
    clock.sink = lambda stage, seconds: seen.append((stage, seconds))
    return clock, seen


def test_an_offset_is_timed_by_the_batch_that_holds_it() -> None:
    times = AppendTimes()
    times.appended(10, 1.0)  # the first batch's start is unknown: [?, 10)
    times.appended(15, 2.0)  # [10, 15)
    times.appended(20, 3.0)  # [15, 20)
    assert times.time_of(5) is None
    assert times.time_of(10) == 2.0
    assert times.time_of(14) == 2.0
    assert times.time_of(15) == 3.0
    assert times.time_of(20) is None  # not yet written


def test_the_high_watermark_times_each_batch_once() -> None:
    clock, seen = _clock()
    times = AppendTimes()
    for end, at in ((10, 1.0), (15, 2.0), (20, 3.0)):
        times.appended(end, at)
    times.committed(15, clock, 5.0)
    times.committed(15, clock, 6.0)
    times.committed(19, clock, 7.0)
    times.committed(20, clock, 8.0)
    assert seen == [("high_watermark", 4.0), ("high_watermark", 3.0), ("high_watermark", 5.0)]


def test_a_rewritten_log_forgets_the_old_times() -> None:
    times = AppendTimes()
    times.appended(10, 1.0)
    times.appended(20, 2.0)
    times.appended(15, 3.0)  # truncated to 10 and written again
    assert times.time_of(12) is None
    times.appended(18, 4.0)
    assert times.time_of(16) == 4.0


def test_only_recent_batches_are_kept() -> None:
    times = AppendTimes()
    for i in range(1, 5000):
        times.appended(i, float(i))
    assert times.time_of(10) is None
    assert times.time_of(4997) == 4998.0
