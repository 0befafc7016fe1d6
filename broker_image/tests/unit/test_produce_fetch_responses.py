"""The hand-written Produce/Fetch encoders must match kio byte for byte."""

from __future__ import annotations

import dataclasses
import datetime
import io
import struct
import sys
import uuid
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kio.index import load_request_schema, load_response_schema
from kio.schema.errors import ErrorCode
from kio.serial import entity_writer
from kio.serial import writers as kio_writers
from kio.static.primitive import Records, i32, i32Timedelta, i64

from samsa.protocol import wire
from samsa.protocol.produce_fetch_responses import (
    FETCH_VERSIONS,
    FetchPartitionResult,
    FetchTopicResult,
    ProducePartitionResult,
    ProduceTopicResult,
    encode_fetch_response,
    encode_produce_response,
)

PRODUCE = 0
FETCH = 1
EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
ERROR_CODES = [code.value for code in ErrorCode]


# --- kio reference encoding -------------------------------------------------


def build(cls: type, **values: Any) -> Any:
    """Instantiate a kio dataclass from whichever of `values` this version has.

    Callers pass the union of fields across versions; the version's dataclass
    decides which apply. A field kio lacks but our encoder writes (or vice
    versa) still shows up as a byte mismatch.
    """
    names = {field.name for field in dataclasses.fields(cls)}
    return cls(**{name: value for name, value in values.items() if name in names})


def schema_module(api_key: int, version: int) -> Any:
    return sys.modules[load_response_schema(api_key, version).__module__]


def kio_frame(response: Any, correlation_id: int) -> bytes:
    header_cls = type(response).__header_schema__
    buffer = io.BytesIO()
    entity_writer(header_cls)(buffer, header_cls(correlation_id=i32(correlation_id)))
    entity_writer(type(response))(buffer, response)
    body = buffer.getvalue()
    return struct.pack(">i", len(body)) + body


def throttle(ms: int) -> i32Timedelta:
    return i32Timedelta.parse(datetime.timedelta(milliseconds=ms))


def kio_produce(version: int, topics: list[ProduceTopicResult], throttle_ms: int) -> Any:
    mod = schema_module(PRODUCE, version)

    def partition(p: ProducePartitionResult) -> Any:
        append_time = (
            None
            if p.log_append_time_ms == -1
            else EPOCH + datetime.timedelta(milliseconds=p.log_append_time_ms)
        )
        return build(
            mod.PartitionProduceResponse,
            index=i32(p.index),
            error_code=ErrorCode(p.error_code),
            base_offset=i64(p.base_offset),
            log_append_time=append_time,
            log_start_offset=i64(p.log_start_offset),
            # v8+ only; earlier versions leave the field out, as the encoder does.
            record_errors=tuple(
                mod.BatchIndexAndErrorMessage(
                    batch_index=i32(index), batch_index_error_message=message
                )
                for index, message in p.record_errors
            )
            if hasattr(mod, "BatchIndexAndErrorMessage")
            else (),
            error_message=p.error_message,
        )

    responses = tuple(
        build(
            mod.TopicProduceResponse,
            name=t.name,
            topic_id=t.topic_id,
            partition_responses=tuple(partition(p) for p in t.partitions),
        )
        for t in topics
    )
    return build(mod.ProduceResponse, responses=responses, throttle_time=throttle(throttle_ms))


def kio_fetch(
    version: int,
    topics: list[FetchTopicResult],
    throttle_ms: int,
    error_code: int,
    session_id: int,
) -> Any:
    mod = schema_module(FETCH, version)

    def partition(p: FetchPartitionResult) -> Any:
        aborted = (
            None
            if p.aborted_transactions is None
            else tuple(
                mod.AbortedTransaction(producer_id=i64(pid), first_offset=i64(first))
                for pid, first in p.aborted_transactions
            )
        )
        # Tagged fields only exist from v12; left out, kio uses its default.
        tagged: dict[str, Any] = {}
        if p.diverging_epoch is not None and hasattr(mod, "EpochEndOffset"):
            epoch, end_offset = p.diverging_epoch
            tagged["diverging_epoch"] = mod.EpochEndOffset(
                epoch=i32(epoch), end_offset=i64(end_offset)
            )
        if p.current_leader is not None and hasattr(mod, "LeaderIdAndEpoch"):
            leader_id, leader_epoch = p.current_leader
            tagged["current_leader"] = mod.LeaderIdAndEpoch(
                leader_id=i32(leader_id), leader_epoch=i32(leader_epoch)
            )
        return build(
            mod.PartitionData,
            partition_index=i32(p.partition_index),
            error_code=ErrorCode(p.error_code),
            high_watermark=i64(p.high_watermark),
            last_stable_offset=i64(p.last_stable_offset),
            log_start_offset=i64(p.log_start_offset),
            aborted_transactions=aborted,
            preferred_read_replica=i32(p.preferred_read_replica),
            records=None if p.records is None else Records(bytes(p.records)),
            **tagged,
        )

    responses = tuple(
        build(
            mod.FetchableTopicResponse,
            topic=t.name,
            topic_id=t.topic_id,
            partitions=tuple(partition(p) for p in t.partitions),
        )
        for t in topics
    )
    return build(
        mod.FetchResponse,
        throttle_time=throttle(throttle_ms),
        error_code=ErrorCode(error_code),
        session_id=i32(session_id),
        responses=responses,
    )


