"""Log: one partition's segmented log on disk (Kafka's UnifiedLog, minus the replica state).

Appends assign offsets by patching batch headers in a copy of the producer's bytes and
write them with one write; reads return stored bytes of whole batches.  Called from one
asyncio thread: every method is synchronous and nothing is locked.  fsync happens only
in `flush`, which the broker schedules; the high watermark belongs to the replica layer.
"""

from __future__ import annotations

import bisect
import logging
import shutil
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from samsa.config.topic import LogConfig
from samsa.log.checkpoint import LEADER_EPOCH_CHECKPOINT, fsync_dir
from samsa.log.epoch import LeaderEpochCache
from samsa.log.errors import (
    OffsetOutOfRangeError,
    OffsetsOutOfOrderError,
    UnexpectedAppendOffsetError,
    out_of_space,
)
from samsa.log.info import FetchDataInfo, LogAppendInfo
from samsa.log.loader import load_log
from samsa.log.producer_state import AppendOrigin, BatchMetadata
from samsa.log.producer_state_manager import ProducerStateManager
from samsa.log.segment import LogSegment
from samsa.log.swap import segment_run
from samsa.log.txn_index import AbortedTxn, collect_aborted
from samsa.protocol.control import EndTxnMarker, read_end_txn_marker
from samsa.protocol.record_batch import (
    BATCH_HEADER_SIZE,
    BatchHeader,
    CorruptRecordError,
    batch_crc_ok,
    read_batch_header,
    scan_batches,
    set_base_offset,
    set_log_append_time,
    set_partition_leader_epoch,
    validate_batches,
)
from samsa.wall_clock import wall_clock_ms

# Batches at least this large are written without copying them into one buffer.
_VECTORED_MIN_BATCH = 4096

log = logging.getLogger(__name__)

AppendListener = Callable[[LogAppendInfo, Sequence[BatchHeader]], None]


def _no_markers(i: int, h: BatchHeader) -> EndTxnMarker | None:
    return None


def _markers_in(
    records: bytes | bytearray | memoryview,
    headers: Sequence[BatchHeader],
    positions: Sequence[int] | None = None,
) -> Callable[[int, BatchHeader], EndTxnMarker | None]:
    """The markers of the control batches among `headers`, read from `records`."""
    if positions is None:
        at, positions = 0, []
        for h in headers:
            positions.append(at)
            at += h.size

    def marker_of(i: int, h: BatchHeader) -> EndTxnMarker | None:
        return read_end_txn_marker(records, positions[i], h)

    return marker_of


def parse_partition_dir(name: str) -> tuple[str, int]:
    """`<topic>-<partition>` -> (topic, partition); topics may contain '-'."""
    topic, sep, partition = name.rpartition("-")
    if not sep or not topic or not partition.isdigit():
        raise ValueError(f"{name!r} is not a <topic>-<partition> directory name")
    return topic, int(partition)


