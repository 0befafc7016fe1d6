"""A producer's batch re-encoded with the topic's codec (Kafka's
LogValidator.buildRecordsAndAssignOffsets, for v2 batches).

A v2 record is encoded the same way whatever its batch's codec, so a batch changes codec by
re-framing its records section: the records, already parsed (so each is whole), are written
again as they came, then compressed with the new codec.  Everything else of the batch is kept:
producer id, epoch and base sequence, the transactional flag, the timestamp type, base
timestamp and partition leader epoch; each record keeps its timestamp delta, key, value and
headers.  As in Kafka, records whose offset deltas are not 0, 1, 2, ... (old clients) are given
those, and a CreateTime batch's max timestamp is the largest of its records'.

Only a leader's append of a topic whose compression.type names a codec runs this; with the
default "producer" batches are stored as sent (DESIGN.md §2).
"""

from __future__ import annotations

from collections.abc import Sequence

from samsa.protocol.record_batch import (
    COMPRESSION_CODEC_MASK,
    TIMESTAMP_TYPE_MASK,
    BatchHeader,
    _get_varint,
    _put_varint,
    assemble_batch,
    compress,
)
from samsa.protocol.record_filter import RecordSpan


def convert_batch(
    header: BatchHeader,
    body: bytes,
    records: Sequence[RecordSpan],
    codec: int,
    level: int | None = None,
) -> bytes:
    """Batch `header`, whose decompressed records section `body` holds `records` (non-empty,
    from parse_records), stored with `codec` at `level` (None: the library's default)."""
    if all(r.offset_delta == i for i, r in enumerate(records)):
        section = body
    else:
        section = _renumbered(body, records)
    if header.attributes & TIMESTAMP_TYPE_MASK:
        max_timestamp = header.max_timestamp
    else:
        max_timestamp = header.base_timestamp + max(r.timestamp_delta for r in records)
    return assemble_batch(
        base_offset=header.base_offset,
        partition_leader_epoch=header.partition_leader_epoch,
        attributes=(header.attributes & ~COMPRESSION_CODEC_MASK) | codec,
        last_offset_delta=len(records) - 1,
        base_timestamp=header.base_timestamp,
        max_timestamp=max_timestamp,
        producer_id=header.producer_id,
        producer_epoch=header.producer_epoch,
        base_sequence=header.base_sequence,
        records_count=len(records),
        records=compress(codec, section, level),
    )


def _renumbered(body: bytes, records: Sequence[RecordSpan]) -> bytes:
    """The records section with the records' offset deltas made 0, 1, 2, ... (each record's
    length prefix rewritten, since a varint's size may change)."""
    out = bytearray()
    record = bytearray()
    for i, r in enumerate(records):
        _, after_delta = _get_varint(body, r.after_timestamp)
        _, attributes_at = _get_varint(body, r.start)
        record.clear()
        record += body[attributes_at : r.after_timestamp]  # attributes, timestamp delta
        _put_varint(record, i)
        record += body[after_delta : r.end]  # key, value, headers
        _put_varint(out, len(record))
        out += record
    return bytes(out)
