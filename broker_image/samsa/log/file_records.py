"""A segment's `.log` file as batches (the I/O half of Kafka's FileRecords).

Batches are walked by their headers with pread, in chunks, without parsing a record; they
are written with pwritev from the buffers they are made of, so nothing is copied in Python.
Functions over an open descriptor: the segment owns the descriptor and its size.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

from samsa.protocol.record_batch import (
    BATCH_HEADER_SIZE,
    LOG_OVERHEAD,
    MIN_BATCH_LENGTH,
    BatchHeader,
    read_batch_header,
)

# Header walks read this much at a time: a few index intervals of small batches.
SCAN_CHUNK = 16 * 1024
# Recovery reads whole batches to check their CRC, in large sequential chunks.
RECOVERY_CHUNK = 4 * 1024 * 1024

_IOV_MAX = 1024


def file_batches(
    fd: int, start: int, end: int, chunk: int, *, need_bytes: bool = False
) -> Iterator[tuple[int, BatchHeader, memoryview | None]]:
    """(position, header, bytes if asked) of each complete batch in [start, end),
    read in chunks; stops at the first batch that is incomplete or malformed."""
    pos = start
    while end - pos >= BATCH_HEADER_SIZE:
        data = os.pread(fd, min(chunk, end - pos), pos)
        n = len(data)
        mv = memoryview(data)
        off = 0
        while n - off >= BATCH_HEADER_SIZE:
            h = read_batch_header(data, off)
            if h.batch_length < MIN_BATCH_LENGTH:
                return
            size = h.batch_length + LOG_OVERHEAD
            if pos + off + size > end:
                return
            if not need_bytes:
                yield pos + off, h, None
            elif off + size <= n:
                yield pos + off, h, mv[off : off + size]
            elif off == 0:
                whole = os.pread(fd, size, pos)
                if len(whole) < size:
                    return
                yield pos, h, memoryview(whole)
            else:
                break
            off += size
        if off == 0:
            return
        pos += off


def pwrite_all(fd: int, buffers: list[bytes | bytearray | memoryview], position: int) -> int:
    """Write every buffer at position onwards, in order, resuming after short writes."""
    views = [v for v in (memoryview(b).cast("B") for b in buffers) if v.nbytes]
    total = 0
    i = 0
    while i < len(views):
        n = os.pwritev(fd, views[i : i + _IOV_MAX], position + total)
        if n <= 0:
            raise OSError("pwritev wrote nothing")
        total += n
        # Skip the buffers written whole; keep the unwritten tail of a partial one.
        while n:
            size = views[i].nbytes
            if n >= size:
                n -= size
                i += 1
            else:
                views[i] = views[i][n:]
                n = 0
    return total
