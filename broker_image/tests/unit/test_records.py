"""Record batch headers: parsing, produce validation, in-place patching, encode/decode."""

from __future__ import annotations

import struct

import crc32c
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from samsa.protocol.record_batch import (
    BATCH_HEADER_SIZE,
    COMPRESSION_GZIP,
    COMPRESSION_LZ4,
    COMPRESSION_NONE,
    COMPRESSION_SNAPPY,
    COMPRESSION_ZSTD,
    CRC_OFFSET,
    LOG_APPEND_TIME,
    CorruptRecordError,
    Record,
    RecordTooLargeError,
    batch_crc_ok,
    build_batch,
    decode_records,
    read_batch_header,
    scan_batches,
    set_base_offset,
    set_log_append_time,
    set_partition_leader_epoch,
    validate_batches,
)

CODECS = [COMPRESSION_NONE, COMPRESSION_GZIP, COMPRESSION_SNAPPY, COMPRESSION_LZ4, COMPRESSION_ZSTD]


def batch(n: int = 3, **kwargs: object) -> bytes:
    records = [(f"k{i}".encode(), f"value-{i}".encode() * 5, [("h", b"v")]) for i in range(n)]
    return build_batch(records, **kwargs)


def legacy_message(magic: int) -> bytes:
    """A v0/v1 message set entry (offset, size, crc, magic, attributes, [ts], key, value)."""
    body = bytes([magic, 0]) + (struct.pack(">q", 0) if magic == 1 else b"")
    body += struct.pack(">i", -1) + struct.pack(">i", 5) + b"hello"
    message = struct.pack(">I", 0) + body
    return struct.pack(">qi", 0, len(message)) + message


def test_header_round_trip() -> None:
    data = build_batch(
        [(b"a", b"b", []), (None, None, [])],
        base_offset=42,
        timestamps=[1000, 1500],
        compression=COMPRESSION_GZIP,
        producer_id=7,
        producer_epoch=2,
        base_sequence=11,
        partition_leader_epoch=5,
        transactional=True,
    )
    h = read_batch_header(data)
    assert h.base_offset == 42
    assert h.size == len(data) == h.batch_length + 12
    assert h.partition_leader_epoch == 5
    assert h.magic == 2
    assert h.last_offset_delta == 1 and h.last_offset == 43 and h.next_offset == 44
    assert h.base_timestamp == 1000 and h.max_timestamp == 1500
    assert (h.producer_id, h.producer_epoch, h.base_sequence) == (7, 2, 11)
    assert h.records_count == 2
    assert h.compression == COMPRESSION_GZIP
    assert h.timestamp_type == 0
    assert h.is_transactional and not h.is_control
    assert h.crc == crc32c.crc32c(data[21:])
    assert BATCH_HEADER_SIZE == 61


def test_validate_accepts_concatenated_batches() -> None:
    data = batch(2) + batch(5, compression=COMPRESSION_ZSTD) + batch(1)
    headers = validate_batches(data, 1_000_000)
    assert [h.records_count for h in headers] == [2, 5, 1]
    assert sum(h.size for h in headers) == len(data)
    assert validate_batches(memoryview(data), 1_000_000) == headers


def test_validate_rejects_empty() -> None:
    with pytest.raises(CorruptRecordError, match="empty"):
        validate_batches(b"", 1000)


def test_validate_rejects_bad_crc() -> None:
    data = bytearray(batch(3))
    data[-1] ^= 0xFF
    with pytest.raises(CorruptRecordError, match="CRC"):
        validate_batches(bytes(data), 1_000_000)


@pytest.mark.parametrize("magic", [0, 1])
def test_validate_rejects_legacy_message_sets(magic: int) -> None:
    with pytest.raises(CorruptRecordError, match=f"magic v{magic}"):
        validate_batches(legacy_message(magic), 1_000_000)
    padded = legacy_message(magic) + legacy_message(magic) + legacy_message(magic)
    with pytest.raises(CorruptRecordError, match=f"magic v{magic}"):
        validate_batches(padded, 1_000_000)


def test_validate_rejects_too_small_length() -> None:
    data = bytearray(batch(1))
    struct.pack_into(">i", data, 8, 48)
    with pytest.raises(CorruptRecordError, match="too small"):
        validate_batches(bytes(data), 1_000_000)


def test_validate_rejects_length_past_the_end() -> None:
    data = bytearray(batch(1))
    struct.pack_into(">i", data, 8, len(data))
    with pytest.raises(CorruptRecordError, match="truncated"):
        validate_batches(bytes(data), 1_000_000)


def test_validate_rejects_every_truncated_tail() -> None:
    first = batch(1)
    data = first + batch(3)
    for cut in range(len(first) + 1, len(data)):
        with pytest.raises(CorruptRecordError):
            validate_batches(data[:cut], 1_000_000)


