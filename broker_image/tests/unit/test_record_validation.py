"""The record-level checks and conversions of a leader's append: a compacted topic's keys
(KIP-467's record errors) and the topic's compression.type (recompression)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from samsa.config.topic import LogConfig
from samsa.log import Log
from samsa.log.record_validation import (
    CODECS,
    RecordValidationError,
    inspects_records,
    validate_records,
)
from samsa.protocol.errors import ErrorCode
from samsa.protocol.record_batch import (
    COMPRESSION_GZIP,
    COMPRESSION_LZ4,
    COMPRESSION_NONE,
    COMPRESSION_SNAPPY,
    COMPRESSION_ZSTD,
    CONTROL_MASK,
    LOG_APPEND_TIME,
    CorruptRecordError,
    RecordTooLargeError,
    _put_varint,
    assemble_batch,
    batch_crc_ok,
    build_batch,
    compress,
    decode_records,
    read_batch_header,
    scan_batches,
    set_log_append_time,
    validate_batches,
)
from samsa.protocol.record_conversion import convert_batch
from samsa.protocol.record_filter import batch_body, parse_records

ALL_CODECS = [
    COMPRESSION_NONE,
    COMPRESSION_GZIP,
    COMPRESSION_SNAPPY,
    COMPRESSION_LZ4,
    COMPRESSION_ZSTD,
]
TP = "orders-3"


def producer_batch(codec: int = COMPRESSION_NONE, n: int = 5, **kwargs: object) -> bytes:
    """An idempotent, transactional producer's batch: headers, a null key and a null value."""
    records = [
        (
            None if i == 2 else f"k{i}".encode(),
            None if i == 3 else b"v" * 300,
            [("h", b"x"), ("n", None)],
        )
        for i in range(n)
    ]
    defaults: dict[str, object] = {
        "base_offset": 0,
        "timestamps": [1_700_000_000_000 + i * 7 - (50 if i == 1 else 0) for i in range(n)],
        "compression": codec,
        "producer_id": 4242,
        "producer_epoch": 3,
        "base_sequence": 17,
        "partition_leader_epoch": 9,
        "transactional": True,
    }
    return build_batch(records, **{**defaults, **kwargs})  # type: ignore[arg-type]


def convert(batch: bytes, codec: int, level: int | None = None) -> bytes:
    h = read_batch_header(batch)
    body = batch_body(batch, h)
    return convert_batch(h, body, parse_records(body, h.records_count), codec, level)


def same_but_codec(before: bytes, after: bytes, codec: int) -> None:
    """`after` is `before` stored with `codec`: every header field and every record kept."""
    validate_batches(after, 1 << 20)
    old, new = read_batch_header(before), read_batch_header(after)
    assert new.compression == codec
    assert new.attributes & ~0x07 == old.attributes & ~0x07
    for field in (
        "base_offset",
        "partition_leader_epoch",
        "last_offset_delta",
        "base_timestamp",
        "max_timestamp",
        "producer_id",
        "producer_epoch",
        "base_sequence",
        "records_count",
    ):
        assert getattr(new, field) == getattr(old, field), field
    assert decode_records(after) == decode_records(before)


@pytest.mark.parametrize("source", ALL_CODECS)
@pytest.mark.parametrize("target", ALL_CODECS)
def test_a_batch_changes_codec_and_keeps_everything_else(source: int, target: int) -> None:
    before = producer_batch(source)
    same_but_codec(before, convert(before, target), target)


@pytest.mark.parametrize(
    ("codec", "level"),
    [
        (COMPRESSION_GZIP, -1),
        (COMPRESSION_GZIP, 1),
        (COMPRESSION_GZIP, 9),
        (COMPRESSION_LZ4, 9),
        (COMPRESSION_LZ4, 1),
        (COMPRESSION_LZ4, 17),
        (COMPRESSION_ZSTD, -131072),
        (COMPRESSION_ZSTD, 3),
        (COMPRESSION_ZSTD, 22),
    ],
)
def test_every_level_in_kafkas_ranges_compresses(codec: int, level: int) -> None:
    before = producer_batch(n=50)
    same_but_codec(before, convert(before, codec, level), codec)


def test_higher_levels_compress_harder() -> None:
    before = build_batch([(b"k", b"some repetitive text, " * 200 + bytes(range(256)), [])] * 20)
    assert len(convert(before, COMPRESSION_ZSTD, 19)) < len(convert(before, COMPRESSION_ZSTD, -50))
    assert len(convert(before, COMPRESSION_GZIP, 9)) <= len(convert(before, COMPRESSION_GZIP, 1))


def test_a_log_append_time_batch_keeps_its_time() -> None:
    before = bytearray(producer_batch())
    set_log_append_time(before, 0, 1_800_000_000_000)
    after = convert(bytes(before), COMPRESSION_ZSTD)
    h = read_batch_header(after)
    assert h.timestamp_type == LOG_APPEND_TIME and h.max_timestamp == 1_800_000_000_000
    assert [r.timestamp for r in decode_records(after)] == [1_800_000_000_000] * 5


