"""The record-level half of Kafka's LogValidator: what a leader checks and changes inside a
producer's batches before it appends them, for topics that ask for it.

Three things need the records themselves: a compacted topic refuses records without a key, a
CreateTime topic refuses records whose timestamps lie further from the broker's clock than
message.timestamp.before.max.ms / after.max.ms allow (KIP-937), and a topic whose
compression.type names a codec stores each batch with that codec (recompressing a batch sent
with another).  A batch holding records that fail a check is refused whole, and the answer
names each culprit by its index in the batch (KIP-467's record_errors), so that clients fail
those records and may send the others again.

For a topic with Kafka's defaults (compression.type=producer, not compacted, timestamps at
most an hour ahead and of any age) the records are never read (DESIGN.md §2, §7): the batch
header settles the timestamps.  Kafka reads every record's timestamp; the header has two of
them, the first record's (base timestamp) and the largest (max timestamp), and each record's
is the base plus its own delta, which may be negative (a producer writes records in the
order it was given them, timestamps in any order: Kafka Streams forwards event times).  So:

- a max timestamp within after.max.ms of the clock puts every record there: a batch whose
  header says otherwise has its records read, to name the ones ahead;
- the smallest timestamp is not in the header, so no header can show a batch within a
  finite before.max.ms: a topic that sets one has every batch read (the operator's choice,
  as compaction's keys are).  At Kafka's default (Long.MAX_VALUE) no age is refused;
- a batch marked LogAppendTime by its producer has its records read (Kafka names each one).

What the header cannot show is a producer lying in it: a max timestamp below one of its
records' (no client writes one; Samsa's time index and retention trust it too), or, at the
default before.max.ms, a timestamp below -(2^63 - 1) ms plus the broker's clock, which
Kafka's overflowing subtraction refuses as out of range.  Such records are stored.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from samsa.config.defs import LONG_MAX
from samsa.config.topic import LogConfig
from samsa.protocol.errors import ErrorCode
from samsa.protocol.record_batch import (
    COMPRESSION_GZIP,
    COMPRESSION_LZ4,
    COMPRESSION_NONE,
    COMPRESSION_SNAPPY,
    COMPRESSION_ZSTD,
    NO_TIMESTAMP,
    TIMESTAMP_TYPE_MASK,
    BatchHeader,
    RecordTooLargeError,
    scan_batches,
)
from samsa.protocol.record_conversion import convert_batch
from samsa.protocol.record_filter import RecordSpan, batch_body, parse_records, record_sizes

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
_TWO_64 = 1 << 64
_TWO_63 = 1 << 63


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
    """Whether a leader's appends to a topic with `config` read the records of every batch
    (a batch's header may still ask for its records to be read: see timestamps_settled)."""
    return (
        config.compact
        or config.compression_type != "producer"
        or (
            config.message_timestamp_type == "CreateTime"
            and config.message_timestamp_before_max_ms != LONG_MAX
        )
    )


def timestamps_settled(headers: Sequence[BatchHeader], config: LogConfig, now_ms: int) -> bool:
    """Whether the batches' headers show that no record's timestamp can be refused (the
    common case: then their records need not be read for it).  See the module's docstring."""
    if config.message_timestamp_type != "CreateTime":
        # Only a batch that its producer marked LogAppendTime is refused.
        return not any(h.attributes & TIMESTAMP_TYPE_MASK for h in headers)
    if config.message_timestamp_before_max_ms != LONG_MAX:
        return False
    latest = now_ms + config.message_timestamp_after_max_ms
    for h in headers:
        if h.attributes & TIMESTAMP_TYPE_MASK or h.max_timestamp > latest:
            return False
    return True


def validate_records(
    tp: str,
    records: bytes | memoryview,
    headers: Sequence[BatchHeader],
    config: LogConfig,
    now_ms: int,
) -> tuple[bytes | memoryview, list[BatchHeader]]:
    """Check the records of a producer's batches (already through validate_batches) against
    the topic's rules at broker time `now_ms`, and store them with its codec: the records to
    append and their headers.

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
        timestamps = not timestamps_settled((h,), config, now_ms)
        if h.is_control or (target is None and not config.compact and not timestamps):
            continue
        body = batch_body(batch, h)
        spans = parse_records(body, h.records_count)
        if config.compact or timestamps:
            # Kafka's iterator for this batch: a batch kept in its codec is read without
            # copying keys and values (PartialDefaultRecord), which its messages show.
            partial = target is None and h.compression != COMPRESSION_NONE
            _check_records(tp, h, body, spans, config, now_ms, timestamps, partial)
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


def _long(value: int) -> int:
    """`value` as a Java long: Kafka's arithmetic on timestamps wraps around."""
    return (value + _TWO_63) % _TWO_64 - _TWO_63


def _check_records(
    tp: str,
    h: BatchHeader,
    body: bytes,
    spans: Sequence[RecordSpan],
    config: LogConfig,
    now_ms: int,
    timestamps: bool,
    partial: bool,
) -> None:
    """Kafka's validateKey then validateTimestamp on each record: at most one error each, a
    missing key first.  Any timestamp among the errors makes the batch's INVALID_TIMESTAMP."""
    errors: list[RecordError] = []
    invalid_timestamp = False
    no_key = f"Compacted topic cannot accept message without key in topic partition {tp}"
    log_append = bool(h.attributes & TIMESTAMP_TYPE_MASK)
    create_time = config.message_timestamp_type == "CreateTime"
    before = config.message_timestamp_before_max_ms
    after = config.message_timestamp_after_max_ms
    for i, span in enumerate(spans):
        if config.compact and span.key is None:
            errors.append(RecordError(i, no_key))
            continue
        if not timestamps:
            continue
        # A LogAppendTime batch's records all carry its max timestamp (DefaultRecordBatch).
        ts = h.max_timestamp if log_append else _long(h.base_timestamp + span.timestamp_delta)
        if create_time and ts != NO_TIMESTAMP:
            diff = _long(now_ms - ts)
            if diff > before or _long(-diff) > after:
                offset = _long(h.base_offset + span.offset_delta)
                errors.append(
                    RecordError(
                        i,
                        f"Timestamp {ts} of message with offset {offset} is out of range. The "
                        f"timestamp should be within [{_long(now_ms - before)}, "
                        f"{_long(now_ms + after)}]",
                    )
                )
                invalid_timestamp = True
        elif log_append:
            record = _record_text(h, body, span, ts, partial)
            errors.append(
                RecordError(
                    i,
                    f"Invalid timestamp type in message {record}. Producer should not set "
                    "timestamp type to LogAppendTime.",
                )
            )
            invalid_timestamp = True
    if errors:
        raise record_validation_error(errors, invalid_timestamp)


def _record_text(h: BatchHeader, body: bytes, span: RecordSpan, ts: int, partial: bool) -> str:
    """A record as Kafka's toString shows it: DefaultRecord gives a null key or value 0
    bytes, PartialDefaultRecord (a batch read in place) its length field, -1."""
    key_size, value_size = record_sizes(body, span)
    offset = _long(h.base_offset + span.offset_delta)
    if partial:
        name = "PartialDefaultRecord"
    else:
        name, key_size, value_size = "DefaultRecord", max(key_size, 0), max(value_size, 0)
    sizes = f"key={key_size} bytes, value={value_size} bytes"
    return f"{name}(offset={offset}, timestamp={ts}, {sizes})"


def record_validation_error(
    errors: list[RecordError], invalid_timestamp: bool = False
) -> RecordValidationError:
    """The partition's answer for these culprits, worded as Kafka's processRecordErrors: a
    timestamp among them makes it INVALID_TIMESTAMP, whatever the others."""
    if invalid_timestamp:
        return RecordValidationError(
            ErrorCode.invalid_timestamp,
            "One or more records have been rejected due to invalid timestamp",
            errors,
        )
    shown = ", ".join(
        f"RecordError(batchIndex={e.batch_index}, message='{e.message}')" for e in errors[:_SHOWN]
    )
    return RecordValidationError(
        ErrorCode.invalid_record,
        f"One or more records have been rejected due to {len(errors)} record errors in total, "
        f"and only showing the first three errors at most: [{shown}]",
        errors,
    )