def assert_produce_matches(
    version: int,
    correlation_id: int,
    topics: list[ProduceTopicResult],
    throttle_ms: int = 0,
) -> None:
    ours = encode_produce_response(version, correlation_id, topics, throttle_ms)
    expected = kio_frame(kio_produce(version, topics, throttle_ms), correlation_id)
    assert ours == expected


def assert_fetch_matches(
    version: int,
    correlation_id: int,
    topics: list[FetchTopicResult],
    throttle_ms: int = 0,
    error_code: int = 0,
    session_id: int = 0,
) -> list[bytes | memoryview]:
    chunks = encode_fetch_response(
        version, correlation_id, topics, throttle_ms, error_code, session_id
    )
    expected = kio_frame(
        kio_fetch(version, topics, throttle_ms, error_code, session_id), correlation_id
    )
    assert b"".join(chunks) == expected
    assert len(chunks[0]) == 4
    return chunks


# --- fixtures ---------------------------------------------------------------


def produce_topics() -> list[ProduceTopicResult]:
    return [
        ProduceTopicResult(
            "orders",
            [
                ProducePartitionResult(0, 0, 0),
                ProducePartitionResult(1, 0, 12345678901, 1_700_000_000_123, 17),
                ProducePartitionResult(
                    2,
                    ErrorCode.not_leader_or_follower.value,
                    -1,
                    error_message="not the leader",
                ),
            ],
            topic_id=uuid.UUID("0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"),
        ),
        ProduceTopicResult("empty-partitions", [], topic_id=None),
        ProduceTopicResult(
            "grüße-日本語",
            [
                ProducePartitionResult(
                    7,
                    ErrorCode.invalid_record.value,
                    -1,
                    -1,
                    -1,
                    "ungültig: ✗",
                ),
                ProducePartitionResult(8, ErrorCode.unknown_server_error.value, -1, 0, 0, ""),
                # KIP-467: the records that made the batch fail, with and without a message.
                ProducePartitionResult(
                    9,
                    ErrorCode.invalid_record.value,
                    -1,
                    -1,
                    0,
                    "One or more records have been rejected",
                    record_errors=[(0, "no key"), (9, "ключ ✗"), (99, None)],
                ),
                ProducePartitionResult(
                    10, ErrorCode.invalid_record.value, -1, record_errors=[(3, "")]
                ),
            ],
            topic_id=uuid.uuid4(),
        ),
    ]


def fetch_topics(records: bytes | memoryview = b"\x01" * 300) -> list[FetchTopicResult]:
    return [
        FetchTopicResult(
            "events",
            uuid.UUID("12345678-1234-5678-1234-567812345678"),
            [
                FetchPartitionResult(0, 0, 100, 100, 0, records),
                FetchPartitionResult(1, 0, 5, 4, 2, b""),
                FetchPartitionResult(2, ErrorCode.offset_out_of_range.value, 10, 10, 3, None),
                FetchPartitionResult(
                    3,
                    0,
                    42,
                    40,
                    0,
                    b"abc",
                    aborted_transactions=[(9001, 3), (9002, 7)],
                    preferred_read_replica=2,
                    diverging_epoch=(4, 39),
                    current_leader=(1, 5),
                ),
                FetchPartitionResult(
                    4,
                    ErrorCode.fenced_leader_epoch.value,
                    -1,
                    -1,
                    -1,
                    None,
                    aborted_transactions=[],
                    current_leader=(3, 8),
                ),
                FetchPartitionResult(
                    5,
                    0,
                    1,
                    1,
                    0,
                    b"z",
                    diverging_epoch=(-1, -1),
                    current_leader=(-1, -1),
                ),
                FetchPartitionResult(6, 0, 1, 1, 0, b"y", diverging_epoch=(2, 200)),
            ],
        ),
        FetchTopicResult("no-partitions", uuid.uuid4(), []),
        FetchTopicResult(
            "ünïcødé-トピック",
            uuid.UUID(int=0),
            [FetchPartitionResult(0, 0, 0, 0, 0, records)],
        ),
    ]


