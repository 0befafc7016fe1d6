"""The aborted transactions index: `<20-digit base offset>.txnindex` beside each segment
(Kafka's TransactionIndex).

One 34-byte entry per aborted transaction whose abort marker is in the segment, in marker
order, laid out as Kafka lays it out:

    int16 version (0), int64 producer id, int64 first offset, int64 last offset (the
    marker's), int64 last stable offset (the LSO once this transaction was complete)

A read_committed Fetch answers the entries overlapping what it returns, so the consumer can
drop the aborted records.  The file is created with the first entry (most segments never
have one), written with one `write` per entry and fsynced with its segment.  A torn last
entry (a crash in mid-write) is dropped on open; recovery rebuilds the tail anyway.
"""

from __future__ import annotations

import contextlib
import logging
import os
import struct
from collections.abc import Iterable
from pathlib import Path
from typing import NamedTuple

from samsa.log.errors import out_of_space

log = logging.getLogger(__name__)

TXN_INDEX_SUFFIX = ".txnindex"
ABORTED_TXN_VERSION = 0
_ENTRY = struct.Struct(">hqqqq")
ENTRY_SIZE = _ENTRY.size
assert ENTRY_SIZE == 34


class AbortedTxn(NamedTuple):
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int


class CorruptIndexError(ValueError):
    """A txnindex entry with an unknown version."""


def encode_entries(entries: Iterable[AbortedTxn]) -> bytes:
    return b"".join(_ENTRY.pack(ABORTED_TXN_VERSION, *e) for e in entries)


def decode_entries(data: bytes | memoryview, name: str = "txnindex") -> list[AbortedTxn]:
    """Whole entries only; a trailing partial one is ignored."""
    out = []
    for pos in range(0, len(data) - ENTRY_SIZE + 1, ENTRY_SIZE):
        version, *fields = _ENTRY.unpack_from(data, pos)
        if version != ABORTED_TXN_VERSION:
            raise CorruptIndexError(f"{name}: entry at byte {pos} has version {version}")
        out.append(AbortedTxn(*fields))
    return out


def collect_aborted(
    entries: Iterable[AbortedTxn], fetch_offset: int, upper_bound: int, into: list[AbortedTxn]
) -> bool:
    """Add the entries overlapping [fetch_offset, upper_bound) to `into`; True once an entry
    shows that no later one can overlap (its last stable offset reached upper_bound), as
    Kafka's collectAbortedTxns."""
    for e in entries:
        if e.last_offset >= fetch_offset and e.first_offset < upper_bound:
            into.append(e)
        if e.last_stable_offset >= upper_bound:
            return True
    return False


class TransactionIndex:
    """One segment's aborted transactions, kept in memory and mirrored to its file."""

    def __init__(self, path: Path, load: bool = False) -> None:
        self.path = path
        self.entries: list[AbortedTxn] = []
        self._dirty = False
        # Entries in memory that the file lacks (an append met a full disk).
        self._unsaved = False
        if load:
            self._load()

    def _load(self) -> None:
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return
        try:
            self.entries = decode_entries(data, str(self.path))
        except CorruptIndexError as exc:
            # Recovery rebuilds what replaying the log can; the rest is reported.
            log.warning("%s; ignoring the index", exc)
            self.entries = []
            self._rewrite()
            return
        if len(data) % ENTRY_SIZE:
            log.warning("%s ends in a torn entry; dropping it", self.path)
            self._rewrite()

    def append(self, txn: AbortedTxn) -> None:
        if self.entries and txn.last_offset < self.entries[-1].last_offset:
            raise ValueError(
                f"aborted transaction ending at {txn.last_offset} is out of order in "
                f"{self.path} (last ends at {self.entries[-1].last_offset})"
            )
        self.entries.append(txn)
        self._dirty = True
        if self._unsaved:
            return  # the next flush rewrites the whole file
        entry = _ENTRY.pack(ABORTED_TXN_VERSION, *txn)
        try:
            fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            try:
                size = os.fstat(fd).st_size
                try:
                    if os.write(fd, entry) == len(entry):
                        return
                finally:
                    # A short write leaves a torn entry: cut it off (shrinking needs no space).
                    if os.fstat(fd).st_size != size + len(entry):
                        os.ftruncate(fd, size)
            finally:
                os.close(fd)
        except OSError as exc:
            if not out_of_space(exc):
                raise
        # A full disk: the abort marker is already in the log, so the entry must not be lost
        # (read_committed fetches use it); it is kept in memory and written by the next flush.
        log.warning("%s: no space for an aborted transaction; written on the next flush", self.path)
        self._unsaved = True

    def truncate_to(self, offset: int) -> None:
        """Drop the entries whose marker is at or above `offset`."""
        keep = [e for e in self.entries if e.last_offset < offset]
        if len(keep) != len(self.entries):
            self.entries = keep
            self._rewrite()

    def reset(self) -> None:
        self.entries = []
        self._unsaved = False
        self.path.unlink(missing_ok=True)

    def _rewrite(self) -> None:
        if not self.entries:
            self.path.unlink(missing_ok=True)
            self._unsaved = False
            return
        tmp = self.path.with_name(self.path.name + ".tmp")
        try:
            tmp.write_bytes(encode_entries(self.entries))
        except OSError:
            tmp.unlink(missing_ok=True)
            raise
        os.replace(tmp, self.path)
        self._unsaved = False
        self._dirty = True

    def flush(self) -> None:
        if self._unsaved:
            self._rewrite()  # ENOSPC again: the flush fails and the recovery point waits
        if not self._dirty:
            return
        with contextlib.suppress(FileNotFoundError):
            fd = os.open(self.path, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        self._dirty = False

    def rename(self, target: Path) -> None:
        if self.path.exists():
            os.replace(self.path, target)
        self.path = target

    def delete(self) -> None:
        self.path.unlink(missing_ok=True)
        self.entries = []
        self._unsaved = False
