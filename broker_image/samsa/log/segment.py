"""One log segment: the `<base offset>.log` file of batches and its two sparse indexes.

Kafka's LogSegment.  Batches are appended with one pwrite each call and read back with
pread on a descriptor kept open for the segment's lifetime; only batch headers are ever
parsed.  The segment owns its files: appends, reads and searches by offset and by
timestamp, recovery and index upkeep, flushes, renames and deletion.  The walk over the
file's batches is samsa.log.file_records', and the rules recovery checks them by are
samsa.log.segment_recovery's.
"""

from __future__ import annotations

import contextlib
import logging
import os
import random
from bisect import bisect_left
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from samsa.config.topic import LogConfig
from samsa.log.errors import out_of_space
from samsa.log.file_records import RECOVERY_CHUNK, SCAN_CHUNK, file_batches, pwrite_all
from samsa.log.index import OffsetIndex, TimeIndex
from samsa.log.info import FetchDataInfo
from samsa.log.segment_recovery import INT32_MAX, index_valid_batches, trusted_tail
from samsa.log.txn_index import TXN_INDEX_SUFFIX, TransactionIndex
from samsa.protocol.fileregion import FileRegion
from samsa.protocol.record_batch import (
    BATCH_HEADER_SIZE,
    LOG_OVERHEAD,
    BatchHeader,
    decode_records,
    read_batch_header,
)

# Below this a copy through Python is cheaper than setting up a sendfile.
ZERO_COPY_MIN_BYTES = 32 * 1024

log = logging.getLogger(__name__)

# Batches kept in a segment's tail: an index interval (4 KiB) holds fewer of any real size.
_TAIL_MAX = 64

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
DELETED_SUFFIX = ".deleted"
CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"


def file_stem(base_offset: int) -> str:
    """Kafka's file name for a segment: its base offset, zero-padded to 20 digits."""
    return f"{base_offset:020d}"