# --- Produce ----------------------------------------------------------------

KIO_PRODUCE_VERSIONS = range(3, 14)


@pytest.mark.parametrize("version", KIO_PRODUCE_VERSIONS)
def test_produce_empty(version: int) -> None:
    assert_produce_matches(version, 0, [])
    assert_produce_matches(version, -1, [], throttle_ms=2**31 - 1)


@pytest.mark.parametrize("version", KIO_PRODUCE_VERSIONS)
def test_produce_several_topics(version: int) -> None:
    assert_produce_matches(version, 123456, produce_topics(), throttle_ms=250)


@pytest.mark.parametrize("version", KIO_PRODUCE_VERSIONS)
def test_produce_long_names_need_multibyte_varints(version: int) -> None:
    topics = [
        ProduceTopicResult(
            "t" * 249,
            [ProducePartitionResult(i, 0, i * 1000, error_message="m" * 300) for i in range(130)],
        )
    ]
    assert_produce_matches(version, 7, topics)


@pytest.mark.parametrize("version", [-1, 14])
def test_produce_rejects_unknown_versions(version: int) -> None:
    with pytest.raises(ValueError):
        encode_produce_response(version, 1, [])


# kio has no schema for Produce v0-v2 (answered only to refuse them): golden bytes instead,
# from the protocol guide's layouts.
_LEGACY_TOPICS = [ProduceTopicResult("t", [ProducePartitionResult(3, 35, -1, -1)])]
_LEGACY_TOPIC = (
    b"\x00\x00\x00\x01" + b"\x00\x01t" + b"\x00\x00\x00\x01" + b"\x00\x00\x00\x03\x00\x23"
)


@pytest.mark.parametrize(
    ("version", "body"),
    [
        (0, _LEGACY_TOPIC + b"\xff" * 8),
        (1, _LEGACY_TOPIC + b"\xff" * 8 + b"\x00\x00\x00\x07"),
        (2, _LEGACY_TOPIC + b"\xff" * 16 + b"\x00\x00\x00\x07"),
    ],
)
def test_produce_legacy_versions_golden(version: int, body: bytes) -> None:
    frame = encode_produce_response(version, 9, _LEGACY_TOPICS, throttle_time_ms=7)
    payload = b"\x00\x00\x00\x09" + body
    assert frame == len(payload).to_bytes(4, "big") + payload


# --- Fetch ------------------------------------------------------------------


@pytest.mark.parametrize("version", FETCH_VERSIONS)
def test_fetch_empty(version: int) -> None:
    chunks = assert_fetch_matches(version, 0, [])
    assert len(chunks) == 2
    assert_fetch_matches(version, 99, [], 10, ErrorCode.fetch_session_id_not_found.value, 77)


@pytest.mark.parametrize("version", FETCH_VERSIONS)
def test_fetch_several_topics(version: int) -> None:
    assert_fetch_matches(version, 31337, fetch_topics(), 5, ErrorCode.none.value, 2_000_000_000)


@pytest.mark.parametrize("version", FETCH_VERSIONS)
def test_fetch_top_level_error(version: int) -> None:
    assert_fetch_matches(
        version, 1, fetch_topics(), 0, ErrorCode.invalid_fetch_session_epoch.value, -1
    )


