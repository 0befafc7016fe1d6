"""Producer state snapshots: `<20-digit offset>.snapshot` files in the partition directory.

A snapshot at offset N holds the producer state built from every batch below N; it is
written when a segment rolls (N is the new segment's base offset) and at clean shutdown (N is
the log end offset), as Kafka does.  The layout is Samsa's own: Kafka's snapshots keep only
each producer's last batch, these keep all five a producer may still retry, so a retry that
crosses a restart is still recognised.

    int16  version (2)
    uint32 CRC-32C of everything after it
    int32  producer count, then for each producer:
      int64 producer id, int16 epoch, int64 last timestamp, int8 batch count,
      int64 first offset of its ongoing transaction (-1: none), int32 coordinator epoch,
      then for each batch (oldest first): int32 last sequence, int64 last offset,
      int32 offset delta, int64 timestamp

Version 1 (written before transactions) lacks the two transaction fields and is still read.

Writes go to `<name>.tmp` and are renamed into place, so a reader never sees a torn file
under the final name; the fsync is the caller's choice (the roll path leaves it to the next
flush, keeping it out of the acknowledgement path).  A file that does not parse or fails its
CRC raises CorruptSnapshotError; the manager then falls back to an older one.
"""

from __future__ import annotations

import os
import re
import struct
from collections.abc import Iterable
from pathlib import Path

import crc32c

from samsa.log.checkpoint import write_all
from samsa.log.producer_state import NUM_BATCHES_TO_RETAIN, BatchMetadata, ProducerStateEntry

SNAPSHOT_SUFFIX = ".snapshot"
SNAPSHOT_TMP_SUFFIX = SNAPSHOT_SUFFIX + ".tmp"
SNAPSHOT_VERSION = 2
_SNAPSHOT_VERSION_NO_TXN = 1

_SNAPSHOT_FILE = re.compile(r"^(\d{20})\.snapshot$")
_HEAD = struct.Struct(">hI")
_COUNT = struct.Struct(">i")
_PRODUCER = struct.Struct(">qhqb")
_TXN = struct.Struct(">qi")
_BATCH = struct.Struct(">iqiq")


class CorruptSnapshotError(ValueError):
    """A snapshot file that cannot be trusted; the message names the file and the problem."""


def snapshot_path(dir: Path, offset: int) -> Path:
    return dir / f"{offset:020d}{SNAPSHOT_SUFFIX}"


def list_snapshots(dir: Path) -> list[int]:
    """The offsets of the snapshot files in `dir`, in increasing order."""
    offsets = []
    try:
        names = os.listdir(dir)
    except FileNotFoundError:
        return []
    for name in names:
        match = _SNAPSHOT_FILE.match(name)
        if match:
            offsets.append(int(match.group(1)))
    return sorted(offsets)


def remove_temporary_files(dir: Path) -> None:
    """Snapshot writes cut short by a crash leave `.snapshot.tmp` files: nothing to keep."""
    for name in os.listdir(dir):
        if name.endswith(SNAPSHOT_TMP_SUFFIX):
            (dir / name).unlink(missing_ok=True)


def encode_snapshot(entries: Iterable[ProducerStateEntry]) -> bytes:
    body = bytearray(_COUNT.size)
    count = 0
    for entry in entries:
        count += 1
        body += _PRODUCER.pack(
            entry.producer_id, entry.producer_epoch, entry.last_timestamp, len(entry.batches)
        )
        body += _TXN.pack(entry.current_txn_first_offset, entry.coordinator_epoch)
        for batch in entry.batches:
            body += _BATCH.pack(*batch)
    _COUNT.pack_into(body, 0, count)
    return _HEAD.pack(SNAPSHOT_VERSION, crc32c.crc32c(body)) + bytes(body)


def decode_snapshot(data: bytes, name: str = "snapshot") -> list[ProducerStateEntry]:
    if len(data) < _HEAD.size + _COUNT.size:
        raise CorruptSnapshotError(f"{name}: {len(data)} bytes is too short for a snapshot")
    version, crc = _HEAD.unpack_from(data, 0)
    if version not in (SNAPSHOT_VERSION, _SNAPSHOT_VERSION_NO_TXN):
        raise CorruptSnapshotError(f"{name}: unknown snapshot version {version}")
    body = memoryview(data)[_HEAD.size :]
    if crc32c.crc32c(body) != crc:
        raise CorruptSnapshotError(f"{name}: CRC mismatch")
    entries: list[ProducerStateEntry] = []
    try:
        (count,) = _COUNT.unpack_from(body, 0)
        pos = _COUNT.size
        for _ in range(count):
            producer_id, epoch, last_timestamp, n = _PRODUCER.unpack_from(body, pos)
            pos += _PRODUCER.size
            if not 0 <= n <= NUM_BATCHES_TO_RETAIN:
                raise CorruptSnapshotError(f"{name}: producer {producer_id} has {n} batches")
            txn_first_offset, coordinator_epoch = -1, -1
            if version == SNAPSHOT_VERSION:
                txn_first_offset, coordinator_epoch = _TXN.unpack_from(body, pos)
                pos += _TXN.size
            batches = []
            for _ in range(n):
                batches.append(BatchMetadata(*_BATCH.unpack_from(body, pos)))
                pos += _BATCH.size
            entries.append(
                ProducerStateEntry(
                    producer_id,
                    epoch,
                    batches,
                    last_timestamp,
                    txn_first_offset,
                    coordinator_epoch,
                )
            )
    except struct.error as exc:
        raise CorruptSnapshotError(f"{name}: truncated: {exc}") from None
    if pos != len(body):
        raise CorruptSnapshotError(f"{name}: {len(body) - pos} trailing bytes")
    return entries


def write_snapshot(path: Path, entries: Iterable[ProducerStateEntry], fsync: bool) -> None:
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        try:
            write_all(fd, encode_snapshot(entries))
            if fsync:
                os.fsync(fd)
        finally:
            os.close(fd)
    except OSError:
        # A full disk: leave no half-written temporary taking what space there is.
        tmp.unlink(missing_ok=True)
        raise
    os.replace(tmp, path)


def read_snapshot(path: Path) -> list[ProducerStateEntry]:
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise CorruptSnapshotError(f"{path}: unreadable: {exc}") from None
    return decode_snapshot(data, str(path))


def fsync_file(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