class LogSegment:
    """Batches with offsets from base_offset up, in one file, plus their indexes."""

    def __init__(
        self,
        dir: Path,
        base_offset: int,
        fd: int,
        size: int,
        config: LogConfig,
        created_ms: int,
        suffix: str = "",
    ) -> None:
        self.base_offset = base_offset
        self.log_path = dir / (file_stem(base_offset) + LOG_SUFFIX + suffix)
        self.offset_index = OffsetIndex(
            dir / (file_stem(base_offset) + INDEX_SUFFIX + suffix),
            base_offset,
            config.segment_index_bytes,
        )
        self.time_index = TimeIndex(
            dir / (file_stem(base_offset) + TIME_INDEX_SUFFIX + suffix),
            base_offset,
            config.segment_index_bytes,
        )
        # Aborted transactions whose markers are in this segment (read_committed fetches).
        self.txn_index = TransactionIndex(
            dir / (file_stem(base_offset) + TXN_INDEX_SUFFIX + suffix), load=True
        )
        self._fd = fd
        self._size = size
        self.created_ms = created_ms
        self.index_interval_bytes = config.index_interval_bytes
        jitter = min(config.segment_jitter_ms, config.segment_ms)
        self.roll_jitter_ms = random.randrange(jitter) if jitter > 0 else 0
        # None: not known yet (a rolled segment's value is read from its time index lazily).
        self._max_timestamp: int | None = -1
        self._offset_of_max_timestamp = -1
        self._next_offset = base_offset
        self._bytes_since_index_entry = 0
        self._rolling_timestamp: int | None = None
        self._dirty = False
        # The last batches appended, (last offset, position, header), up to the end of the
        # file: consumers and followers read at the tail, and finding their batch by a walk of
        # headers from the index entry before it was a read and a parse of a dozen headers on
        # every fetch. Emptied by anything but an append that changes the file.
        self._tail: list[tuple[int, int, BatchHeader]] = []

    # -- construction ----------------------------------------------------------------------

    @classmethod
    def create(
        cls, dir: Path, base_offset: int, config: LogConfig, now_ms: int, suffix: str = ""
    ) -> LogSegment:
        """A new, empty segment with fresh files (any old ones at this offset are replaced).

        A `suffix` (`.cleaned`) names the files of a segment the log cleaner is writing.
        """
        path = dir / (file_stem(base_offset) + LOG_SUFFIX + suffix)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
        segment = cls(dir, base_offset, fd, 0, config, now_ms, suffix)
        segment.offset_index.create()
        segment.time_index.create()
        segment.txn_index.reset()
        segment._dirty = True
        return segment

    @classmethod
    def open(cls, dir: Path, base_offset: int, config: LogConfig, now_ms: int) -> LogSegment:
        """An existing segment; the loader then either recovers it or trusts it."""
        path = dir / (file_stem(base_offset) + LOG_SUFFIX)
        fd = os.open(path, os.O_RDWR)
        segment = cls(dir, base_offset, fd, os.fstat(fd).st_size, config, now_ms)
        segment.offset_index.unload()
        segment.time_index.unload()
        segment._max_timestamp = None
        return segment

    # -- properties ------------------------------------------------------------------------

    @property
    def size(self) -> int:
        return self._size

    @property
    def next_offset(self) -> int:
        """One past the last offset in this segment (meaningful for the active segment)."""
        return self._next_offset

    @property
    def max_timestamp_so_far(self) -> int:
        if self._max_timestamp is None:
            self._ensure_indexes()
            ts, offset = self.time_index.last_entry
            self._max_timestamp, self._offset_of_max_timestamp = ts, offset
        return self._max_timestamp

    @property
    def offset_of_max_timestamp_so_far(self) -> int:
        _ = self.max_timestamp_so_far
        return self._offset_of_max_timestamp

    @property
    def largest_timestamp(self) -> int:
        """The max timestamp, or the file's mtime when no batch has one (Kafka's rule)."""
        ts = self.max_timestamp_so_far
        if ts >= 0:
            return ts
        return int(os.stat(self.log_path).st_mtime * 1000)

    # -- append ----------------------------------------------------------------------------

    def should_roll(
        self,
        messages_size: int,
        max_timestamp_in_messages: int,
        max_offset_in_messages: int,
        now_ms: int,
        config: LogConfig,
    ) -> bool:
        """Kafka's LogSegment.shouldRoll, with the size and age rules only for a non-empty
        segment (a batch bigger than segment.bytes still goes into an empty one)."""
        if max_offset_in_messages - self.base_offset > INT32_MAX:
            return True
        if self.offset_index.is_full or self.time_index.is_full:
            return True
        if self._size == 0:
            return False
        if self._size + messages_size > config.segment_bytes:
            return True
        rolling = self._rolling_based_timestamp()
        waited = (
            max_timestamp_in_messages - rolling
            if rolling is not None and rolling >= 0
            else now_ms - self.created_ms
        )
        return waited > config.segment_ms - self.roll_jitter_ms

    def append(
        self,
        records: bytes | bytearray | memoryview | list[bytes | bytearray | memoryview],
        headers: Sequence[BatchHeader],
    ) -> None:
        """Write the batches (their headers already final) in one write, then index them.

        `records` may be a list of buffers that together make the batches (patched headers
        and the untouched rest), written with one pwritev so nothing is copied in Python.
        """
        position = self._size
        buffers = records if isinstance(records, list) else [records]
        try:
            written = pwrite_all(self._fd, buffers, position)
        except OSError:
            # Leave no partial batch behind for the next append to build on.
            self._tail = []
            os.ftruncate(self._fd, position)
            raise
        self._size = position + written
        self._dirty = True
        if self._rolling_timestamp is None and position == 0 and headers:
            self._rolling_timestamp = headers[0].max_timestamp
        max_ts = self.max_timestamp_so_far
        offset_index = self.offset_index
        time_index = self.time_index
        since = self._bytes_since_index_entry
        interval = self.index_interval_bytes
        tail = self._tail
        for h in headers:
            last = h.base_offset + h.last_offset_delta
            if h.max_timestamp > max_ts:
                max_ts = h.max_timestamp
                self._offset_of_max_timestamp = last
            if since > interval:
                if not offset_index.is_full:
                    offset_index.append(last, position)
                if not time_index.is_full:
                    time_index.maybe_append(max_ts, self._offset_of_max_timestamp)
                since = 0
                # The index finds what is before this batch quickly enough.
                tail.clear()
            tail.append((last, position, h))
            size = h.batch_length + LOG_OVERHEAD
            since += size
            position += size
        if len(tail) > _TAIL_MAX:
            del tail[: len(tail) - _TAIL_MAX // 2]
        self._bytes_since_index_entry = since
        self._max_timestamp = max_ts
        if headers:
            last_h = headers[-1]
            self._next_offset = last_h.base_offset + last_h.last_offset_delta + 1

    # -- read ------------------------------------------------------------------------------

    def translate_offset(
        self, offset: int, start_position: int = 0
    ) -> tuple[int, BatchHeader] | None:
        """(position, header) of the first batch whose last offset is >= `offset`."""
        tail = self._tail
        if tail and offset >= tail[0][2].base_offset:
            # Nothing before the tail ends at or after `offset`, and the tail ends the file.
            i = bisect_left(tail, (offset,))
            if i == len(tail):
                return None
            _, position, header = tail[i]
            if position >= start_position:
                return position, header
        self._ensure_indexes()
        _, position = self.offset_index.lookup(offset)
        for pos, h, _ in file_batches(
            self._fd, max(position, start_position), self._size, SCAN_CHUNK
        ):
            if h.base_offset + h.last_offset_delta >= offset:
                return pos, h
        return None

    def read(
        self,
        fetch_offset: int,
        max_bytes: int,
        max_offset: int | None = None,
        min_one_message: bool = True,
        zero_copy: bool = False,
    ) -> FetchDataInfo | None:
        """Whole batches from the one holding fetch_offset; None if this segment has none.

        Batches whose last offset is >= max_offset are left out (Kafka's maxPosition).
        """
        found = self.translate_offset(fetch_offset)
        if found is None:
            return None
        start, first = found
        end, end_offset = self._size, self.next_offset
        if max_offset is not None:
            if first.last_offset >= max_offset:
                return FetchDataInfo(fetch_offset, b"", -1, self.base_offset, start)
            bound = self.translate_offset(max_offset, start)
            if bound is not None:
                end, end_offset = bound[0], bound[1].base_offset
        limit = max_bytes
        if min_one_message and first.size > limit:
            limit = first.size
        cut = end
        if end - start > limit:
            cut, end_offset = self._boundary_at_or_before(start, start + limit, first)
        if cut <= start:
            return FetchDataInfo(fetch_offset, b"", -1, self.base_offset, start)
        data: bytes | FileRegion
        if zero_copy and cut - start >= ZERO_COPY_MIN_BYTES:
            data = FileRegion(self._fd, start, cut - start)
        else:
            data = os.pread(self._fd, cut - start, start)
        return FetchDataInfo(
            fetch_offset, data, first.base_offset, self.base_offset, start, end_offset
        )

    def read_batch(self, position: int, header: BatchHeader) -> bytes:
        return os.pread(self._fd, header.size, position)

    def iter_batches(
        self, start: int = 0, chunk: int = RECOVERY_CHUNK
    ) -> Iterator[tuple[int, BatchHeader, memoryview]]:
        """(position, header, bytes) of each complete batch from byte `start`, read in
        chunks of about `chunk` bytes (the log cleaner's sequential read)."""
        for pos, h, view in file_batches(self._fd, start, self._size, chunk, need_bytes=True):
            assert view is not None
            yield pos, h, view

    def batch_headers(self, start_offset: int | None = None) -> Iterator[BatchHeader]:
        """Headers of the batches from the one holding `start_offset` (default: the first)
        to the end; reads headers only, for state rebuilt from the log."""
        position = 0
        if start_offset is not None and start_offset > self.base_offset:
            found = self.translate_offset(start_offset)
            if found is None:
                return
            position = found[0]
        for _, h, _ in file_batches(self._fd, position, self._size, SCAN_CHUNK):
            yield h

    def find_offset_by_timestamp(self, timestamp: int, start_offset: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record at or after start_offset with a
        timestamp >= `timestamp`; decodes only the one batch that holds it."""
        self._ensure_indexes()
        # Every record up to the entry's offset has a timestamp below the target.
        _, below = self.time_index.lookup(timestamp - 1)
        _, position = self.offset_index.lookup(max(below, start_offset))
        for pos, h, _ in file_batches(self._fd, position, self._size, SCAN_CHUNK):
            if h.max_timestamp < timestamp or h.base_offset + h.last_offset_delta < start_offset:
                continue
            for record in decode_records(self.read_batch(pos, h)):
                if record.timestamp >= timestamp and record.offset >= start_offset:
                    return record.offset, record.timestamp
        return None

    def find_max_timestamp_record(self) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record carrying this segment's max timestamp."""
        max_ts = self.max_timestamp_so_far
        if max_ts < 0:
            return None
        found = self.translate_offset(self._offset_of_max_timestamp)
        if found is None:
            return None
        pos, h = found
        for record in decode_records(self.read_batch(pos, h)):
            if record.timestamp == max_ts:
                return record.offset, record.timestamp
        return None

    # -- recovery and index upkeep ---------------------------------------------------------

    def recover(
        self,
        *,
        check_crc: bool = True,
        truncate: bool = True,
        offset_limit: int | None = None,
        on_batch: Callable[[BatchHeader], None] | None = None,
    ) -> tuple[int, int, str | None]:
        """Walk every batch, rebuild both indexes, and cut the file at the first bad batch.

        Returns (valid bytes, bytes dropped, why).  With truncate=False (rebuilding the
        indexes of a trusted segment) nothing is cut and dropped counts what was skipped.
        """
        self.offset_index.reset()
        self.time_index.reset()
        chunk = RECOVERY_CHUNK if check_crc else SCAN_CHUNK
        found = index_valid_batches(
            file_batches(self._fd, 0, self._size, chunk, need_bytes=check_crc),
            self.base_offset,
            self.index_interval_bytes,
            self.offset_index,
            self.time_index,
            offset_limit,
            on_batch,
        )
        valid, reason = found.valid, found.reason
        max_ts, offset_of_max = found.max_timestamp, found.offset_of_max_timestamp
        if reason is None and valid < self._size:
            reason = "an incomplete batch"
        self._tail = []
        dropped = self._size - valid
        if truncate and dropped:
            os.ftruncate(self._fd, valid)
            self._size = valid
            self._dirty = True
        time_index = self.time_index
        if max_ts >= 0 and time_index.entries < time_index.max_entries:
            time_index.maybe_append(max_ts, offset_of_max, skip_full_check=True)
        self._max_timestamp, self._offset_of_max_timestamp = max_ts, offset_of_max
        self._next_offset = found.next_offset
        self._bytes_since_index_entry = valid - found.last_index_position
        self._rolling_timestamp = None
        return valid, dropped, reason

    def check_indexes(self, offset_limit: int | None) -> str | None:
        """Kafka's cheap sanity check of a trusted segment's index files; None if fine."""
        for index in (self.offset_index, self.time_index):
            problem = index.quick_check(self._size, offset_limit)
            if problem:
                return f"{index.path} {problem}"
        return None

    def rebuild_indexes(self, why: str) -> None:
        """Recreate both indexes from the .log of a segment that is otherwise trusted."""
        log.warning("rebuilding the indexes of %s: %s", self.log_path, why)
        _, skipped, reason = self.recover(check_crc=False, truncate=False)
        if skipped:
            log.warning(
                "%s has %d unreadable bytes at its end (%s); they are not indexed",
                self.log_path,
                skipped,
                reason,
            )

    def make_active(self) -> bool:
        """Load the indexes for appending and find the end of the data.

        Returns False if the file does not end on a batch boundary (it needs recovery).
        """
        if not self.offset_index.loaded or not self.time_index.loaded:
            problem = self._load_indexes(mutable=True)
            if problem:
                self.rebuild_indexes(problem)
        self._make_indexes_mutable()
        whole = self._restore_tail_state()
        # The sanity check cannot bound the active segment's time index before its end is
        # known: an entry past the end would make every later time entry look out of order.
        ts, offset = self.time_index.last_entry
        if self.time_index.entries and offset >= self._next_offset:
            self.rebuild_indexes(
                f"{self.time_index.path} names offset {offset} (at time {ts}), beyond the "
                f"segment's end {self._next_offset}"
            )
            self._make_indexes_mutable()
            whole = self._restore_tail_state()
        return whole

    def _make_indexes_mutable(self) -> None:
        for index in (self.offset_index, self.time_index):
            index.make_mutable()
            # Recovery rebuilt it in memory: put the preallocated file back in step.
            try:
                index.flush(fsync=False)
            except OSError as exc:
                # A full disk: the index is whole in memory and the next flush writes it;
                # failing here would leave a truncation half done.
                if not out_of_space(exc):
                    raise
                log.warning("%s: no space to write; written on the next flush", index.path)

    def seal(self) -> None:
        """This segment stops being the active one: final time index entry, trim the
        index files, and read them through mmap from now on."""
        self._tail = []  # reads at the tail go to the next segment
        self._append_final_time_index_entry()
        for index in (self.offset_index, self.time_index):
            index.trim()
            index.load(mutable=False, log_size=self._size, offset_limit=None, check=False)

    def truncate_to(self, offset: int) -> int:
        """Drop every batch whose last offset is >= `offset`; returns the bytes dropped."""
        self._ensure_indexes()
        found = self.translate_offset(offset)
        if found is None:
            return 0
        position, h = found
        self._tail = []
        self.offset_index.truncate_to(h.base_offset)
        self.time_index.truncate_to(h.base_offset)
        self.txn_index.truncate_to(h.base_offset)
        dropped = self._size - position
        os.ftruncate(self._fd, position)
        self._size = position
        self._dirty = True
        self._restore_tail_state()
        if position == 0:
            self._rolling_timestamp = None
        return dropped

    def flush(self) -> None:
        """fsync the .log and both index files."""
        if self._dirty:
            os.fdatasync(self._fd)
            self._dirty = False
        for index in (self.offset_index, self.time_index):
            index.flush(fsync=True)
            index.fsync()
        self.txn_index.flush()

    def close(self) -> None:
        """Trim the indexes and close the file (no fsync: flush first for durability)."""
        if self.offset_index.mutable and self.time_index.mutable:
            self._append_final_time_index_entry()
            self.offset_index.trim()
            self.time_index.trim()
        self.offset_index.close()
        self.time_index.close()
        self._close_fd()

    def close_handles(self) -> None:
        """Release the descriptor and mmaps without writing anything."""
        self.offset_index.close()
        self.time_index.close()
        self._close_fd()

    def delete(self) -> None:
        """Close, rename every file to .deleted, then remove them."""
        self.close_handles()
        paths = [self.log_path, self.offset_index.path, self.time_index.path]
        for path in paths:
            with contextlib.suppress(FileNotFoundError):
                os.replace(path, str(path) + DELETED_SUFFIX)
        for path in paths:
            Path(str(path) + DELETED_SUFFIX).unlink(missing_ok=True)
        self.txn_index.delete()

    # -- internals -------------------------------------------------------------------------

    def _close_fd(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def _append_final_time_index_entry(self) -> None:
        ts = self._max_timestamp
        index = self.time_index
        if ts is not None and ts >= 0 and index.mutable and index.entries < index.max_entries:
            index.maybe_append(ts, self._offset_of_max_timestamp, skip_full_check=True)

    def _rolling_based_timestamp(self) -> int | None:
        if self._rolling_timestamp is None and self._size >= BATCH_HEADER_SIZE:
            head = os.pread(self._fd, BATCH_HEADER_SIZE, 0)
            if len(head) == BATCH_HEADER_SIZE:
                self._rolling_timestamp = read_batch_header(head).max_timestamp
        return self._rolling_timestamp

    def _load_indexes(self, *, mutable: bool) -> str | None:
        for index in (self.offset_index, self.time_index):
            problem = index.load(mutable=mutable, log_size=self._size, offset_limit=None)
            if problem:
                return f"{index.path} {problem}"
        return None

    def _ensure_indexes(self) -> None:
        if self.offset_index.loaded and self.time_index.loaded:
            return
        problem = self._load_indexes(mutable=False)
        if problem:
            # Rebuilt from the .log, then written back so the next load finds them whole.
            self.rebuild_indexes(problem)
            self.seal()

    def _restore_tail_state(self) -> bool:
        """Recompute next offset, max timestamp and index spacing from the last index
        entry onward; True if the file ends exactly on a batch boundary."""
        self._tail = []
        index = self.offset_index
        position = 0
        if index.entries:
            _, position = index.entry(index.entries - 1)
        ts, offset = self.time_index.last_entry
        max_ts, offset_of_max = (ts, offset) if ts >= 0 else (-1, -1)
        next_offset, end, max_ts, offset_of_max = trusted_tail(
            file_batches(self._fd, position, self._size, SCAN_CHUNK),
            self.base_offset,
            position,
            max_ts,
            offset_of_max,
        )
        if index.entries and next_offset == self.base_offset:
            next_offset = index.last_offset + 1
        self._next_offset = next_offset
        self._max_timestamp, self._offset_of_max_timestamp = max_ts, offset_of_max
        self._bytes_since_index_entry = end - position
        return end == self._size

    def _boundary_at_or_before(self, start: int, limit: int, first: BatchHeader) -> tuple[int, int]:
        """The last batch boundary in [start, limit] and the offset that follows it; `start`
        must be a boundary, at the batch `first`."""
        _, position = self.offset_index.lookup_position(limit)
        best, next_offset = start, first.base_offset
        for pos, h, _ in file_batches(self._fd, max(position, start), self._size, SCAN_CHUNK):
            end = pos + h.batch_length + LOG_OVERHEAD
            if end > limit:
                if pos > best:
                    # The index entry skipped the batches in between: they all fit.
                    best, next_offset = pos, h.base_offset
                break
            best, next_offset = end, h.base_offset + h.last_offset_delta + 1
        return best, next_offset


__all__ = [
    "CLEANED_SUFFIX",
    "DELETED_SUFFIX",
    "INDEX_SUFFIX",
    "LOG_SUFFIX",
    "SWAP_SUFFIX",
    "TIME_INDEX_SUFFIX",
    "LogSegment",
    "file_stem",
]
