"""The record-level checks and conversions of a leader's append: a compacted topic's keys and
timestamps out of the topic's bounds (KIP-467's record errors), and the topic's
compression.type (recompression)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from samsa.config.defs import LONG_MAX
from samsa.config.topic import LogConfig
from samsa.log import Log
from samsa.log.record_validation import (
    CODECS,
    RecordError,
    RecordValidationError,
    inspects_records,
    timestamps_settled,
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
# The broker's clock in these checks: a little after producer_batch's timestamps.
NOW = 1_700_000_060_000


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
        records, headers = validate_records(
            TP, batch, validate_batches(batch, 1 << 20), config, NOW
        )
        if source == CODECS[name]:
            assert records is batch  # stored as sent, not re-encoded
        else:
            same_but_codec(batch, bytes(records), CODECS[name])
        assert headers == [h for _, h in scan_batches(records)]


def test_control_batches_are_left_as_they_are() -> None:
    marker = hand_made([(0, 0)], attributes=CONTROL_MASK)
    config = LogConfig(compression_type="zstd", cleanup_policy=("compact",))
    records, _ = validate_records(TP, marker, validate_batches(marker, 1 << 20), config, NOW)
    assert records is marker


def test_keyless_records_of_a_compacted_topic_are_each_named() -> None:
    values = [(None if i % 10 == 0 else f"k{i}".encode(), b"v", []) for i in range(100)]
    batch = build_batch(values, compression=COMPRESSION_LZ4)
    config = LogConfig(cleanup_policy=("compact",))
    with pytest.raises(RecordValidationError) as refused:
        validate_records(TP, batch, validate_batches(batch, 1 << 20), config, NOW)
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
    records, _ = validate_records(TP, keyed, [read_batch_header(keyed)], config, NOW)
    assert records is keyed
    both = keyed + keyless
    with pytest.raises(RecordValidationError) as refused:
        validate_records(
            TP, both, [read_batch_header(keyed), read_batch_header(keyless)], config, NOW
        )
    assert [e.batch_index for e in refused.value.record_errors] == [1]


def test_a_compacted_topic_with_a_codec_checks_keys_before_converting() -> None:
    batch = build_batch([(b"k", b"v", []), (None, b"v", [])])
    config = LogConfig(cleanup_policy=("compact",), compression_type="gzip")
    with pytest.raises(RecordValidationError):
        validate_records(TP, batch, validate_batches(batch, 1 << 20), config, NOW)


def test_a_batch_too_large_once_recompressed_is_refused() -> None:
    batch = build_batch([(b"k", bytes(range(256)) * 4, [])] * 4, compression=COMPRESSION_ZSTD)
    raw = build_batch([(b"k", bytes(range(256)) * 4, [])] * 4)
    config = LogConfig(compression_type="uncompressed", max_message_bytes=len(raw) - 1)
    with pytest.raises(RecordTooLargeError):
        validate_records(TP, batch, validate_batches(batch, 1 << 20), config, NOW)


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
        validate_records(
            TP, bad, validate_batches(bad, 1 << 20), LogConfig(compression_type="lz4"), NOW
        )


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
    records, _ = validate_records(TP, unread, validate_batches(unread, 1 << 20), config, NOW)
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
    records, headers = validate_records(TP, sent, validate_batches(sent, 1 << 20), config, NOW)
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


# -- timestamps out of the topic's bounds (message.timestamp.before/after.max.ms) -----------

HOUR = 3_600_000


def timed_batch(
    timestamps: list[int], codec: int = COMPRESSION_NONE, keyless: tuple[int, ...] = ()
) -> bytes:
    records = [(None if i in keyless else b"k%d" % i, b"v", []) for i in range(len(timestamps))]
    return build_batch(records, 500, timestamps=timestamps, compression=codec)


def refused_by(batch: bytes, config: LogConfig, now: int = NOW) -> RecordValidationError:
    with pytest.raises(RecordValidationError) as refused:
        validate_records(TP, batch, validate_batches(batch, 1 << 20), config, now)
    return refused.value


def out_of_range(ts: int, offset: int, low: int, high: int) -> str:
    """Kafka's LogValidator.validateTimestamp on a record out of range."""
    return (
        f"Timestamp {ts} of message with offset {offset} is out of range. The timestamp "
        f"should be within [{low}, {high}]"
    )


