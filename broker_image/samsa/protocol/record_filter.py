"""Records inside stored v2 batches, for the log cleaner and for the appends that read them.

Kafka's MemoryRecords.filterTo: a batch's records are parsed only as far as the cleaner needs
(offset, timestamp, key, whether there is a value), and a batch that loses records is rebuilt
from the raw bytes of the ones it keeps.  The same parse serves a leader's record-level checks
(samsa.log.record_validation: keys of compacted topics, timestamps out of a topic's bounds, the
topic's codec).  Nothing here runs for an ordinary topic's fetch, nor for its produce unless a
batch's header shows a timestamp out of bounds.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

from samsa.protocol.record_batch import (
    BATCH_HEADER_SIZE,
    CONTROL_MASK,
    DELETE_HORIZON_MASK,
    LOG_APPEND_TIME,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_MASK,
    BatchHeader,
    CorruptRecordError,
    _get_varint,
    _put_varint,
    assemble_batch,
    compress,
    decompress,
)


class RecordSpan(NamedTuple):
    """Where one record lies in its batch's (decompressed) records section, and what the
    cleaner needs of it.  `start` is the record's length prefix, `after_timestamp` the byte
    after its timestamp delta."""

    start: int
    end: int
    after_timestamp: int
    timestamp_delta: int
    offset_delta: int
    key: bytes | None
    has_value: bool


_new_span = tuple.__new__


def batch_body(batch: bytes | memoryview, header: BatchHeader) -> bytes:
    """The decompressed records section of one whole batch."""
    return decompress(header.compression, bytes(batch[BATCH_HEADER_SIZE : header.size]))


def parse_records(body: bytes, count: int) -> list[RecordSpan]:
    """The `count` records of a records section, up to each one's value length."""
    return _parse(body, count, keys_only=False)


def record_keys(body: bytes, count: int) -> list[tuple[int, bytes | None]]:
    """(offset delta, key) of each of the `count` records: what an offset map needs."""
    return _parse(body, count, keys_only=True)


def _parse(body: bytes, count: int, *, keys_only: bool) -> list[Any]:
    # The cleaner's inner loop.  Most varints are one byte and record lengths two: those
    # cases are inlined, the rest go through _get_varint.
    varint = _get_varint
    out: list[Any] = []
    append = out.append
    pos = 0
    size = len(body)
    try:
        for _ in range(count):
            start = pos
            b = body[pos]
            if b < 0x80:
                length, pos = (b >> 1) ^ -(b & 1), pos + 1
            elif body[pos + 1] < 0x80:  # records of 64 to 8191 bytes
                length = (b & 0x7F) | (body[pos + 1] << 7)
                length, pos = (length >> 1) ^ -(length & 1), pos + 2
            else:
                length, pos = varint(body, pos)
            end = pos + length
            if length < 0 or end > size:
                raise CorruptRecordError("record runs past the end of its batch")
            p = pos + 1  # the record's attributes byte is unused by v2
            b = body[p]
            if b < 0x80:
                ts_delta, p = (b >> 1) ^ -(b & 1), p + 1
            else:
                ts_delta, p = varint(body, p)
            after_ts = p
            b = body[p]
            if b < 0x80:
                offset_delta, p = (b >> 1) ^ -(b & 1), p + 1
            else:
                offset_delta, p = varint(body, p)
            b = body[p]
            if b < 0x80:
                key_length, p = (b >> 1) ^ -(b & 1), p + 1
            else:
                key_length, p = varint(body, p)
            if key_length > end - p:
                raise CorruptRecordError("record key runs past the record's length")
            key = None
            if key_length >= 0:
                key = body[p : p + key_length]
                p += key_length
            pos = end
            if keys_only:
                append((offset_delta, key))
                continue
            b = body[p]
            if b < 0x80:
                value_length, p = (b >> 1) ^ -(b & 1), p + 1
            elif body[p + 1] < 0x80:
                value_length = (b & 0x7F) | (body[p + 1] << 7)
                value_length, p = (value_length >> 1) ^ -(value_length & 1), p + 2
            else:
                value_length, p = varint(body, p)
            if p > end or value_length > end - p:
                raise CorruptRecordError("record fields run past the record's length")
            append(
                _new_span(
                    RecordSpan,
                    (start, end, after_ts, ts_delta, offset_delta, key, value_length >= 0),
                )
            )
    except IndexError:
        raise CorruptRecordError("record truncated inside a varint") from None
    if pos != size:
        raise CorruptRecordError(f"{size - pos} bytes follow the last record of a batch")
    return out