def test_validate_rejects_oversized_batch() -> None:
    data = batch(3)
    validate_batches(data, len(data))
    with pytest.raises(RecordTooLargeError, match=str(len(data))):
        validate_batches(data, len(data) - 1)


def test_validate_rejects_inconsistent_counts() -> None:
    data = bytearray(batch(3))
    struct.pack_into(">i", data, 57, 2)
    data[CRC_OFFSET : CRC_OFFSET + 4] = struct.pack(">I", crc32c.crc32c(bytes(data[21:])))
    with pytest.raises(CorruptRecordError, match="last offset delta"):
        validate_batches(bytes(data), 1_000_000)
    # Replicated batches may have offset gaps (compaction): allowed off the client path.
    assert validate_batches(bytes(data), 1_000_000, from_client=False)


def test_scan_batches_stops_at_incomplete_batch() -> None:
    a, b = batch(1), batch(2)
    data = a + b
    assert [pos for pos, _ in scan_batches(data)] == [0, len(a)]
    assert [pos for pos, _ in scan_batches(data[:-1])] == [0]
    assert [pos for pos, _ in scan_batches(data, len(a))] == [len(a)]
    assert list(scan_batches(data, 0, len(a) - 1)) == []
    assert list(scan_batches(b"\x00" * 100)) == []


def test_patching_base_offset_and_epoch_keeps_crc_valid() -> None:
    data = bytearray(batch(3) + batch(2))
    set_base_offset(data, 0, 1000)
    set_partition_leader_epoch(data, 0, 9)
    second = read_batch_header(data).size
    set_base_offset(data, second, 1003)
    headers = validate_batches(bytes(data), 1_000_000)
    assert [h.base_offset for h in headers] == [1000, 1003]
    assert headers[0].partition_leader_epoch == 9
    assert [r.offset for r in decode_records(data)] == [1000, 1001, 1002, 1003, 1004]


def test_set_log_append_time_recomputes_crc() -> None:
    data = bytearray(batch(3, timestamps=[5, 6, 7]))
    view = memoryview(data)
    set_log_append_time(view, 0, 123_456)
    h = read_batch_header(data)
    assert h.timestamp_type == LOG_APPEND_TIME
    assert h.max_timestamp == 123_456
    assert h.base_timestamp == 5
    assert batch_crc_ok(data, 0, h)
    validate_batches(bytes(data), 1_000_000)
    assert {r.timestamp for r in decode_records(data)} == {123_456}


@pytest.mark.parametrize("codec", CODECS)
def test_decode_large_compressed_batch(codec: int) -> None:
    value = bytes(range(256)) * 1000
    data = build_batch([(b"k", value, []), (b"k2", value[::-1], [])], compression=codec)
    records = decode_records(data)
    assert [r.value for r in records] == [value, value[::-1]]


@pytest.mark.parametrize("codec", [COMPRESSION_NONE, COMPRESSION_GZIP])
def test_kafka_python_reads_what_we_build_and_vice_versa(codec: int) -> None:
    data = build_batch(
        [(b"k", b"v", [("a", b"1")]), (None, b"w", [])],
        base_offset=10,
        timestamps=[100, 101],
        compression=codec,
    )
    theirs = DefaultRecordBatch(data)
    assert theirs.validate_crc()
    assert [(r.offset, r.timestamp, r.key, r.value) for r in theirs] == [
        (10, 100, b"k", b"v"),
        (11, 101, None, b"w"),
    ]
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=codec,
        is_transactional=0,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=1 << 20,
    )
    builder.append(0, timestamp=7, key=b"x", value=b"y", headers=[("h", b"z")])
    built = bytes(builder.build())
    validate_batches(built, 1 << 20)
    assert decode_records(built) == [Record(0, 7, b"x", b"y", (("h", b"z"),))]


_bytes = st.one_of(st.none(), st.binary(max_size=300))
_headers = st.lists(st.tuples(st.text(max_size=10), _bytes), max_size=3)
_record = st.tuples(_bytes, _bytes, _headers)


@settings(max_examples=60, deadline=None)
@given(
    records=st.lists(_record, min_size=1, max_size=8),
    codec=st.sampled_from(CODECS),
    base_offset=st.integers(0, 2**40),
    base_ts=st.integers(0, 2**41),
    deltas=st.lists(st.integers(-5000, 5000), min_size=8, max_size=8),
)
def test_build_decode_round_trip(
    records: list[tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]]]],
    codec: int,
    base_offset: int,
    base_ts: int,
    deltas: list[int],
) -> None:
    timestamps = [base_ts + d for d in deltas[: len(records)]]
    data = build_batch(records, base_offset, timestamps=timestamps, compression=codec)
    (h,) = validate_batches(data, 1 << 30)
    assert h.compression == codec
    assert h.max_timestamp == max(timestamps)
    assert decode_records(data) == [
        Record(base_offset + i, ts, key, value, tuple(headers))
        for i, ((key, value, headers), ts) in enumerate(zip(records, timestamps, strict=True))
    ]