def hand_made(
    deltas: list[tuple[int, int]], codec: int = COMPRESSION_NONE, attributes: int = 0
) -> bytes:
    """A batch at timestamp 1000 of records (key "k", value "abc") with these (timestamp delta,
    offset delta) pairs, as a client might get them wrong; its max timestamp says 1000."""
    records = bytearray()
    for ts_delta, delta in deltas:
        record = bytearray(b"\x00")
        _put_varint(record, ts_delta)
        _put_varint(record, delta)
        record += b"\x02k\x06abc\x00"
        _put_varint(records, len(record))
        records += record
    return assemble_batch(
        base_offset=0,
        partition_leader_epoch=-1,
        attributes=codec | attributes,
        last_offset_delta=len(deltas) - 1,
        base_timestamp=1000,
        max_timestamp=1000,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        records_count=len(deltas),
        records=compress(codec, bytes(records)),
    )


def test_max_timestamp_is_the_records_largest() -> None:
    """As Kafka's builder: a CreateTime batch's max timestamp is computed from its records."""
    wrong = hand_made([(0, 0), (90, 1), (30, 2)])
    assert read_batch_header(convert(wrong, COMPRESSION_GZIP)).max_timestamp == 1090


def test_offset_deltas_are_made_consecutive() -> None:
    """Old clients' inner offsets: Kafka renumbers them when it rebuilds a batch."""
    odd = hand_made([(0, 0), (0, 0), (0, 7)], COMPRESSION_SNAPPY)
    after = convert(odd, COMPRESSION_LZ4)
    assert [(r.offset, r.key, r.value) for r in decode_records(after)] == [
        (0, b"k", b"abc"),
        (1, b"k", b"abc"),
        (2, b"k", b"abc"),
    ]


_bytes = st.one_of(st.none(), st.binary(max_size=200))
_records = st.lists(
    st.tuples(_bytes, _bytes, st.lists(st.tuples(st.text(max_size=8), _bytes), max_size=3)),
    min_size=1,
    max_size=12,
)


@settings(max_examples=80, deadline=None)
@given(
    records=_records,
    source=st.sampled_from(ALL_CODECS),
    target=st.sampled_from(ALL_CODECS),
    base_ts=st.integers(0, 2**41),
    deltas=st.lists(st.integers(-(2**20), 2**20), min_size=12, max_size=12),
)
def test_conversion_round_trips(
    records: list, source: int, target: int, base_ts: int, deltas: list[int]
) -> None:
    timestamps = [base_ts] + [base_ts + d for d in deltas[: len(records) - 1]]
    before = build_batch(records, timestamps=timestamps, compression=source, base_offset=77)
    after = convert(before, target)
    assert batch_crc_ok(after, 0, read_batch_header(after))
    same_but_codec(before, after, target)


# -- what an append runs ------------------------------------------------------------------


def test_only_topics_that_ask_for_it_read_records() -> None:
    assert not inspects_records(LogConfig())
    assert inspects_records(LogConfig(cleanup_policy=("compact",)))
    for name in CODECS:
        assert inspects_records(LogConfig(compression_type=name))


@pytest.mark.parametrize("name", sorted(CODECS))
def test_the_topics_codec_is_applied_only_where_it_differs(name: str) -> None:
    config = LogConfig(compression_type=name)
    for source in ALL_CODECS:
        batch = producer_batch(source)
        records, headers = validate_records(TP, batch, validate_batches(batch, 1 << 20), config)
        if source == CODECS[name]:
            assert records is batch  # stored as sent, not re-encoded
        else:
            same_but_codec(batch, bytes(records), CODECS[name])
        assert headers == [h for _, h in scan_batches(records)]


def test_control_batches_are_left_as_they_are() -> None:
    marker = hand_made([(0, 0)], attributes=CONTROL_MASK)
    config = LogConfig(compression_type="zstd", cleanup_policy=("compact",))
    records, _ = validate_records(TP, marker, validate_batches(marker, 1 << 20), config)
    assert records is marker


def test_keyless_records_of_a_compacted_topic_are_each_named() -> None:
    values = [(None if i % 10 == 0 else f"k{i}".encode(), b"v", []) for i in range(100)]
    batch = build_batch(values, compression=COMPRESSION_LZ4)
    config = LogConfig(cleanup_policy=("compact",))
    with pytest.raises(RecordValidationError) as refused:
        validate_records(TP, batch, validate_batches(batch, 1 << 20), config)
    exc = refused.value
    assert exc.code is ErrorCode.invalid_record
    assert [e.batch_index for e in exc.record_errors] == list(range(0, 100, 10))
    assert {e.message for e in exc.record_errors} == {
        "Compacted topic cannot accept message without key in topic partition orders-3"
    }
    # Kafka's wording: the count, then the first three.
    assert exc.message == (
        "One or more records have been rejected due to 10 record errors in total, and only "
        "showing the first three errors at most: ["
        + ", ".join(
            f"RecordError(batchIndex={i}, message='Compacted topic cannot accept message "
            "without key in topic partition orders-3')"
            for i in (0, 10, 20)
        )
        + "]"
    )


