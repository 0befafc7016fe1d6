"""Which whole segments retention deletes (Kafka's UnifiedLog.deleteOldSegments rules).

Three rules, applied in this order by Log.delete_old_segments: segments wholly below the log
start offset, then (cleanup.policy=delete) the oldest segments beyond retention.bytes, and
segments whose newest timestamp is older than retention.ms.  Each rule deletes a prefix of
the log, and only segments wholly below the high watermark.  Decisions only: the Log
deletes the segments and moves its offsets.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from samsa.log.segment import LogSegment

# (segment, the segment after it or None for the active one) -> may retention delete it?
SegmentPredicate = Callable[[LogSegment, LogSegment | None], bool]


def deletable_prefix(
    segments: Sequence[LogSegment],
    log_end_offset: int,
    high_watermark: int,
    predicate: SegmentPredicate,
) -> list[LogSegment]:
    """The segments from the first on that the predicate allows, each wholly below the high
    watermark; an empty active segment is never one of them."""
    deletable: list[LogSegment] = []
    for i, segment in enumerate(segments):
        following = segments[i + 1] if i + 1 < len(segments) else None
        upper = following.base_offset if following is not None else log_end_offset
        if following is None and segment.size == 0:
            break
        if high_watermark >= upper and predicate(segment, following):
            deletable.append(segment)
        else:
            break
    return deletable


def below_log_start(log_start_offset: int) -> SegmentPredicate:
    """Segments whose successor starts at or below the log start offset."""
    return lambda segment, following: (
        following is not None and following.base_offset <= log_start_offset
    )


def over_retention_bytes(size_in_bytes: int, retention_bytes: int) -> SegmentPredicate | None:
    """The oldest segments whose deletion keeps the log at or above retention.bytes, one
    after the other; None if the log is not over it."""
    excess = size_in_bytes - retention_bytes

    def over_size(segment: LogSegment, following: LogSegment | None) -> bool:
        nonlocal excess
        if excess - segment.size >= 0:
            excess -= segment.size
            return True
        return False

    return over_size if excess > 0 else None


def older_than(now_ms: int, retention_ms: int) -> SegmentPredicate:
    """Segments whose largest timestamp is more than retention.ms before `now_ms`."""
    return lambda segment, following: now_ms - segment.largest_timestamp > retention_ms
