"""LogCleanerManager: which log to clean next, how far, and where cleaning last stopped.

Kafka's LogCleanerManager.  Each compacted log is split at its first dirty offset (from the
`cleaner-offset-checkpoint` file of the data directory) into a clean head and a dirty tail;
the tail is cleanable up to the first uncleanable offset: the active segment, the last
stable offset (the high watermark), and any segment newer than min.compaction.lag.ms.  The
filthiest log whose dirty ratio exceeds min.cleanable.dirty.ratio (or that has records older
than max.compaction.lag.ms) goes next.  Everything here runs on the broker's event loop,
so the state needs no lock.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum

from samsa.log.checkpoint import CorruptCheckpointError, OffsetCheckpointFile
from samsa.log.log import Log
from samsa.log.log_manager import LogManager
from samsa.log.segment import LogSegment

log = logging.getLogger(__name__)

CLEANER_OFFSET_CHECKPOINT = "cleaner-offset-checkpoint"

TopicPartitionKey = tuple[str, int]
# (topic, partition) -> the offset below which records are final (the high watermark), or
# None for the log end offset.
StableOffset = Callable[[str, int], int | None]


class CleaningState(Enum):
    IN_PROGRESS = "in progress"
    ABORTED = "aborted"
    PAUSED = "paused"


@dataclass
class LogToClean:
    """A compacted log and the offsets that bound its dirty, cleanable section."""

    tp: TopicPartitionKey
    log: Log
    first_dirty_offset: int
    first_uncleanable_offset: int
    clean_bytes: int
    cleanable_bytes: int
    needs_compaction_now: bool = False

    @property
    def total_bytes(self) -> int:
        return self.clean_bytes + self.cleanable_bytes

    @property
    def cleanable_ratio(self) -> float:
        return self.cleanable_bytes / self.total_bytes if self.total_bytes else 0.0


def segments_overlapping(log_: Log, start: int, end: int) -> list[LogSegment]:
    """The segments holding offsets in [start, end) (Kafka's logSegments(from, to))."""
    segments = log_.segments
    out = []
    for i, segment in enumerate(segments):
        upper = segments[i + 1].base_offset if i + 1 < len(segments) else None
        if segment.base_offset >= end:
            break
        if upper is None or upper > start:
            out.append(segment)
    return out


def first_batch_timestamp(segment: LogSegment) -> int:
    """The max timestamp of the segment's first batch (Kafka's getFirstBatchTimestamp)."""
    found = segment.translate_offset(segment.base_offset)
    return found[1].max_timestamp if found is not None else -1


def cleanable_offsets(
    log_: Log, last_clean: int | None, now: int, last_stable: int | None = None
) -> tuple[int, int, bool]:
    """(first dirty offset, first uncleanable offset, whether the checkpoint was invalid)."""
    start = log_.log_start_offset
    checkpoint = start if last_clean is None else last_clean
    force = False
    if checkpoint < start:
        if not (log_.config.compact and log_.config.delete):
            log.warning(
                "resetting the first dirty offset of %s to its log start offset %d: the "
                "checkpointed offset %d is below it",
                log_,
                start,
                checkpoint,
            )
        checkpoint, force = start, True
    elif checkpoint > log_.log_end_offset:
        log.warning(
            "the cleaner checkpoint %d of %s is beyond its log end offset %d; cleaning it "
            "all from its log start offset %d",
            checkpoint,
            log_,
            log_.log_end_offset,
            start,
        )
        checkpoint, force = start, True
    bounds = [log_.active_segment.base_offset]
    if last_stable is not None:
        bounds.append(last_stable)
    lag = max(log_.config.min_compaction_lag_ms, 0)
    if lag > 0:
        for segment in segments_overlapping(log_, checkpoint, log_.active_segment.base_offset):
            if segment.largest_timestamp > now - lag:
                bounds.append(segment.base_offset)
                break
    return checkpoint, max(checkpoint, min(bounds)), force


def max_compaction_delay(log_: Log, first_dirty: int, now: int) -> int:
    """How long past max.compaction.lag.ms the oldest dirty record is (0 if it is not)."""
    clean_until = now - max(log_.config.max_compaction_lag_ms, 0)
    if clean_until <= 0:
        return 0  # the default, "never": no need to look at any segment
    dirty = segments_overlapping(log_, first_dirty, log_.active_segment.base_offset)
    stamps = [ts for ts in (first_batch_timestamp(s) for s in dirty) if ts > 0]
    if not stamps:
        return 0
    return max(clean_until - min(stamps), 0)


def cleanable_bytes(log_: Log, first_dirty: int, uncleanable: int) -> tuple[int, int]:
    """(base offset of the segment holding `uncleanable`, bytes of the segments between
    the first dirty offset and it)."""
    segments = log_.segments
    first_uncleanable = segments[0].base_offset
    for segment in segments:
        if segment.base_offset > uncleanable:
            break
        first_uncleanable = segment.base_offset
    size = sum(
        s.size
        for s in segments_overlapping(log_, min(first_dirty, first_uncleanable), first_uncleanable)
    )
    return first_uncleanable, size


class LogCleanerManager:
    """The cleaning state of every log in one LogManager, and their cleaner checkpoint."""

    def __init__(self, log_manager: LogManager, last_stable: StableOffset | None = None) -> None:
        self.log_manager = log_manager
        self._last_stable = last_stable
        self.checkpoint = OffsetCheckpointFile(log_manager.log_dir / CLEANER_OFFSET_CHECKPOINT)
        self._offsets = self._read_checkpoint()
        self._states: dict[TopicPartitionKey, CleaningState] = {}
        self._paused: dict[TopicPartitionKey, int] = {}
        self.uncleanable: set[TopicPartitionKey] = set()
        self.dirtiest_ratio = 0.0
        self.time_of_last_run_ms: int | None = None

    def _read_checkpoint(self) -> dict[TopicPartitionKey, int]:
        try:
            return self.checkpoint.read() or {}
        except CorruptCheckpointError as exc:
            log.warning("ignoring %s: every compacted log will be cleaned from its start", exc)
            return {}

    def state(self, tp: TopicPartitionKey) -> CleaningState | None:
        return self._states.get(tp)

    # -- choosing ---------------------------------------------------------------------------

    def grab_filthiest_compacted_log(self, now: int) -> LogToClean | None:
        """The compacted log most in need of cleaning, marked in progress; None if none is."""
        self.time_of_last_run_ms = now
        candidates: list[LogToClean] = []
        for tp, plog in list(self.log_manager.logs.items()):
            if not plog.config.compact or tp in self._states or tp in self.uncleanable:
                continue
            stable = self._last_stable(*tp) if self._last_stable is not None else None
            first_dirty, uncleanable, force = cleanable_offsets(
                plog, self._offsets.get(tp), now, stable
            )
            if force:
                self.update_checkpoint(tp, first_dirty)
            delay = max_compaction_delay(plog, first_dirty, now)
            clean = sum(s.size for s in plog.segments if s.base_offset < first_dirty)
            first_uncleanable, dirty = cleanable_bytes(plog, first_dirty, uncleanable)
            candidate = LogToClean(
                tp,
                plog,
                first_dirty,
                first_uncleanable,
                clean,
                dirty,
                needs_compaction_now=delay > 0,
            )
            if candidate.total_bytes > 0:
                candidates.append(candidate)
        self.dirtiest_ratio = max((c.cleanable_ratio for c in candidates), default=0.0)
        ready = [
            c
            for c in candidates
            if (c.needs_compaction_now and c.cleanable_bytes > 0)
            or c.cleanable_ratio > c.log.config.min_cleanable_dirty_ratio
        ]
        if not ready:
            return None
        filthiest = max(ready, key=lambda c: c.cleanable_ratio)
        self._states[filthiest.tp] = CleaningState.IN_PROGRESS
        return filthiest

    # -- pausing and aborting ---------------------------------------------------------------

    def abort_and_pause(self, tp: TopicPartitionKey) -> None:
        """Stop cleaning `tp` (a clean in progress is abandoned before it swaps anything in)
        until `resume`; pauses nest, as Kafka's do."""
        state = self._states.get(tp)
        if state is CleaningState.IN_PROGRESS:
            self._states[tp] = CleaningState.ABORTED
        elif state is None:
            self._states[tp] = CleaningState.PAUSED
        self._paused[tp] = self._paused.get(tp, 0) + 1

    def resume(self, tp: TopicPartitionKey) -> None:
        count = self._paused.get(tp, 0)
        if count <= 0:
            raise ValueError(f"cleaning of {tp[0]}-{tp[1]} is not paused")
        if count > 1:
            self._paused[tp] = count - 1
            return
        del self._paused[tp]
        if self._states.get(tp) is CleaningState.PAUSED:
            del self._states[tp]
        # An ABORTED clean still running becomes unpaused when it finishes.

    def is_aborted(self, tp: TopicPartitionKey) -> bool:
        return self._states.get(tp) is CleaningState.ABORTED

    def done_cleaning(self, tp: TopicPartitionKey, end_offset: int | None) -> None:
        """A clean ended: checkpoint `end_offset` (None: nothing new is clean) unless aborted."""
        state = self._states.pop(tp, None)
        if state is CleaningState.ABORTED:
            if self._paused.get(tp):
                self._states[tp] = CleaningState.PAUSED
            return
        if end_offset is not None:
            self.update_checkpoint(tp, end_offset)

    def mark_uncleanable(self, tp: TopicPartitionKey) -> None:
        """Stop cleaning a log whose cleaning failed unexpectedly (until the broker restarts
        or the log is deleted), as Kafka does, rather than fail on it forever."""
        self.uncleanable.add(tp)

    # -- checkpoint -------------------------------------------------------------------------

    def update_checkpoint(self, tp: TopicPartitionKey, offset: int) -> None:
        """Record `offset` as the first dirty offset of `tp`; entries of deleted logs go."""
        logs = self.log_manager.logs
        self._offsets = {k: v for k, v in self._offsets.items() if k in logs}
        self._offsets[tp] = offset
        self.uncleanable &= set(logs)
        self.checkpoint.write(self._offsets)

    def maybe_truncate_checkpoint(self, tp: TopicPartitionKey, offset: int) -> None:
        """After a truncation to `offset`, nothing at or beyond it is clean any more."""
        if self._offsets.get(tp, 0) > offset:
            self.update_checkpoint(tp, offset)

    def uncleanable_bytes(self) -> int:
        logs = self.log_manager.logs
        return sum(logs[tp].size_in_bytes for tp in self.uncleanable if tp in logs)


__all__ = [
    "CLEANER_OFFSET_CHECKPOINT",
    "CleaningState",
    "LogCleanerManager",
    "LogToClean",
    "cleanable_bytes",
    "cleanable_offsets",
    "max_compaction_delay",
    "segments_overlapping",
]
