"""Log: one partition's segmented log on disk (Kafka's UnifiedLog, minus the replica state).

Appends assign offsets by patching batch headers in a copy of the producer's bytes and
write them with one write; reads return stored bytes of whole batches.  Called from one
asyncio thread: every method is synchronous and nothing is locked.  fsync happens only
in `flush`, which the broker schedules; the high watermark belongs to the replica layer.

This module owns what changes a log: opening it, appends (with the producer state and the
leader epochs they move), rolls, truncation, retention, the cleaner's segment swap, flushes
and closing.  The segments and the reads over them are LocalLog's (samsa.log.local_log),
the offsets an append assigns and the checks a follower's append passes are
samsa.log.log_validator's, and which segments retention deletes is samsa.log.retention's.
"""

from __future__ import annotations

import bisect
import logging
import shutil
from collections.abc import Callable, Sequence
from pathlib import Path

from samsa.config.topic import LogConfig
from samsa.log.checkpoint import LEADER_EPOCH_CHECKPOINT, fsync_dir
from samsa.log.epoch import LeaderEpochCache
from samsa.log.errors import OffsetOutOfRangeError, out_of_space
from samsa.log.info import LogAppendInfo
from samsa.log.loader import load_log
from samsa.log.local_log import LocalLog, parse_partition_dir
from samsa.log.log_validator import (
    analyze_follower_batches,
    assign_offsets,
    leader_offsets,
    markers_in,
)
from samsa.log.producer_state import AppendOrigin, BatchMetadata
from samsa.log.producer_state_manager import MarkerSource, ProducerStateManager, no_markers
from samsa.log.retention import (
    SegmentPredicate,
    below_log_start,
    deletable_prefix,
    older_than,
    over_retention_bytes,
)
from samsa.log.segment import LogSegment
from samsa.log.swap import segment_run
from samsa.protocol.record_batch import BatchHeader, validate_batches
from samsa.wall_clock import wall_clock_ms

log = logging.getLogger(__name__)

AppendListener = Callable[[LogAppendInfo, Sequence[BatchHeader]], None]