@pytest.mark.parametrize("codec", [COMPRESSION_NONE, COMPRESSION_ZSTD])
def test_records_over_an_hour_ahead_are_each_named(codec: int) -> None:
    """Kafka's default after.max.ms: the records two hours ahead fail, the others with them
    (the batch is refused whole), each named with its offset in the batch as sent."""
    ahead = NOW + 2 * HOUR
    timestamps = [NOW - 5, ahead, NOW, ahead + 7, NOW + HOUR, NOW + HOUR + 1]
    exc = refused_by(timed_batch(timestamps, codec), LogConfig())
    assert exc.code is ErrorCode.invalid_timestamp
    assert exc.message == "One or more records have been rejected due to invalid timestamp"
    low, high = NOW - LONG_MAX, NOW + HOUR
    assert exc.record_errors == [
        RecordError(1, out_of_range(ahead, 501, low, high)),
        RecordError(3, out_of_range(ahead + 7, 503, low, high)),
        RecordError(5, out_of_range(NOW + HOUR + 1, 505, low, high)),
    ]


def test_negative_deltas_put_records_behind_the_first() -> None:
    """The first record ahead and the later ones back to now (deltas below zero, as Kafka
    Streams forwards event times): only the ones ahead are named."""
    ahead = NOW + 3 * HOUR
    timestamps = [ahead, NOW - 40, ahead - 2 * HOUR, NOW - 3 * HOUR, ahead + 1]
    exc = refused_by(timed_batch(timestamps), LogConfig())
    assert [e.batch_index for e in exc.record_errors] == [0, 4]
    assert f"Timestamp {ahead} of message with offset 500 " in exc.record_errors[0].message


def test_a_finite_before_max_ms_names_the_records_too_old() -> None:
    config = LogConfig(message_timestamp_before_max_ms=HOUR)
    assert inspects_records(config)  # the smallest timestamp is not in the header
    timestamps = [NOW, NOW - HOUR, NOW - HOUR - 1, NOW + 2 * HOUR, NOW - 10 * HOUR]
    exc = refused_by(timed_batch(timestamps, COMPRESSION_LZ4), config)
    assert exc.code is ErrorCode.invalid_timestamp
    low, high = NOW - HOUR, NOW + HOUR
    assert exc.record_errors == [
        RecordError(2, out_of_range(NOW - HOUR - 1, 502, low, high)),
        RecordError(3, out_of_range(NOW + 2 * HOUR, 503, low, high)),
        RecordError(4, out_of_range(NOW - 10 * HOUR, 504, low, high)),
    ]
    fine = timed_batch([NOW - HOUR, NOW, NOW + HOUR])
    assert validate_records(TP, fine, validate_batches(fine, 1 << 20), config, NOW)[0] is fine


def test_bounds_at_long_max_refuse_nothing_and_are_described_as_kafka_wraps_them() -> None:
    """after.max.ms = Long.MAX_VALUE (what a campaign that moves clocks sets): any time
    ahead passes; a finite before.max.ms still refuses, its message showing now + after as
    Java's long arithmetic wraps it."""
    config = LogConfig(message_timestamp_after_max_ms=LONG_MAX)
    far = timed_batch([NOW + 1000 * 24 * HOUR, NOW])
    headers = validate_batches(far, 1 << 20)
    assert timestamps_settled(headers, config, NOW)
    config = LogConfig(message_timestamp_after_max_ms=LONG_MAX, message_timestamp_before_max_ms=0)
    exc = refused_by(timed_batch([NOW - 1, NOW + 1000 * 24 * HOUR]), config)
    assert exc.record_errors == [
        RecordError(0, out_of_range(NOW - 1, 500, NOW, NOW + LONG_MAX - 2**64)),
    ]


def test_records_without_a_timestamp_pass() -> None:
    """A record at -1 (NO_TIMESTAMP, a v0 client's) is never out of range."""
    config = LogConfig(message_timestamp_before_max_ms=0, message_timestamp_after_max_ms=0)
    batch = timed_batch([-1, -1])
    assert validate_records(TP, batch, validate_batches(batch, 1 << 20), config, NOW)[0] is batch