@pytest.mark.parametrize("version", FETCH_VERSIONS)
def test_fetch_records_are_not_copied(version: int) -> None:
    big = bytes(range(256)) * 64
    view = memoryview(bytearray(b"\x07" * 5000))
    topics = [
        FetchTopicResult(
            "t",
            uuid.uuid4(),
            [
                FetchPartitionResult(0, 0, 1, 1, 0, big),
                FetchPartitionResult(1, 0, 1, 1, 0, b""),
                FetchPartitionResult(2, 0, 1, 1, 0, None),
                FetchPartitionResult(3, 0, 1, 1, 0, view, current_leader=(1, 1)),
            ],
        )
    ]
    chunks = assert_fetch_matches(version, 5, topics)
    record_chunks = [c for c in chunks if c is big or c is view]
    assert len(record_chunks) == 2
    assert chunks.index(big) < next(i for i, c in enumerate(chunks) if c is view)
    metadata = [c for c in chunks if c is not big and c is not view]
    assert all(type(c) is bytes for c in metadata)
    assert sum(len(c) for c in metadata) < 400


@pytest.mark.parametrize("version", FETCH_VERSIONS)
def test_fetch_many_partitions_need_multibyte_varints(version: int) -> None:
    topics = [
        FetchTopicResult(
            "x" * 200,
            uuid.uuid4(),
            [
                FetchPartitionResult(
                    i, 0, i, i, 0, b"r" * i, aborted_transactions=[(i, i)] * (i % 3)
                )
                for i in range(140)
            ],
        )
    ]
    assert_fetch_matches(version, 8, topics)


@pytest.mark.parametrize("version", [3, 19])
def test_fetch_rejects_unknown_versions(version: int) -> None:
    with pytest.raises(ValueError):
        encode_fetch_response(version, 1, [])


# --- Hypothesis -------------------------------------------------------------

i16s = st.integers(-(2**15), 2**15 - 1)
i32s = st.integers(-(2**31), 2**31 - 1)
i64s = st.integers(-(2**63), 2**63 - 1)
# kio goes through datetime/float for timestamps; keep them where that is exact.
timestamps = st.one_of(st.just(-1), st.integers(0, 2**43))
throttles = st.integers(0, 2**31 - 1)
error_codes = st.sampled_from(ERROR_CODES)
topic_names = st.text(min_size=0, max_size=60)
pairs32 = st.tuples(i32s, i32s)

produce_partitions = st.builds(
    ProducePartitionResult,
    index=i32s,
    error_code=error_codes,
    base_offset=i64s,
    log_append_time_ms=timestamps,
    log_start_offset=i64s,
    error_message=st.one_of(st.none(), st.text(max_size=40)),
    record_errors=st.lists(st.tuples(i32s, st.one_of(st.none(), st.text(max_size=40))), max_size=4),
)
produce_topic_lists = st.lists(
    st.builds(
        ProduceTopicResult,
        name=topic_names,
        partitions=st.lists(produce_partitions, max_size=5),
        topic_id=st.one_of(st.none(), st.uuids()),
    ),
    max_size=4,
)

fetch_partitions = st.builds(
    FetchPartitionResult,
    partition_index=i32s,
    error_code=error_codes,
    high_watermark=i64s,
    last_stable_offset=i64s,
    log_start_offset=i64s,
    records=st.one_of(st.none(), st.binary(max_size=200)),
    aborted_transactions=st.one_of(st.none(), st.lists(st.tuples(i64s, i64s), max_size=3)),
    preferred_read_replica=i32s,
    diverging_epoch=st.one_of(st.none(), st.just((-1, -1)), st.tuples(i32s, i64s)),
    current_leader=st.one_of(st.none(), st.just((-1, -1)), pairs32),
)
fetch_topic_lists = st.lists(
    st.builds(
        FetchTopicResult,
        name=topic_names,
        topic_id=st.uuids(),
        partitions=st.lists(fetch_partitions, max_size=5),
    ),
    max_size=4,
)


@settings(max_examples=300, deadline=None)
@given(
    version=st.sampled_from(KIO_PRODUCE_VERSIONS),
    correlation_id=i32s,
    topics=produce_topic_lists,
    throttle_ms=throttles,
)
def test_produce_matches_kio_generated(
    version: int, correlation_id: int, topics: list[ProduceTopicResult], throttle_ms: int
) -> None:
    assert_produce_matches(version, correlation_id, topics, throttle_ms)


@settings(max_examples=300, deadline=None)
@given(
    version=st.sampled_from(FETCH_VERSIONS),
    correlation_id=i32s,
    topics=fetch_topic_lists,
    throttle_ms=throttles,
    error_code=error_codes,
    session_id=i32s,
)
def test_fetch_matches_kio_generated(
    version: int,
    correlation_id: int,
    topics: list[FetchTopicResult],
    throttle_ms: int,
    error_code: int,
    session_id: int,
) -> None:
    chunks = assert_fetch_matches(
        version, correlation_id, topics, throttle_ms, error_code, session_id
    )
    for topic in topics:
        for p in topic.partitions:
            if p.records:
                assert any(c is p.records for c in chunks)


