"""Rebuilding stored batches without some of their records (the keyed-records check of a
compacted topic is in test_record_validation.py)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from samsa.protocol.record_batch import (
    COMPRESSION_GZIP,
    COMPRESSION_LZ4,
    COMPRESSION_NONE,
    COMPRESSION_SNAPPY,
    COMPRESSION_ZSTD,
    DELETE_HORIZON_MASK,
    batch_crc_ok,
    build_batch,
    decode_records,
    read_batch_header,
    set_log_append_time,
)
from samsa.protocol.record_filter import (
    batch_body,
    delete_horizon,
    empty_batch,
    parse_records,
    rebuild_batch,
    record_keys,
)

CODECS = [COMPRESSION_NONE, COMPRESSION_GZIP, COMPRESSION_SNAPPY, COMPRESSION_LZ4, COMPRESSION_ZSTD]

records_st = st.lists(
    st.tuples(
        st.one_of(st.none(), st.binary(max_size=20)),
        st.one_of(
            st.none(),
            st.binary(max_size=300),
            # Lengths of one, two and three varint bytes.
            st.integers(0, 20_000).map(lambda n: b"v" * n),
        ),
        st.lists(
            st.tuples(st.text(max_size=5), st.one_of(st.none(), st.binary(max_size=5))), max_size=2
        ),
    ),
    min_size=1,
    max_size=40,
)


@settings(max_examples=150, deadline=None)
@given(
    records=records_st,
    data=st.data(),
    codec=st.sampled_from(CODECS),
    horizon=st.one_of(st.none(), st.integers(0, 2**40)),
)
def test_rebuilt_batch_keeps_every_kept_record_and_the_header(
    records: list, data: st.DataObject, codec: int, horizon: int | None
) -> None:
    timestamps = data.draw(
        st.lists(st.integers(0, 2**41), min_size=len(records), max_size=len(records))
    )
    batch = build_batch(
        records,
        base_offset=1000,
        timestamps=timestamps,
        compression=codec,
        producer_id=42,
        producer_epoch=3,
        base_sequence=17,
        partition_leader_epoch=5,
    )
    h = read_batch_header(batch)
    body = batch_body(batch, h)
    spans = parse_records(body, h.records_count)
    assert [s.key for s in spans] == [r[0] for r in records]
    assert [s.has_value for s in spans] == [r[1] is not None for r in records]
    assert record_keys(body, h.records_count) == [(s.offset_delta, s.key) for s in spans]
    keep = data.draw(st.sets(st.integers(0, len(records) - 1), min_size=1))
    kept = [spans[i] for i in sorted(keep)]
    rebuilt = rebuild_batch(h, body, kept, horizon)
    nh = read_batch_header(rebuilt)
    assert batch_crc_ok(rebuilt, 0, nh)
    assert (nh.base_offset, nh.last_offset_delta, nh.partition_leader_epoch) == (
        1000,
        h.last_offset_delta,
        5,
    )
    assert (nh.producer_id, nh.producer_epoch, nh.base_sequence) == (42, 3, 17)
    assert nh.compression == codec and nh.records_count == len(keep)
    assert delete_horizon(nh) == horizon
    original = decode_records(batch)
    assert decode_records(rebuilt) == [original[i] for i in sorted(keep)]
    assert nh.max_timestamp == max(timestamps[i] for i in keep)


def test_log_append_time_batches_keep_their_append_time() -> None:
    batch = bytearray(build_batch([(b"a", b"1", []), (b"b", b"2", [])], timestamps=[5, 6]))
    set_log_append_time(batch, 0, 999)
    h = read_batch_header(batch)
    body = batch_body(bytes(batch), h)
    spans = parse_records(body, 2)
    rebuilt = rebuild_batch(h, body, spans[1:], 12345)
    assert delete_horizon(read_batch_header(rebuilt)) == 12345
    nh = read_batch_header(rebuilt)
    assert nh.max_timestamp == 999 and nh.timestamp_type == h.timestamp_type
    assert [(r.offset, r.timestamp) for r in decode_records(rebuilt)] == [(1, 999)]


def test_empty_batch_keeps_offsets_and_producer_fields() -> None:
    batch = build_batch(
        [(b"k", b"v", [])] * 3,
        base_offset=70,
        timestamp_ms=1234,
        compression=COMPRESSION_ZSTD,
        producer_id=9,
        producer_epoch=2,
        base_sequence=30,
        partition_leader_epoch=1,
    )
    h = read_batch_header(batch)
    empty = empty_batch(h)
    eh = read_batch_header(empty)
    assert batch_crc_ok(empty, 0, eh)
    assert eh.records_count == 0 and eh.last_offset == h.last_offset == 72
    assert (eh.producer_id, eh.producer_epoch, eh.base_sequence) == (9, 2, 30)
    assert eh.compression == 0 and eh.attributes & DELETE_HORIZON_MASK == 0
    assert decode_records(empty) == []