@pytest.mark.parametrize(
    ("codec", "shown"),
    [
        # Kafka reads an uncompressed batch's records whole (DefaultRecord: a null key shows
        # as 0 bytes), a compressed one kept in its codec without its keys and values
        # (PartialDefaultRecord: the length fields, -1 for null).
        (COMPRESSION_NONE, "DefaultRecord(offset=%d, timestamp=%d, key=%d bytes, value=3 bytes)"),
        (
            COMPRESSION_GZIP,
            "PartialDefaultRecord(offset=%d, timestamp=%d, key=%d bytes, value=3 bytes)",
        ),
    ],
)
def test_a_batch_its_producer_marked_log_append_time_is_refused(codec: int, shown: str) -> None:
    """On a LogAppendTime topic every record of it is named; on a CreateTime topic its
    records carry its max timestamp, checked against the bounds like any other."""
    batch = bytearray(
        build_batch([(b"key", b"abc", []), (None, b"abc", [])], 10, NOW, compression=codec)
    )
    set_log_append_time(batch, 0, NOW + 5)
    null_key = -1 if codec != COMPRESSION_NONE else 0
    exc = refused_by(bytes(batch), LogConfig(message_timestamp_type="LogAppendTime"))
    assert exc.code is ErrorCode.invalid_timestamp
    assert exc.record_errors == [
        RecordError(
            i,
            f"Invalid timestamp type in message {shown % (10 + i, NOW + 5, key)}. Producer "
            "should not set timestamp type to LogAppendTime.",
        )
        for i, key in enumerate((3, null_key))
    ]
    # In range on a CreateTime topic: stored as sent.
    stored, _ = validate_records(
        TP, bytes(batch), validate_batches(batch, 1 << 20), LogConfig(), NOW
    )
    assert stored == batch
    # Ahead: each record, at the batch's max timestamp, is out of range.
    set_log_append_time(batch, 0, NOW + 2 * HOUR)
    exc = refused_by(bytes(batch), LogConfig())
    assert [e.batch_index for e in exc.record_errors] == [0, 1]
    assert exc.record_errors[1].message.startswith(
        f"Timestamp {NOW + 2 * HOUR} of message with offset 11 "
    )
    # Without a timestamp (-1) it is the timestamp type that is refused.
    set_log_append_time(batch, 0, -1)
    exc = refused_by(bytes(batch), LogConfig())
    assert exc.record_errors[0].message.startswith("Invalid timestamp type in message ")


def test_the_header_settles_the_defaults_without_reading_records() -> None:
    """At Kafka's defaults a batch whose max timestamp is within the hour ahead is stored
    unread: records that would not even parse go through.  One whose header shows a record
    ahead is read (and here found corrupt)."""
    good = hand_made([(0, 0), (0, 1)], COMPRESSION_GZIP)
    header = read_batch_header(good)

    def with_max_timestamp(max_timestamp: int) -> bytes:
        fields = {
            f: getattr(header, f)
            for f in header._fields
            if f not in ("batch_length", "magic", "crc", "max_timestamp")
        }
        return assemble_batch(
            **fields,
            max_timestamp=max_timestamp,
            records=compress(COMPRESSION_GZIP, b"not records"),
        )

    config = LogConfig()
    assert not inspects_records(config)
    unread = with_max_timestamp(NOW + HOUR)
    headers = validate_batches(unread, 1 << 20)
    assert timestamps_settled(headers, config, NOW)
    assert validate_records(TP, unread, headers, config, NOW)[0] is unread
    ahead = with_max_timestamp(NOW + HOUR + 1)
    headers = validate_batches(ahead, 1 << 20)
    assert not timestamps_settled(headers, config, NOW)
    with pytest.raises(CorruptRecordError):
        validate_records(TP, ahead, headers, config, NOW)
    # A LogAppendTime topic reads only a batch its producer marked LogAppendTime.
    log_append = LogConfig(message_timestamp_type="LogAppendTime")
    assert timestamps_settled(validate_batches(ahead, 1 << 20), log_append, NOW)
    marked = bytearray(ahead)
    set_log_append_time(marked, 0, NOW)
    assert not timestamps_settled(validate_batches(marked, 1 << 20), log_append, NOW)


def test_a_compacted_topic_names_keyless_records_and_those_ahead_as_invalid_timestamp() -> None:
    """Kafka checks a record's key, then its timestamp: one error per record, and any
    timestamp among them makes the batch's error INVALID_TIMESTAMP."""
    ahead = NOW + 2 * HOUR
    batch = timed_batch([NOW, ahead, NOW, ahead], COMPRESSION_LZ4, keyless=(2, 3))
    exc = refused_by(batch, LogConfig(cleanup_policy=("compact",)))
    assert exc.code is ErrorCode.invalid_timestamp
    assert exc.message == "One or more records have been rejected due to invalid timestamp"
    no_key = f"Compacted topic cannot accept message without key in topic partition {TP}"
    assert exc.record_errors == [
        RecordError(1, out_of_range(ahead, 501, NOW - LONG_MAX, NOW + HOUR)),
        RecordError(2, no_key),
        RecordError(3, no_key),
    ]
