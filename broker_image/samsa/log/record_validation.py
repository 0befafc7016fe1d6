"""The record-level half of Kafka's LogValidator: what a leader checks and changes inside a
producer's batches before it appends them, for topics that ask for it.

Two things need the records themselves: a compacted topic refuses records without a key, and
a topic whose compression.type names a codec stores each batch with that codec
(recompressing a batch sent with another).  A batch holding records that fail a check is
refused whole, and the answer names each culprit by its index in the batch (KIP-467's
record_errors), so that clients fail those records and may send the others again.

For a topic with Kafka's defaults (compression.type=producer, not compacted) nothing here
runs: batches are stored as sent and their records are never read (DESIGN.md §2, §7).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from samsa.config.topic import LogConfig
from samsa.protocol.errors import ErrorCode
from samsa.protocol.record_batch import (
    COMPRESSION_GZIP,
    COMPRESSION_LZ4,
    COMPRESSION_NONE,
    COMPRESSION_SNAPPY,
    COMPRESSION_ZSTD,
    BatchHeader,
    RecordTooLargeError,
    scan_batches,
)
from samsa.protocol.record_conversion import convert_batch
from samsa.protocol.record_filter import RecordSpan, batch_body, parse_records

# compression.type's codecs ("producer" is not one: it keeps each batch's own).
CODECS = {
    "uncompressed": COMPRESSION_NONE,
    "gzip": COMPRESSION_GZIP,
    "snappy": COMPRESSION_SNAPPY,
    "lz4": COMPRESSION_LZ4,
    "zstd": COMPRESSION_ZSTD,
}
# Kafka's RecordError.toString shows at most this many of them in the error message.
_SHOWN = 3


class RecordError(NamedTuple):
    """One refused record: its index in its batch, and why (Kafka's ProduceResponse.RecordError)."""

    batch_index: int
    message: str


class RecordValidationError(Exception):
    """Records of a batch failed a check (Kafka's RecordValidationException): the partition's
    error, its message, and each culprit."""

    def __init__(self, code: ErrorCode, message: str, record_errors: list[RecordError]) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.record_errors = record_errors


def inspects_records(config: LogConfig) -> bool:
    """Whether a leader's appends to a topic with `config` read the records of each batch."""
    return config.compact or config.compression_type != "producer"


def validate_records(
    tp: str,
    records: bytes | memoryview,
    headers: Sequence[BatchHeader],
    config: LogConfig,
) -> tuple[bytes | memoryview, list[BatchHeader]]:
    """Check the records of a producer's batches (already through validate_batches) against
    the topic's rules, and store them with its codec: the records to append and their headers.

    RecordValidationError names the records that fail, CorruptRecordError is a records section
    that does not parse, and RecordTooLargeError a batch larger than max.message.bytes once
    recompressed (Kafka checks the size again after a conversion).  Control batches are the
    broker's own and pass untouched, as Kafka leaves them uncompressed.
    """
    codec = CODECS.get(config.compression_type)
    view = memoryview(records)
    out: list[bytes | memoryview] = []
    changed = False
    for (pos, _), h in zip(scan_batches(view), headers, strict=True):
        batch = view[pos : pos + h.size]
        out.append(batch)
        # A batch already in the topic's codec is stored as sent.
        target = None if codec == h.compression else codec
        if h.is_control or (target is None and not config.compact):
            continue
        body = batch_body(batch, h)
        spans = parse_records(body, h.records_count)
        if config.compact:
            _check_keys(tp, spans)
        if target is None:
            continue
        converted = convert_batch(h, body, spans, target, config.compression_level)
        if len(converted) > config.max_message_bytes:
            raise RecordTooLargeError(
                f"record batch of {len(converted)} bytes once compressed with "
                f"{config.compression_type} exceeds the maximum of {config.max_message_bytes}"
            )
        out[-1] = converted
        changed = True
    if not changed:
        return records, list(headers)
    joined = b"".join(out)
    return joined, [h for _, h in scan_batches(joined)]


def _check_keys(tp: str, spans: Sequence[RecordSpan]) -> None:
    """Kafka's validateKey: on a compacted topic every record has a key."""
    message = f"Compacted topic cannot accept message without key in topic partition {tp}"
    errors = [RecordError(i, message) for i, span in enumerate(spans) if span.key is None]
    if errors:
        raise record_validation_error(errors)


def record_validation_error(errors: list[RecordError]) -> RecordValidationError:
    """The partition's answer for these culprits, worded as Kafka's processRecordErrors."""
    shown = ", ".join(
        f"RecordError(batchIndex={e.batch_index}, message='{e.message}')" for e in errors[:_SHOWN]
    )
    return RecordValidationError(
        ErrorCode.invalid_record,
        f"One or more records have been rejected due to {len(errors)} record errors in total, "
        f"and only showing the first three errors at most: [{shown}]",
        errors,
    )