class Log(LocalLog):
    """The segments of one partition, its offsets, and its leader epoch cache."""

    def __init__(
        self,
        dir: Path,
        config: LogConfig,
        segments: list[LogSegment],
        log_end_offset: int,
        log_start_offset: int,
        recovery_point: int,
        epoch_cache: LeaderEpochCache,
        now_ms: Callable[[], int],
    ) -> None:
        super().__init__(
            dir, config, segments, log_end_offset, log_start_offset, recovery_point, now_ms
        )
        self.leader_epoch_cache = epoch_cache
        self.last_flush_ms = now_ms()
        self._dir_dirty = False
        # Idempotent producers: checked before leader appends, snapshotted with segments.
        self.producer_state = ProducerStateManager(dir, f"{self.topic}-{self.partition}")
        self.producer_state.txn_index = self
        self.append_listener: AppendListener | None = None
        # Told the offset the log was cut back to (the log manager tells the cleaner).
        self.truncation_listener: Callable[[Log, int], None] | None = None

    @classmethod
    def open(
        cls,
        dir: Path,
        config: LogConfig,
        recovery_point: int = 0,
        log_start_offset: int | None = None,
        now_ms: Callable[[], int] = wall_clock_ms,
        clean_shutdown: bool = False,
    ) -> Log:
        """Load a partition directory (creating it if needed), recovering what is unflushed.

        With `clean_shutdown` every segment is trusted; otherwise segments from the one
        holding `recovery_point` onward are checked batch by batch.
        """
        parse_partition_dir(dir.name)
        created = not dir.exists()
        dir.mkdir(parents=True, exist_ok=True)
        epoch_cache = LeaderEpochCache(dir / LEADER_EPOCH_CHECKPOINT)
        loaded = load_log(
            dir, config, recovery_point, log_start_offset, clean_shutdown, epoch_cache, now_ms
        )
        plog = cls(
            dir,
            config,
            loaded.segments,
            loaded.log_end_offset,
            loaded.log_start_offset,
            loaded.recovery_point,
            epoch_cache,
            now_ms,
        )
        plog._dir_dirty = created
        plog.producer_state.load(
            plog.log_start_offset,
            plog.log_end_offset,
            plog.recovery_point,
            plog.batch_headers,
            plog._stored_marker,
        )
        return plog

    @property
    def latest_epoch(self) -> int | None:
        return self.leader_epoch_cache.latest_epoch

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """OffsetForLeaderEpoch: (largest epoch <= requested, its end offset)."""
        return self.leader_epoch_cache.end_offset_for(epoch, self._next_offset)

    # -- append ----------------------------------------------------------------------------

    def append_as_leader(
        self,
        records: bytes | bytearray | memoryview,
        leader_epoch: int,
        headers: Sequence[BatchHeader] | None = None,
        origin: AppendOrigin = AppendOrigin.CLIENT,
    ) -> LogAppendInfo:
        """Assign offsets (and LogAppendTime if configured) and append.

        `records` must already have passed `validate_batches`; pass its headers to avoid
        parsing them twice.  Origin COORDINATOR appends transaction markers.
        """
        config = self._config
        if headers is None:
            headers = validate_batches(records, config.max_message_bytes)
        first_offset = self._next_offset
        count, max_ts, offset_of_max = leader_offsets(headers, first_offset)
        last_offset = first_offset + count - 1
        log_append_time = -1
        if config.message_timestamp_type == "LogAppendTime":
            log_append_time = max_ts = self._now_ms()
            offset_of_max = first_offset
        # Idempotent producers: refuse or recognise a retry before anything is written.
        marker_of: MarkerSource = no_markers
        if origin is AppendOrigin.COORDINATOR:
            marker_of = markers_in(records, headers)
        pending = self.producer_state.prepare_leader_append(
            headers, first_offset, log_append_time, origin, marker_of
        )
        if isinstance(pending, BatchMetadata):
            return self._duplicate_append_info(pending)
        size = len(records)
        segment = self._maybe_roll(size, max_ts, last_offset, first_offset)

        out, patched = assign_offsets(records, headers, first_offset, leader_epoch, log_append_time)
        segment.append(out, patched)
        self._next_offset = last_offset + 1
        self.producer_state.complete_append(pending, self._next_offset)
        if leader_epoch >= 0:
            self._maybe_assign_epoch(leader_epoch, first_offset)
        info = LogAppendInfo(
            first_offset,
            last_offset,
            max_ts,
            offset_of_max,
            log_append_time,
            self._log_start_offset,
            count,
            size,
        )
        if self.append_listener is not None:
            self.append_listener(info, patched)
        return info

    def append_as_follower(self, records: bytes | bytearray | memoryview) -> LogAppendInfo:
        """Append replicated batches with the offsets they carry.

        A trailing partial batch (normal at the end of a fetch response) is ignored; every
        complete batch must be v2 with a valid CRC, and offsets must increase from the log
        end offset on.
        """
        view = memoryview(records)
        found = analyze_follower_batches(view, self._next_offset, self.topic, self.partition)
        headers, valid = found.headers, found.valid
        max_ts, offset_of_max = found.max_timestamp, found.offset_of_max_timestamp
        if not headers:
            return LogAppendInfo(-1, -1, -1, -1, -1, self._log_start_offset, 0, 0)
        first_offset = headers[0].base_offset
        last_offset = headers[-1].last_offset
        segment = self._maybe_roll(valid, max_ts, last_offset, first_offset)
        segment.append(view[:valid], headers)
        self._next_offset = last_offset + 1
        self.producer_state.append_replicated(
            headers, self._next_offset, markers_in(view, headers, found.positions)
        )
        for h in headers:
            if h.partition_leader_epoch >= 0:
                self._maybe_assign_epoch(h.partition_leader_epoch, h.base_offset)
        log_append_time = max_ts if headers[-1].timestamp_type == 1 else -1
        info = LogAppendInfo(
            first_offset,
            last_offset,
            max_ts,
            offset_of_max,
            log_append_time,
            self._log_start_offset,
            sum(h.records_count for h in headers),
            valid,
        )
        if self.append_listener is not None:
            self.append_listener(info, headers)
        return info

    def assign_epoch(self, epoch: int, start_offset: int) -> None:
        """Record that ``epoch`` starts at ``start_offset`` (a new leader's first offset), so
        OffsetForLeaderEpoch answers correctly before its first append."""
        self._maybe_assign_epoch(epoch, start_offset)
        self._write_epochs()

    def _write_epochs(self) -> None:
        """Write the epoch checkpoint after a change. On a full disk it stays dirty and the
        next flush writes it: that flush fails until there is room, holding the recovery
        point, so a crash meanwhile re-derives the epochs from the batches."""
        try:
            self.leader_epoch_cache.flush()
        except OSError as exc:
            if not out_of_space(exc):
                raise
            log.warning(
                "%s-%d: no space for the leader epoch checkpoint", self.topic, self.partition
            )

    def _duplicate_append_info(self, duplicate: BatchMetadata) -> LogAppendInfo:
        """A retried batch: answered with what it got when it was appended (Kafka's way)."""
        log_append_time = (
            duplicate.timestamp if self._config.message_timestamp_type == "LogAppendTime" else -1
        )
        return LogAppendInfo(
            duplicate.first_offset,
            duplicate.last_offset,
            duplicate.timestamp,
            duplicate.last_offset,
            log_append_time,
            self._log_start_offset,
            0,
            0,
        )

    def _maybe_assign_epoch(self, epoch: int, start_offset: int) -> None:
        latest = self.leader_epoch_cache.latest_epoch
        if latest is None or epoch > latest:
            self.leader_epoch_cache.assign(epoch, start_offset)

    def _maybe_roll(
        self, messages_size: int, max_timestamp: int, max_offset: int, first_offset: int
    ) -> LogSegment:
        segment = self._segments[-1]
        if segment.should_roll(
            messages_size, max_timestamp, max_offset, self._now_ms(), self._config
        ):
            return self.roll(first_offset)
        return segment

    def roll(self, expected_next_offset: int | None = None) -> LogSegment:
        """Start a new active segment at the log end offset (or a later offset, for a
        follower whose next batch starts beyond it); an empty active segment is reused."""
        new_base = max(expected_next_offset or 0, self._next_offset)
        active = self._segments[-1]
        if active.size == 0 and active.base_offset == new_base:
            return active
        # Created first and the active one sealed second, each undone if the next step fails
        # (a full disk): the last segment is always one that can be appended to.
        segment = LogSegment.create(self._dir, new_base, self._config, self._now_ms())
        if active.size == 0:
            # An empty segment can just be replaced: nothing in it to keep.
            self._segments.pop()
            self._bases.pop()
            active.delete()
        else:
            try:
                active.seal()
            except OSError:
                segment.delete()
                active.make_active()
                raise
        self._segments.append(segment)
        self._bases.append(new_base)
        self._dir_dirty = True
        self.producer_state.take_snapshot(new_base)
        log.debug("rolled %s-%d at offset %d", self.topic, self.partition, new_base)
        return segment

    # -- transactions ----------------------------------------------------------------------

    def last_stable_offset(self, high_watermark: int) -> int:
        """min(first offset of the transactions not complete and replicated, high watermark),
        never below the log start offset (retention may pass an open transaction's start, as
        Kafka's updateFirstUnstableOffset allows)."""
        lso = self.producer_state.last_stable_offset(high_watermark)
        if lso < self._log_start_offset:
            return min(self._log_start_offset, high_watermark)
        return lso

    # -- truncation and retention ----------------------------------------------------------

    def truncate_to(self, offset: int) -> bool:
        """Drop every record at or above `offset` (follower truncation); False if none."""
        if offset < 0:
            raise ValueError(f"cannot truncate to negative offset {offset}")
        if offset >= self._next_offset:
            return False
        if self._segments[0].base_offset > offset:
            self.truncate_fully_and_start_at(offset)
            return True
        while self._bases[-1] > offset:
            self._bases.pop()
            self._segments.pop().delete()
        active = self._segments[-1]
        active.truncate_to(offset)
        active.make_active()
        self._next_offset = offset
        self._recovery_point = min(self._recovery_point, offset)
        self._log_start_offset = min(self._log_start_offset, offset)
        self.leader_epoch_cache.truncate_from_end(offset)
        self._write_epochs()
        self.producer_state.truncate_to(
            offset, self._log_start_offset, self.batch_headers, self._stored_marker
        )
        if self.truncation_listener is not None:
            self.truncation_listener(self, offset)
        return True

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Delete every segment and start empty at `offset`."""
        for segment in self._segments:
            segment.delete()
        segment = LogSegment.create(self._dir, offset, self._config, self._now_ms())
        self._segments = [segment]
        self._bases = [offset]
        self._next_offset = offset
        self._log_start_offset = offset
        self._recovery_point = offset
        self._dir_dirty = True
        self.leader_epoch_cache.clear()
        self._write_epochs()
        self.producer_state.truncate_fully(offset)
        if self.truncation_listener is not None:
            self.truncation_listener(self, offset)

    def maybe_increment_log_start_offset(self, offset: int) -> bool:
        """Move the log start offset up (DeleteRecords); segments below it go at the next
        retention run.  The caller checks `offset` against the high watermark."""
        if offset > self._next_offset:
            raise OffsetOutOfRangeError(
                f"cannot move the log start offset of {self.topic}-{self.partition} to "
                f"{offset}, beyond its log end offset {self._next_offset}"
            )
        if offset <= self._log_start_offset:
            return False
        self._log_start_offset = offset
        self.leader_epoch_cache.truncate_from_start(offset)
        self._recovery_point = max(self._recovery_point, offset)
        return True

    def delete_old_segments(self, high_watermark: int | None = None) -> int:
        """Retention: delete whole segments below the log start offset, then (with
        cleanup.policy=delete) beyond retention.bytes and older than retention.ms.

        Only segments wholly below `high_watermark` (default: the log end offset) go.
        Returns how many were deleted.
        """
        hw = self._next_offset if high_watermark is None else min(high_watermark, self._next_offset)
        deleted = self._delete_where(
            below_log_start(self._log_start_offset), hw, "below the log start offset"
        )
        config = self._config
        if config.delete:
            if config.retention_bytes >= 0:
                over_size = over_retention_bytes(self.size_in_bytes, config.retention_bytes)
                if over_size is not None:
                    deleted += self._delete_where(over_size, hw, "retention.bytes")
            if config.retention_ms >= 0:
                now = self._now_ms()
                deleted += self._delete_where(
                    older_than(now, config.retention_ms), hw, "retention.ms"
                )
        return deleted

    def _delete_where(self, predicate: SegmentPredicate, high_watermark: int, reason: str) -> int:
        deletable = deletable_prefix(self._segments, self._next_offset, high_watermark, predicate)
        if not deletable:
            return 0
        if len(deletable) == len(self._segments):
            # A log always keeps one segment: roll an empty one to stand in.
            self.roll()
        for segment in deletable:
            self._segments.pop(0)
            self._bases.pop(0)
            segment.delete()
            log.info(
                "deleted segment %s (%s): offsets %d to %d",
                segment.log_path,
                reason,
                segment.base_offset,
                self._bases[0] - 1,
            )
        self._dir_dirty = True
        self.producer_state.delete_snapshots_below(self._bases[0])
        if self._bases[0] > self._log_start_offset:
            self._log_start_offset = self._bases[0]
            self.leader_epoch_cache.truncate_from_start(self._log_start_offset)
        self._recovery_point = max(self._recovery_point, self._log_start_offset)
        return len(deletable)

    # -- compaction ------------------------------------------------------------------------

    def replace_segments(self, new: LogSegment, old: Sequence[LogSegment]) -> None:
        """Put a cleaned segment in the place of the consecutive inactive segments it was
        cleaned from (the in-memory half of Kafka's replaceSegments; the files are swapped
        by samsa.log.swap).  Raises ValueError if `old` is no longer such a run."""
        segments = self._segments
        i = segment_run(segments, old)
        if new.base_offset != old[0].base_offset:
            raise ValueError(f"segment {new.base_offset} cannot replace {old[0].base_offset}")
        segments[i : i + len(old)] = [new]
        self._bases[i : i + len(old)] = [new.base_offset]

    # -- durability and lifecycle ----------------------------------------------------------

    def flush(self, offset: int | None = None) -> None:
        """fsync every segment holding offsets below `offset` (default: everything) and
        move the recovery point there."""
        target = self._next_offset if offset is None else min(offset, self._next_offset)
        if target <= self._recovery_point and not self._dir_dirty:
            return
        first = max(bisect.bisect_right(self._bases, self._recovery_point) - 1, 0)
        for segment in self._segments[first:]:
            if segment.base_offset >= target:
                break
            segment.flush()
        if self._dir_dirty:
            fsync_dir(self._dir)
            self._dir_dirty = False
        self.leader_epoch_cache.flush()
        self.producer_state.flush_snapshots(target)
        self._recovery_point = max(self._recovery_point, target)
        self.last_flush_ms = self._now_ms()

    def close(self) -> None:
        """Write the indexes, the epoch checkpoint and a producer state snapshot at the log
        end, and close the files; no fsync of the data (call `flush` first for a clean
        shutdown)."""
        self.leader_epoch_cache.flush()
        self.producer_state.snapshot_if_changed()
        for segment in self._segments:
            segment.close()

    def close_handles(self) -> None:
        """Release every descriptor and map without writing anything."""
        for segment in self._segments:
            segment.close_handles()

    def delete(self) -> None:
        """Close everything and remove the partition directory."""
        self.close_handles()
        shutil.rmtree(self._dir, ignore_errors=True)

    def __repr__(self) -> str:
        return (
            f"Log({self.topic}-{self.partition}, start={self._log_start_offset}, "
            f"end={self._next_offset}, segments={len(self._segments)})"
        )
