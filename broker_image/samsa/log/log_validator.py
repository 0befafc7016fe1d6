"""What an append writes: a leader's offsets patched into its batches, a follower's batches
checked (Kafka's LogValidator and UnifiedLog.analyzeAndValidateRecords).

Pure: the producer's (or the leader's) bytes and their headers in, the buffers to write and
the facts of the append out.  Only batch headers are read or patched, never a record; the
Log decides where the buffers go and when.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from samsa.log.errors import OffsetsOutOfOrderError, UnexpectedAppendOffsetError
from samsa.log.producer_state_manager import MarkerSource
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
)

# Batches at least this large are written without copying them into one buffer.
_VECTORED_MIN_BATCH = 4096

Buffers = bytearray | list[bytes | bytearray | memoryview]


def markers_in(
    records: bytes | bytearray | memoryview,
    headers: Sequence[BatchHeader],
    positions: Sequence[int] | None = None,
) -> MarkerSource:
    """The markers of the control batches among `headers`, read from `records`."""
    if positions is None:
        at, positions = 0, []
        for h in headers:
            positions.append(at)
            at += h.size

    def marker_of(i: int, h: BatchHeader) -> EndTxnMarker | None:
        return read_end_txn_marker(records, positions[i], h)

    return marker_of


def leader_offsets(headers: Sequence[BatchHeader], first_offset: int) -> tuple[int, int, int]:
    """(records count, max timestamp, offset of the max timestamp) of batches that get
    offsets from `first_offset` on."""
    count = 0
    max_ts = -1
    offset_of_max = -1
    for h in headers:
        count += h.last_offset_delta + 1
        if h.max_timestamp > max_ts:
            max_ts = h.max_timestamp
            offset_of_max = first_offset + count - 1
    return count, max_ts, offset_of_max


def assign_offsets(
    records: bytes | bytearray | memoryview,
    headers: Sequence[BatchHeader],
    first_offset: int,
    leader_epoch: int,
    log_append_time: int,
) -> tuple[Buffers, list[BatchHeader]]:
    """The buffers to write for a leader's batches, patched with their base offsets from
    `first_offset` on, the leader epoch and (if >= 0) the LogAppendTime; and the patched
    headers."""
    patched: list[BatchHeader] = []
    offset = first_offset
    pos = 0
    out: Buffers
    if log_append_time < 0 and len(records) >= _VECTORED_MIN_BATCH * len(headers):
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
    return out, patched


class FollowerBatches(NamedTuple):
    """The complete batches of a follower's append, where they start, and how far they go."""

    headers: list[BatchHeader]
    positions: list[int]
    valid: int  # bytes of complete batches; a trailing partial batch is left out
    max_timestamp: int
    offset_of_max_timestamp: int


def analyze_follower_batches(
    view: memoryview, log_end_offset: int, topic: str, partition: int
) -> FollowerBatches:
    """Check replicated batches: every complete batch must be v2 with a valid CRC, and
    offsets must increase from the log end offset on."""
    headers: list[BatchHeader] = []
    positions: list[int] = []
    expected = log_end_offset
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
        if not headers and h.base_offset < log_end_offset:
            raise UnexpectedAppendOffsetError(
                f"first offset {h.base_offset} is below the log end offset "
                f"{log_end_offset} of {topic}-{partition}"
            )
        if h.max_timestamp > max_ts:
            max_ts, offset_of_max = h.max_timestamp, h.last_offset
        headers.append(h)
        positions.append(pos)
        expected = h.next_offset
        valid = pos + h.size
    return FollowerBatches(headers, positions, valid, max_ts, offset_of_max)