def rebuild_batch(
    header: BatchHeader, body: bytes, kept: Sequence[RecordSpan], horizon_ms: int | None = None
) -> bytes:
    """Batch `header` holding only the records `kept` (non-empty, in order).

    As Kafka's cleaner: base offset and last offset delta (so the producer's last sequence
    number survives), producer id, epoch and base sequence, partition leader epoch, timestamp
    type, transactional and control flags, and compression codec are kept; each record keeps
    its offset and timestamp.  `horizon_ms` sets a delete horizon (KIP-534): the batch is
    flagged, its baseTimestamp becomes the horizon and its records' timestamp deltas are
    rebased.  Without it the records are copied byte for byte.
    """
    attributes = header.attributes
    old_base = header.base_timestamp
    base_timestamp = old_base
    if horizon_ms is None:
        section = b"".join(body[r.start : r.end] for r in kept)
    else:
        attributes |= DELETE_HORIZON_MASK
        base_timestamp = horizon_ms
        out = bytearray()
        record = bytearray()
        for r in kept:
            record.clear()
            record.append(body[_attributes_at(body, r.start)])
            _put_varint(record, old_base + r.timestamp_delta - base_timestamp)
            record += body[r.after_timestamp : r.end]
            _put_varint(out, len(record))
            out += record
        section = bytes(out)
    if attributes & TIMESTAMP_TYPE_MASK:
        max_timestamp = header.max_timestamp
    else:
        max_timestamp = max(old_base + r.timestamp_delta for r in kept)
    return assemble_batch(
        base_offset=header.base_offset,
        partition_leader_epoch=header.partition_leader_epoch,
        attributes=attributes,
        last_offset_delta=header.last_offset_delta,
        base_timestamp=base_timestamp,
        max_timestamp=max_timestamp,
        producer_id=header.producer_id,
        producer_epoch=header.producer_epoch,
        base_sequence=header.base_sequence,
        records_count=len(kept),
        records=compress(header.compression, section),
    )


def _attributes_at(body: bytes, start: int) -> int:
    """Position of a record's attributes byte: just after its length prefix."""
    _, pos = _get_varint(body, start)
    return pos


def empty_batch(header: BatchHeader) -> bytes:
    """Batch `header` with every record removed but its offsets and producer fields kept
    (Kafka's DefaultRecordBatch.writeEmptyHeader): what the cleaner leaves of a producer's
    last batch, so that its sequence numbers outlive the records."""
    flags = header.attributes & (TIMESTAMP_TYPE_MASK | TRANSACTIONAL_MASK | CONTROL_MASK)
    return assemble_batch(
        base_offset=header.base_offset,
        partition_leader_epoch=header.partition_leader_epoch,
        attributes=flags,
        last_offset_delta=header.last_offset_delta,
        base_timestamp=header.max_timestamp,
        max_timestamp=header.max_timestamp,
        producer_id=header.producer_id,
        producer_epoch=header.producer_epoch,
        base_sequence=header.base_sequence,
        records_count=0,
        records=b"",
    )


def delete_horizon(header: BatchHeader) -> int | None:
    """The batch's delete horizon (ms) if the cleaner has set one."""
    return header.base_timestamp if header.attributes & DELETE_HORIZON_MASK else None


def record_sizes(body: bytes, span: RecordSpan) -> tuple[int, int]:
    """The key and value length fields of the record at `span` (negative for null)."""
    _, pos = _get_varint(body, span.after_timestamp)  # the offset delta
    key_length, pos = _get_varint(body, pos)
    value_length, _ = _get_varint(body, pos + max(key_length, 0))
    return key_length, value_length


def record_timestamp(header: BatchHeader, span: RecordSpan) -> int:
    """The record's timestamp as consumers see it."""
    if header.timestamp_type == LOG_APPEND_TIME:
        return header.max_timestamp
    return header.base_timestamp + span.timestamp_delta


__all__ = [
    "RecordSpan",
    "batch_body",
    "delete_horizon",
    "empty_batch",
    "parse_records",
    "rebuild_batch",
    "record_keys",
    "record_sizes",
    "record_timestamp",
]