# --- wire primitives and header rules ---------------------------------------


def kio_bytes(writer: Any, value: Any) -> bytes:
    buffer = io.BytesIO()
    writer(buffer, value)
    return buffer.getvalue()


@given(st.integers(0, 2**35 - 1))
def test_uvarint_matches_kio(value: int) -> None:
    assert wire.encode_uvarint(value) == kio_bytes(kio_writers.write_unsigned_varint, value)


def test_uvarint_rejects_negative() -> None:
    with pytest.raises(ValueError):
        wire.encode_uvarint(-1)


@given(st.one_of(st.none(), st.text(max_size=300)))
def test_strings_match_kio(value: str | None) -> None:
    assert wire.compact_nullable_string(value) == kio_bytes(
        kio_writers.write_nullable_compact_string, value
    )
    assert wire.legacy_nullable_string(value) == kio_bytes(
        kio_writers.write_nullable_legacy_string, value
    )
    if value is not None:
        assert wire.compact_string(value) == kio_bytes(kio_writers.write_compact_string, value)
        assert wire.legacy_string(value) == kio_bytes(kio_writers.write_legacy_string, value)


@given(st.one_of(st.none(), st.integers(0, 100_000)))
def test_array_lengths_match_kio(length: int | None) -> None:
    assert wire.compact_length(length) == kio_bytes(kio_writers.write_compact_array_length, length)
    expected_legacy = kio_bytes(
        kio_writers.write_legacy_array_length, -1 if length is None else length
    )
    assert wire.legacy_array_length(length) == expected_legacy


@given(st.one_of(st.none(), st.uuids()))
def test_uuid_matches_kio(value: uuid.UUID | None) -> None:
    assert wire.uuid_bytes(value) == kio_bytes(kio_writers.write_uuid, value)


def test_tagged_fields_sorted_and_framed() -> None:
    assert wire.encode_tagged_fields([]) == b"\x00"
    encoded = wire.encode_tagged_fields([(300, b"xy"), (1, b"")])
    assert encoded == b"\x02" + b"\x01\x00" + b"\xac\x02\x02xy"


@pytest.mark.parametrize("flexible", [False, True])
@given(correlation_id=i32s)
def test_response_header_matches_kio(flexible: bool, correlation_id: int) -> None:
    schema = load_response_schema(PRODUCE, 9 if flexible else 8)
    header_cls = schema.__header_schema__
    expected = kio_bytes(entity_writer(header_cls), header_cls(correlation_id=i32(correlation_id)))
    assert wire.encode_response_header(correlation_id, flexible) == expected


@pytest.mark.parametrize(
    ("api_key", "version", "flexible"),
    [
        (PRODUCE, 8, False),
        (PRODUCE, 9, True),
        (FETCH, 11, False),
        (FETCH, 12, True),
        (3, 9, True),  # Metadata
        (18, 0, False),  # ApiVersions: header v0 at every version
        (18, 3, False),
        (18, 4, False),
    ],
)
def test_response_header_flexibility(api_key: int, version: int, flexible: bool) -> None:
    assert wire.response_header_flexible(api_key, version) is flexible


@pytest.mark.parametrize(
    ("api_key", "version", "flexible"),
    [(PRODUCE, 8, False), (PRODUCE, 9, True), (FETCH, 12, True), (18, 2, False), (18, 3, True)],
)
def test_request_header_flexibility(api_key: int, version: int, flexible: bool) -> None:
    assert wire.request_header_flexible(api_key, version) is flexible
    header_version = load_request_schema(api_key, version).__header_schema__.__version__
    assert header_version == (2 if flexible else 1)


@pytest.mark.parametrize("version", [*KIO_PRODUCE_VERSIONS])
def test_produce_header_agrees_with_body_flexibility(version: int) -> None:
    assert wire.response_header_flexible(PRODUCE, version) is (version >= 9)


@pytest.mark.parametrize("version", [*FETCH_VERSIONS])
def test_fetch_header_agrees_with_body_flexibility(version: int) -> None:
    assert wire.response_header_flexible(FETCH, version) is (version >= 12)