def test_keyless_records_in_a_later_batch_are_found() -> None:
    """(Was test_first_keyless_record: the check reads every batch, compressed or not.)"""
    keyed = build_batch([(b"k", b"v", [])] * 2)
    keyless = build_batch([(b"k", b"v", []), (None, b"v", [])], compression=COMPRESSION_LZ4)
    config = LogConfig(cleanup_policy=("compact",))
    records, _ = validate_records(TP, keyed, [read_batch_header(keyed)], config)
    assert records is keyed
    both = keyed + keyless
    with pytest.raises(RecordValidationError) as refused:
        validate_records(TP, both, [read_batch_header(keyed), read_batch_header(keyless)], config)
    assert [e.batch_index for e in refused.value.record_errors] == [1]


def test_a_compacted_topic_with_a_codec_checks_keys_before_converting() -> None:
    batch = build_batch([(b"k", b"v", []), (None, b"v", [])])
    config = LogConfig(cleanup_policy=("compact",), compression_type="gzip")
    with pytest.raises(RecordValidationError):
        validate_records(TP, batch, validate_batches(batch, 1 << 20), config)


def test_a_batch_too_large_once_recompressed_is_refused() -> None:
    batch = build_batch([(b"k", bytes(range(256)) * 4, [])] * 4, compression=COMPRESSION_ZSTD)
    raw = build_batch([(b"k", bytes(range(256)) * 4, [])] * 4)
    config = LogConfig(compression_type="uncompressed", max_message_bytes=len(raw) - 1)
    with pytest.raises(RecordTooLargeError):
        validate_records(TP, batch, validate_batches(batch, 1 << 20), config)


def test_a_records_section_that_does_not_parse_is_corrupt() -> None:
    good = hand_made([(0, 0), (0, 1)])
    header = read_batch_header(good)
    bad = assemble_batch(
        **{
            f: getattr(header, f)
            for f in header._fields
            if f not in ("batch_length", "magic", "crc")
        },
        records=good[61:-3],
    )
    with pytest.raises(CorruptRecordError):
        validate_records(TP, bad, validate_batches(bad, 1 << 20), LogConfig(compression_type="lz4"))


def test_a_batch_already_in_the_topics_codec_is_stored_unread() -> None:
    """As with compression.type=producer: records that would not parse are not even read."""
    good = hand_made([(0, 0), (0, 1)], COMPRESSION_GZIP)
    header = read_batch_header(good)
    unread = assemble_batch(
        **{
            f: getattr(header, f)
            for f in header._fields
            if f not in ("batch_length", "magic", "crc")
        },
        records=compress(COMPRESSION_GZIP, b"not records"),
    )
    config = LogConfig(compression_type="gzip")
    records, _ = validate_records(TP, unread, validate_batches(unread, 1 << 20), config)
    assert records is unread


def test_lz4_at_kafkas_default_level_is_lz4s_fast_mode() -> None:
    """Kafka's level 9 (its default) is lz4-java's fast compressor, other levels its
    high-compression one: the default costs the least."""
    body = b"".join(b"line %d of some log, repeated words words words\n" % i for i in range(5000))
    assert compress(COMPRESSION_LZ4, body, 9) == compress(COMPRESSION_LZ4, body, 0)
    assert len(compress(COMPRESSION_LZ4, body, 12)) < len(compress(COMPRESSION_LZ4, body, 9))


def test_the_log_stores_the_converted_batch_with_offsets_and_log_append_time(
    tmp_path: Path,
) -> None:
    config = LogConfig(compression_type="zstd", message_timestamp_type="LogAppendTime")
    plog = Log.open(tmp_path / "orders-3", config, now_ms=lambda: 1_900_000_000_000)
    plog.append_as_leader(build_batch([(b"a", b"1", [])]), 0)
    sent = producer_batch(COMPRESSION_GZIP, transactional=False)
    records, headers = validate_records(TP, sent, validate_batches(sent, 1 << 20), config)
    info = plog.append_as_leader(records, 4, headers)
    assert info.first_offset == 1 and info.log_append_time == 1_900_000_000_000
    stored = plog.read(1, 1 << 20).records
    (h,) = [h for _, h in scan_batches(stored)]
    assert h.compression == COMPRESSION_ZSTD and h.timestamp_type == LOG_APPEND_TIME
    assert (h.base_offset, h.partition_leader_epoch) == (1, 4)
    assert (h.producer_id, h.producer_epoch, h.base_sequence) == (4242, 3, 17)
    decoded = decode_records(stored)
    assert [r.offset for r in decoded] == [1, 2, 3, 4, 5]
    assert [r.timestamp for r in decoded] == [1_900_000_000_000] * 5
    assert [(r.key, r.value, r.headers) for r in decoded] == [
        (r.key, r.value, r.headers) for r in decode_records(sent)
    ]