class Log:
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
        self._dir = dir
        self.topic, self.partition = parse_partition_dir(dir.name)
        self._config = config
        self._segments = segments
        self._bases = [s.base_offset for s in segments]
        self._next_offset = log_end_offset
        self._log_start_offset = log_start_offset
        self._recovery_point = recovery_point
        self.leader_epoch_cache = epoch_cache
        self._now_ms = now_ms
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

    # -- properties ------------------------------------------------------------------------

    @property
    def dir(self) -> Path:
        return self._dir

    @property
    def config(self) -> LogConfig:
        return self._config

    @property
    def log_start_offset(self) -> int:
        return self._log_start_offset

    @property
    def log_end_offset(self) -> int:
        """The offset the next appended record gets."""
        return self._next_offset

    @property
    def recovery_point(self) -> int:
        """Everything below this offset has been fsynced."""
        return self._recovery_point

    @property
    def unflushed_messages(self) -> int:
        return self._next_offset - self._recovery_point

    @property
    def segments(self) -> list[LogSegment]:
        return list(self._segments)

    @property
    def active_segment(self) -> LogSegment:
        return self._segments[-1]

    @property
    def size_in_bytes(self) -> int:
        return sum(s.size for s in self._segments)

    @property
    def latest_epoch(self) -> int | None:
        return self.leader_epoch_cache.latest_epoch

    def update_config(self, config: LogConfig) -> None:
        self._config = config
        for segment in self._segments:
            segment.index_interval_bytes = config.index_interval_bytes

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
        count = 0
        max_ts = -1
        offset_of_max = -1
        for h in headers:
            count += h.last_offset_delta + 1
            if h.max_timestamp > max_ts:
                max_ts = h.max_timestamp
                offset_of_max = first_offset + count - 1
        last_offset = first_offset + count - 1
        log_append_time = -1
        if config.message_timestamp_type == "LogAppendTime":
            log_append_time = max_ts = self._now_ms()
            offset_of_max = first_offset
        # Idempotent producers: refuse or recognise a retry before anything is written.
        marker_of: Callable[[int, BatchHeader], EndTxnMarker | None] = _no_markers
        if origin is AppendOrigin.COORDINATOR:
            marker_of = _markers_in(records, headers)
        pending = self.producer_state.prepare_leader_append(
            headers, first_offset, log_append_time, origin, marker_of
        )
        if isinstance(pending, BatchMetadata):
            return self._duplicate_append_info(pending)
        size = len(records)
        segment = self._maybe_roll(size, max_ts, last_offset, first_offset)

        patched: list[BatchHeader] = []
        offset = first_offset
        pos = 0
        out: bytearray | list[bytes | bytearray | memoryview]
        if log_append_time < 0 and size >= _VECTORED_MIN_BATCH * len(headers):
            # Large batches: patch copies of the headers and write the rest from the request.
            view = memoryview(records)
            out = []
            for h in headers:
                head = bytearray(view[pos : pos + BATCH_HEADER_SIZE])
                set_base_offset(head, 0, offset)
                set_partition_leader_epoch(head, 0, leader_epoch)
                out.append(head)
                out.append(view[pos + BATCH_HEADER_SIZE : pos + h.batch_length + 12])
                patched.append(h._replace(base_offset=offset, partition_leader_epoch=leader_epoch))
                offset += h.last_offset_delta + 1
                pos += h.batch_length + 12
        else:
            # Small batches (or LogAppendTime, which rewrites the CRC): one copy, patched whole.
            out = bytearray(records)
            for h in headers:
                set_base_offset(out, pos, offset)
                set_partition_leader_epoch(out, pos, leader_epoch)
                if log_append_time >= 0:
                    set_log_append_time(out, pos, log_append_time)
                patched.append(read_batch_header(out, pos))
                offset += h.last_offset_delta + 1
                pos += h.batch_length + 12
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
        headers: list[BatchHeader] = []
        positions: list[int] = []
        expected = self._next_offset
        valid = 0
        max_ts, offset_of_max = -1, -1
        for pos, h in scan_batches(view):
            if h.magic != 2:
                raise CorruptRecordError(f"unsupported record magic v{h.magic} at byte {pos}")
            if not batch_crc_ok(view, pos, h):
                raise CorruptRecordError(f"record batch at byte {pos} fails its CRC check")
            if h.last_offset_delta < 0 or (headers and h.base_offset < expected):
                raise OffsetsOutOfOrderError(
                    f"batch at offset {h.base_offset} follows offset {expected - 1}"
                )
            if not headers and h.base_offset < self._next_offset:
                raise UnexpectedAppendOffsetError(
                    f"first offset {h.base_offset} is below the log end offset "
                    f"{self._next_offset} of {self.topic}-{self.partition}"
                )
            if h.max_timestamp > max_ts:
                max_ts, offset_of_max = h.max_timestamp, h.last_offset
            headers.append(h)
            positions.append(pos)
            expected = h.next_offset
            valid = pos + h.size
        if not headers:
            return LogAppendInfo(-1, -1, -1, -1, -1, self._log_start_offset, 0, 0)
        first_offset = headers[0].base_offset
        last_offset = headers[-1].last_offset
        segment = self._maybe_roll(valid, max_ts, last_offset, first_offset)
        segment.append(view[:valid], headers)
        self._next_offset = last_offset + 1
        self.producer_state.append_replicated(
            headers, self._next_offset, _markers_in(view, headers, positions)
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

    # -- read ------------------------------------------------------------------------------

    def read(
        self,
        fetch_offset: int,
        max_bytes: int,
        max_offset: int | None = None,
        min_one_message: bool = True,
        zero_copy: bool = False,
    ) -> FetchDataInfo:
        """Stored bytes of whole batches from the one holding `fetch_offset`.

        At most max_bytes (but the first batch whole if min_one_message), only batches
        that end below max_offset, all from one segment.
        """
        if fetch_offset < self._log_start_offset or fetch_offset > self._next_offset:
            raise OffsetOutOfRangeError(
                f"offset {fetch_offset} is outside [{self._log_start_offset}, "
                f"{self._next_offset}] of {self.topic}-{self.partition}"
            )
        end = self._next_offset if max_offset is None else min(max_offset, self._next_offset)
        if fetch_offset >= end:
            return FetchDataInfo(fetch_offset, b"")
        segments = self._segments
        bases = self._bases
        i = bisect.bisect_right(bases, fetch_offset) - 1
        while 0 <= i < len(segments):
            upper = bases[i + 1] if i + 1 < len(bases) else self._next_offset
            if bases[i] >= end:
                break
            bound = max_offset if max_offset is not None and max_offset < upper else None
            info = segments[i].read(fetch_offset, max_bytes, bound, min_one_message, zero_copy)
            if info is not None:
                if info.records and info.next_offset <= info.first_batch_offset:
                    # A segment loaded at start-up and read to its end does not know its own
                    # next offset: the next segment starts there.
                    info.next_offset = upper if bound is None else min(upper, bound)
                return info
            i += 1
        return FetchDataInfo(fetch_offset, b"")

    def batch_headers(self, start: int, end: int | None = None) -> Iterator[BatchHeader]:
        """Headers of the batches holding offsets in [start, end) (default: to the log end),
        read from the segments without their records."""
        stop = self._next_offset if end is None else end
        first = max(bisect.bisect_right(self._bases, start) - 1, 0)
        for segment in self._segments[first:]:
            if segment.base_offset >= stop:
                return
            for h in segment.batch_headers(start):
                if h.base_offset >= stop:
                    return
                yield h

    def offset_for_timestamp(self, timestamp_ms: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record with a timestamp >= `timestamp_ms`."""
        for segment in self._segments:
            if segment.max_timestamp_so_far >= timestamp_ms:
                found = segment.find_offset_by_timestamp(timestamp_ms, self._log_start_offset)
                if found is not None:
                    return found
        return None

    def latest_timestamp_offset(self) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record carrying the log's largest timestamp."""
        best: LogSegment | None = None
        for segment in self._segments:
            if best is None or segment.max_timestamp_so_far > best.max_timestamp_so_far:
                best = segment
        if best is None or best.max_timestamp_so_far < 0:
            return None
        return best.find_max_timestamp_record()

    # -- transactions ----------------------------------------------------------------------

    def last_stable_offset(self, high_watermark: int) -> int:
        """min(first offset of the transactions not complete and replicated, high watermark),
        never below the log start offset (retention may pass an open transaction's start, as
        Kafka's updateFirstUnstableOffset allows)."""
        lso = self.producer_state.last_stable_offset(high_watermark)
        if lso < self._log_start_offset:
            return min(self._log_start_offset, high_watermark)
        return lso

    def collect_aborted_txns(self, fetch_offset: int, upper_bound: int) -> list[AbortedTxn]:
        """The aborted transactions overlapping [fetch_offset, upper_bound): their markers
        are at or after fetch_offset, so the search starts at its segment."""
        found: list[AbortedTxn] = []
        first = max(bisect.bisect_right(self._bases, fetch_offset) - 1, 0)
        for segment in self._segments[first:]:
            if collect_aborted(segment.txn_index.entries, fetch_offset, upper_bound, found):
                break
        return found

    def append_aborted(self, txn: AbortedTxn) -> None:
        """The producer state closed an aborted transaction: index it in the segment that
        holds its marker."""
        i = max(bisect.bisect_right(self._bases, txn.last_offset) - 1, 0)
        self._segments[i].txn_index.append(txn)

    def truncate_aborted(self, offset: int) -> None:
        """Forget the aborted transactions whose markers are at or above `offset` (the
        producer state replays them from there)."""
        first = max(bisect.bisect_right(self._bases, offset) - 1, 0)
        for segment in self._segments[first:]:
            segment.txn_index.truncate_to(offset)

    def _stored_marker(self, i: int, h: BatchHeader) -> EndTxnMarker | None:
        """The marker of a stored control batch, read from its segment (replays only)."""
        j = bisect.bisect_right(self._bases, h.base_offset) - 1
        if j < 0:
            return None
        segment = self._segments[j]
        found = segment.translate_offset(h.base_offset)
        if found is None or found[1].base_offset != h.base_offset:
            return None
        try:
            return read_end_txn_marker(segment.read_batch(found[0], found[1]), 0, found[1])
        except CorruptRecordError as exc:
            log.warning("%s-%d: unreadable transaction marker: %s", self.topic, self.partition, exc)
            return None

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
            lambda segment, following: (
                following is not None and following.base_offset <= self._log_start_offset
            ),
            hw,
            "below the log start offset",
        )
        config = self._config
        if config.delete:
            if config.retention_bytes >= 0:
                excess = self.size_in_bytes - config.retention_bytes

                def over_size(segment: LogSegment, following: LogSegment | None) -> bool:
                    nonlocal excess
                    if excess - segment.size >= 0:
                        excess -= segment.size
                        return True
                    return False

                if excess > 0:
                    deleted += self._delete_where(over_size, hw, "retention.bytes")
            if config.retention_ms >= 0:
                now = self._now_ms()
                deleted += self._delete_where(
                    lambda segment, following: (
                        now - segment.largest_timestamp > config.retention_ms
                    ),
                    hw,
                    "retention.ms",
                )
        return deleted

    def _delete_where(
        self,
        predicate: Callable[[LogSegment, LogSegment | None], bool],
        high_watermark: int,
        reason: str,
    ) -> int:
        deletable: list[LogSegment] = []
        segments = self._segments
        for i, segment in enumerate(segments):
            following = segments[i + 1] if i + 1 < len(segments) else None
            upper = following.base_offset if following is not None else self._next_offset
            if following is None and segment.size == 0:
                break
            if high_watermark >= upper and predicate(segment, following):
                deletable.append(segment)
            else:
                break
        if not deletable:
            return 0
        if len(deletable) == len(segments):
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
