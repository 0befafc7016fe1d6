"""Kafka's sparse segment indexes: offset -> position (.index), timestamp -> offset (.timeindex).

The active segment's index lives in a bytearray and is written into its preallocated file
on flush, roll and close; a rolled segment's file is trimmed to its entries and read through
a read-only mmap when first needed.  Both are derivable from the .log, so the segment
rebuilds an index whose file is missing or inconsistent instead of trusting it.
"""

from __future__ import annotations

import mmap
import operator
import os
import struct
from pathlib import Path
from typing import ClassVar

from samsa.log.errors import InvalidOffsetError

_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


def _strictly_increasing(values: tuple[int, ...]) -> bool:
    return all(map(operator.lt, values, values[1:]))


def _non_decreasing(values: tuple[int, ...]) -> bool:
    return all(map(operator.le, values, values[1:]))


class _SparseIndex:
    """Entries of a fixed size, sorted, relative to the segment's base offset."""

    entry_size: ClassVar[int]
    _entry: ClassVar[struct.Struct]

    def __init__(self, path: Path, base_offset: int, max_index_size: int) -> None:
        self.path = path
        self.base_offset = base_offset
        self.max_index_size = max(max_index_size - max_index_size % self.entry_size, 0)
        self._max_entries = self.max_index_size // self.entry_size
        self._buf: bytearray | mmap.mmap | bytes = bytearray()
        self._entries = 0
        self._mutable = True
        self._loaded = True
        # How many leading entries the file already holds, and whether it may hold stale
        # entries after them (truncation, rebuild) that must be zeroed before they are reread.
        self._persisted = 0
        self._stale_tail = True
        self._needs_fsync = False

    # -- state ----------------------------------------------------------------------------

    @property
    def entries(self) -> int:
        return self._entries

    @property
    def max_entries(self) -> int:
        return self._max_entries

    @property
    def is_full(self) -> bool:
        return self._entries >= self._max_entries

    @property
    def loaded(self) -> bool:
        return self._loaded

    @property
    def mutable(self) -> bool:
        """In memory and appendable: the active segment's index."""
        return self._loaded and self._mutable

    @property
    def size_in_bytes(self) -> int:
        return self._entries * self.entry_size

    def reset(self) -> None:
        """Forget every entry; the file is rewritten on the next flush."""
        self._release()
        self._buf = bytearray()
        self._entries = 0
        self._mutable = True
        self._loaded = True
        self._persisted = 0
        self._stale_tail = True

    # -- file ------------------------------------------------------------------------------

    def create(self) -> None:
        """Start an empty, writable index with a fresh preallocated file."""
        self.reset()
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            os.ftruncate(fd, self.max_index_size)
        finally:
            os.close(fd)
        self._stale_tail = False
        self._needs_fsync = True

    def unload(self) -> None:
        """Mark a rolled segment's trimmed index for lazy loading on first use."""
        self._release()
        self._buf = b""
        self._entries = 0
        self._mutable = False
        self._loaded = False

    def quick_check(self, log_size: int, offset_limit: int | None) -> str | None:
        """Kafka's cheap sanity check of an unloaded index file: size and last entry."""
        try:
            size = os.path.getsize(self.path)
        except FileNotFoundError:
            return "is missing"
        if size % self.entry_size:
            return f"has size {size}, not a multiple of {self.entry_size}"
        if size == 0:
            return None
        with open(self.path, "rb") as f:
            f.seek(size - self.entry_size)
            last = f.read(self.entry_size)
        if len(last) != self.entry_size:
            return "could not be read"
        return self._check_bounds([self._entry.unpack(last)], log_size, offset_limit)

    def read_last_entry(self) -> tuple[int, int] | None:
        """The file's last entry as stored (relative offset), without loading the index."""
        try:
            with open(self.path, "rb") as f:
                size = f.seek(0, os.SEEK_END)
                if size < self.entry_size or size % self.entry_size:
                    return None
                f.seek(size - self.entry_size)
                last = f.read(self.entry_size)
        except FileNotFoundError:
            return None
        if size == self.max_index_size and last == bytes(self.entry_size):
            return None  # preallocated and never trimmed: the slot is unused
        return self._entry.unpack(last)

    def load(
        self, *, mutable: bool, log_size: int, offset_limit: int | None, check: bool = True
    ) -> str | None:
        """Read the file in; on a problem return what is wrong and leave the index empty."""
        self._release()
        try:
            size = os.path.getsize(self.path)
        except FileNotFoundError:
            self.reset()
            return "is missing"
        if size % self.entry_size:
            self.reset()
            return f"has size {size}, not a multiple of {self.entry_size}"
        buf: bytearray | mmap.mmap | bytes
        with open(self.path, "rb") as f:
            if mutable:
                buf = bytearray(f.read())
            elif size:
                buf = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
            else:
                buf = b""
        entries = len(buf) // self.entry_size
        if size == self.max_index_size and buf[-self.entry_size :] == bytes(self.entry_size):
            # Preallocated and never trimmed (an unclean shutdown): drop the unused slots.
            # (A zero entry is legitimate in a trimmed file: timestamp 0 at the base offset.)
            used = len(bytes(buf).rstrip(b"\x00"))
            entries = -(-used // self.entry_size)
            if not mutable:
                if isinstance(buf, mmap.mmap):
                    buf.close()
                buf = self._read_prefix(entries)
        if check:
            view = memoryview(buf)[: entries * self.entry_size]
            values = list(self._entry.iter_unpack(view))
            view.release()
            problem = self._check_order(values) or self._check_bounds(
                values, log_size, offset_limit
            )
            if problem:
                if isinstance(buf, mmap.mmap):
                    buf.close()
                self.reset()
                return problem
        if isinstance(buf, bytearray):
            del buf[entries * self.entry_size :]
        self._buf = buf
        self._entries = entries
        self._mutable = mutable
        self._loaded = True
        self._persisted = entries
        self._stale_tail = False
        if mutable and size < self.max_index_size:
            os.truncate(self.path, self.max_index_size)
        return None

    def make_mutable(self) -> None:
        """Become the active segment's index again: in memory, file preallocated."""
        if self._mutable and self._loaded:
            return
        assert self._loaded, "load the index before changing it"
        data = bytearray(self._buf[: self.size_in_bytes])
        self._release()
        self._buf = data
        self._mutable = True
        self._loaded = True
        try:
            if os.path.getsize(self.path) < self.max_index_size:
                os.truncate(self.path, self.max_index_size)
        except FileNotFoundError:
            self._persisted = 0
            self._stale_tail = True

    def flush(self, *, fsync: bool) -> None:
        """Write unsaved entries into the (still preallocated) file."""
        if self._mutable and (self._persisted < self._entries or self._stale_tail):
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                start = self._persisted * self.entry_size
                if self._stale_tail:
                    os.ftruncate(fd, start)
                    os.ftruncate(fd, max(self.max_index_size, self.size_in_bytes))
                    self._stale_tail = False
                self._pwrite_all(fd, memoryview(self._buf)[start:], start)
                if fsync:
                    os.fsync(fd)
            finally:
                os.close(fd)
            self._persisted = self._entries
            self._needs_fsync = not fsync
        elif fsync and self._needs_fsync:
            self._fsync_file()

    def trim(self) -> None:
        """Write every entry and cut the file to exactly their size (roll and close)."""
        if not self._loaded:
            return
        if self._mutable:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                start = 0 if self._stale_tail else self._persisted * self.entry_size
                self._pwrite_all(fd, memoryview(self._buf)[start:], start)
                os.ftruncate(fd, self.size_in_bytes)
            finally:
                os.close(fd)
            self._persisted = self._entries
            self._stale_tail = False
            self._needs_fsync = True

    def fsync(self) -> None:
        if self._needs_fsync:
            self._fsync_file()

    def close(self) -> None:
        self._release()
        self._buf = b""
        self._loaded = False

    def delete(self) -> None:
        self.close()
        self.path.unlink(missing_ok=True)

    # -- mutation --------------------------------------------------------------------------

    def truncate_to(self, offset: int) -> None:
        """Drop every entry whose offset is >= `offset`."""
        keep = self._first_at_or_after(offset - self.base_offset)
        if keep < self._entries:
            self.make_mutable()
            assert isinstance(self._buf, bytearray)
            del self._buf[keep * self.entry_size :]
            self._entries = keep
            if self._persisted > keep:
                self._persisted = keep
                self._stale_tail = True

    # -- internals -------------------------------------------------------------------------

    def _append_raw(self, entry: bytes) -> None:
        assert isinstance(self._buf, bytearray), "append to an index that was rolled"
        self._buf += entry
        self._entries += 1

    def _release(self) -> None:
        if isinstance(self._buf, mmap.mmap):
            self._buf.close()

    def _read_prefix(self, entries: int) -> bytes:
        with open(self.path, "rb") as f:
            return f.read(entries * self.entry_size)

    def _fsync_file(self) -> None:
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except FileNotFoundError:
            return
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        self._needs_fsync = False

    @staticmethod
    def _pwrite_all(fd: int, data: memoryview, pos: int) -> None:
        while data:
            written = os.pwrite(fd, data, pos)
            data = data[written:]
            pos += written

    def _first_at_or_after(self, relative_offset: int) -> int:
        raise NotImplementedError

    def _check_order(self, values: list[tuple[int, int]]) -> str | None:
        raise NotImplementedError

    def _check_bounds(
        self, values: list[tuple[int, int]], log_size: int, offset_limit: int | None
    ) -> str | None:
        raise NotImplementedError


class OffsetIndex(_SparseIndex):
    """Entries (relative offset int32, position int32): the batch ending at that offset
    starts at that byte of the .log (Kafka indexes a batch by its last offset)."""

    entry_size = 8
    _entry = struct.Struct(">ii")

    @property
    def last_offset(self) -> int:
        """The offset of the last entry, or the base offset when empty."""
        if not self._entries:
            return self.base_offset
        return self.base_offset + _I32.unpack_from(self._buf, (self._entries - 1) * 8)[0]

    def entry(self, n: int) -> tuple[int, int]:
        """Entry `n` as (absolute offset, position)."""
        rel, pos = self._entry.unpack_from(self._buf, n * 8)
        return self.base_offset + rel, pos

    def append(self, offset: int, position: int) -> None:
        if self._entries and offset <= self.last_offset:
            raise InvalidOffsetError(
                f"offset {offset} is not larger than the last indexed offset {self.last_offset}"
                f" in {self.path}"
            )
        if self.is_full:
            raise InvalidOffsetError(f"index {self.path} is full")
        self._append_raw(self._entry.pack(offset - self.base_offset, position))

    def lookup(self, target_offset: int) -> tuple[int, int]:
        """The entry with the largest offset <= target, or (base offset, 0)."""
        n = self._entries
        if not n:
            return self.base_offset, 0
        rel = target_offset - self.base_offset
        buf = self._buf
        unpack = _I32.unpack_from
        if unpack(buf, (n - 1) * 8)[0] <= rel:
            found = n - 1
        else:
            lo, hi, found = 0, n - 2, -1
            while lo <= hi:
                mid = (lo + hi) >> 1
                if unpack(buf, mid * 8)[0] <= rel:
                    found = mid
                    lo = mid + 1
                else:
                    hi = mid - 1
            if found < 0:
                return self.base_offset, 0
        off, pos = self._entry.unpack_from(buf, found * 8)
        return self.base_offset + off, pos

    def lookup_position(self, position: int) -> tuple[int, int]:
        """The entry with the largest position <= `position`, or (base offset, 0)."""
        lo, hi, found = 0, self._entries - 1, -1
        buf = self._buf
        unpack = _I32.unpack_from
        while lo <= hi:
            mid = (lo + hi) >> 1
            if unpack(buf, mid * 8 + 4)[0] <= position:
                found = mid
                lo = mid + 1
            else:
                hi = mid - 1
        if found < 0:
            return self.base_offset, 0
        off, pos = self._entry.unpack_from(buf, found * 8)
        return self.base_offset + off, pos

    def _first_at_or_after(self, relative_offset: int) -> int:
        lo, hi = 0, self._entries
        while lo < hi:
            mid = (lo + hi) >> 1
            if _I32.unpack_from(self._buf, mid * 8)[0] < relative_offset:
                lo = mid + 1
            else:
                hi = mid
        return lo

    def _check_order(self, values: list[tuple[int, int]]) -> str | None:
        if not values:
            return None
        offsets, positions = zip(*values, strict=True)
        if not _strictly_increasing(offsets):
            return "has offsets that do not increase"
        if not _strictly_increasing(positions):
            return "has positions that do not increase"
        return None

    def _check_bounds(
        self, values: list[tuple[int, int]], log_size: int, offset_limit: int | None
    ) -> str | None:
        if not values:
            return None
        first_rel, first_pos = values[0]
        last_rel, last_pos = values[-1]
        if first_rel < 0 or first_pos < 0:
            return f"has a negative first entry ({first_rel}, {first_pos})"
        if last_pos >= log_size:
            return f"points at position {last_pos}, beyond the log's {log_size} bytes"
        if offset_limit is not None and self.base_offset + last_rel >= offset_limit:
            return f"names offset {self.base_offset + last_rel}, beyond the segment"
        return None


class TimeIndex(_SparseIndex):
    """Entries (timestamp int64, relative offset int32): the largest timestamp seen up to
    and including the batch that ends at that offset."""

    entry_size = 12
    _entry = struct.Struct(">qi")

    @property
    def is_full(self) -> bool:
        # One slot stays free for the entry written when the segment is rolled.
        return self._entries >= self._max_entries - 1

    @property
    def last_entry(self) -> tuple[int, int]:
        """(timestamp, absolute offset) of the last entry, or (-1, base offset)."""
        if not self._entries:
            return -1, self.base_offset
        ts, rel = self._entry.unpack_from(self._buf, (self._entries - 1) * 12)
        return ts, self.base_offset + rel

    def entry(self, n: int) -> tuple[int, int]:
        """Entry `n` as (timestamp, absolute offset)."""
        ts, rel = self._entry.unpack_from(self._buf, n * 12)
        return ts, self.base_offset + rel

    def maybe_append(self, timestamp: int, offset: int, *, skip_full_check: bool = False) -> None:
        """Add (timestamp, offset) if the timestamp is a new maximum."""
        last_ts, last_offset = self.last_entry
        if self._entries and offset < last_offset:
            raise InvalidOffsetError(
                f"offset {offset} is below the last time-indexed offset {last_offset}"
                f" in {self.path}"
            )
        if self._entries and timestamp < last_ts:
            raise InvalidOffsetError(
                f"timestamp {timestamp} is below the last indexed timestamp {last_ts}"
                f" in {self.path}"
            )
        if timestamp > last_ts:
            if self._entries >= self.max_entries or (self.is_full and not skip_full_check):
                raise InvalidOffsetError(f"time index {self.path} is full")
            self._append_raw(self._entry.pack(timestamp, offset - self.base_offset))

    def lookup(self, target_timestamp: int) -> tuple[int, int]:
        """The entry with the largest timestamp <= target, or (-1, base offset)."""
        lo, hi, found = 0, self._entries - 1, -1
        buf = self._buf
        unpack = _I64.unpack_from
        while lo <= hi:
            mid = (lo + hi) >> 1
            if unpack(buf, mid * 12)[0] <= target_timestamp:
                found = mid
                lo = mid + 1
            else:
                hi = mid - 1
        if found < 0:
            return -1, self.base_offset
        return self.entry(found)

    def _first_at_or_after(self, relative_offset: int) -> int:
        lo, hi = 0, self._entries
        while lo < hi:
            mid = (lo + hi) >> 1
            if _I32.unpack_from(self._buf, mid * 12 + 8)[0] < relative_offset:
                lo = mid + 1
            else:
                hi = mid
        return lo

    def _check_order(self, values: list[tuple[int, int]]) -> str | None:
        if not values:
            return None
        timestamps, offsets = zip(*values, strict=True)
        if not _strictly_increasing(timestamps):
            return "has timestamps that do not increase"
        if not _non_decreasing(offsets):
            return "has offsets that decrease"
        return None

    def _check_bounds(
        self, values: list[tuple[int, int]], log_size: int, offset_limit: int | None
    ) -> str | None:
        if not values:
            return None
        if values[0][1] < 0:
            return f"has a negative relative offset {values[0][1]}"
        last = self.base_offset + values[-1][1]
        if offset_limit is not None and last >= offset_limit:
            return f"names offset {last}, beyond the segment"
        return None
