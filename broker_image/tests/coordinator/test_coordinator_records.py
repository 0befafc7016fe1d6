"""__consumer_offsets record formats: golden bytes built by hand from Kafka's JSON schemas,
Hypothesis round trips for every version, and Kafka's partitionFor."""

from __future__ import annotations

import contextlib
import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from samsa.coordinator.group_records import (
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
    RecordFormatError,
    UnknownKey,
    decode_group_metadata_value,
    decode_key,
    decode_offset_commit_value,
    encode_group_metadata_key,
    encode_group_metadata_value,
    encode_offset_commit_key,
    encode_offset_commit_value,
)
from samsa.coordinator.offsets_topic import java_string_hashcode, partition_for, utf16_length


def i16(v: int) -> bytes:
    return struct.pack(">h", v)


def i32(v: int) -> bytes:
    return struct.pack(">i", v)


def i64(v: int) -> bytes:
    return struct.pack(">q", v)


def s(v: str) -> bytes:
    return i16(len(v.encode())) + v.encode()


# ---------------------------------------------------------------- golden bytes


def test_offset_commit_key_is_version_1_group_topic_partition() -> None:
    key = encode_offset_commit_key(OffsetCommitKey("my-group", "orders", 3))
    assert key == b"\x00\x01" + b"\x00\x08my-group" + b"\x00\x06orders" + b"\x00\x00\x00\x03"
    assert decode_key(key) == OffsetCommitKey("my-group", "orders", 3)


def test_offset_commit_key_version_0_reads_the_same() -> None:
    key = i16(0) + s("g") + s("t") + i32(7)
    assert decode_key(key) == OffsetCommitKey("g", "t", 7)
    assert encode_offset_commit_key(OffsetCommitKey("g", "t", 7), version=0) == key


def test_group_metadata_key_is_version_2_group() -> None:
    key = encode_group_metadata_key(GroupMetadataKey("my-group"))
    assert key == b"\x00\x02\x00\x08my-group"
    assert decode_key(key) == GroupMetadataKey("my-group")


def test_unknown_key_versions_are_reported_not_raised() -> None:
    assert decode_key(i16(7) + s("whatever")) == UnknownKey(7)


def test_offset_commit_value_v3_is_the_default() -> None:
    value = OffsetCommitValue(offset=42, metadata="m", commit_timestamp=1000, leader_epoch=7)
    encoded = encode_offset_commit_value(value)
    assert encoded == i16(3) + i64(42) + i32(7) + s("m") + i64(1000)
    assert decode_offset_commit_value(encoded) == value


def test_offset_commit_value_with_expire_timestamp_is_v1() -> None:
    value = OffsetCommitValue(offset=5, metadata="", commit_timestamp=10, expire_timestamp=99)
    encoded = encode_offset_commit_value(value)
    assert encoded == i16(1) + i64(5) + s("") + i64(10) + i64(99)
    assert decode_offset_commit_value(encoded) == value


def test_offset_commit_value_v0_v2_and_v4_layouts() -> None:
    v0 = i16(0) + i64(1) + s("meta") + i64(2)
    assert decode_offset_commit_value(v0) == OffsetCommitValue(1, "meta", 2)
    v2 = i16(2) + i64(1) + s("meta") + i64(2)
    assert decode_offset_commit_value(v2) == OffsetCommitValue(1, "meta", 2)
    # v4: flexible, compact string (length + 1 as an unsigned varint), then no tagged fields.
    v4 = i16(4) + i64(1) + i32(3) + b"\x05meta" + i64(2) + b"\x00"
    assert decode_offset_commit_value(v4) == OffsetCommitValue(1, "meta", 2, leader_epoch=3)
    assert encode_offset_commit_value(OffsetCommitValue(1, "meta", 2, 3), version=4) == v4


def test_offset_commit_value_v4_skips_unknown_tagged_fields() -> None:
    v4 = i16(4) + i64(1) + i32(-1) + b"\x01" + i64(2) + b"\x01" + b"\x05\x02ab"
    assert decode_offset_commit_value(v4) == OffsetCommitValue(1, "", 2)


def _member_v3() -> bytes:
    return (
        s("m1")
        + i16(-1)  # group instance id: null
        + s("c1")
        + s("/10.0.0.1")
        + i32(60_000)  # rebalance timeout
        + i32(10_000)  # session timeout
        + i32(2)
        + b"ab"  # subscription
        + i32(1)
        + b"x"  # assignment
    )


def test_group_metadata_value_v3_is_the_default() -> None:
    value = GroupMetadataValue(
        protocol_type="consumer",
        generation=5,
        protocol="range",
        leader="m1",
        current_state_timestamp=1234,
        members=(
            MemberMetadataValue(
                member_id="m1",
                client_id="c1",
                client_host="/10.0.0.1",
                session_timeout=10_000,
                subscription=b"ab",
                assignment=b"x",
                rebalance_timeout=60_000,
                group_instance_id=None,
            ),
        ),
    )
    expected = (
        i16(3) + s("consumer") + i32(5) + s("range") + s("m1") + i64(1234) + i32(1) + _member_v3()
    )
    assert encode_group_metadata_value(value) == expected
    assert decode_group_metadata_value(expected) == value


def test_empty_group_metadata_value_has_null_protocol_and_leader() -> None:
    value = GroupMetadataValue("consumer", 3, None, None, 99, ())
    assert encode_group_metadata_value(value) == (
        i16(3) + s("consumer") + i32(3) + i16(-1) + i16(-1) + i64(99) + i32(0)
    )


def test_group_metadata_value_v0_v1_v2_layouts() -> None:
    v0_member = s("m") + s("c") + s("h") + i32(7) + i32(1) + b"s" + i32(1) + b"a"
    v0 = i16(0) + s("consumer") + i32(1) + s("range") + s("m") + i32(1) + v0_member
    got = decode_group_metadata_value(v0)
    assert got.current_state_timestamp == -1
    assert got.members[0] == MemberMetadataValue("m", "c", "h", 7, b"s", b"a", -1, None)

    v1_member = s("m") + s("c") + s("h") + i32(9) + i32(7) + i32(1) + b"s" + i32(1) + b"a"
    v1 = i16(1) + s("consumer") + i32(1) + s("range") + s("m") + i32(1) + v1_member
    assert decode_group_metadata_value(v1).members[0].rebalance_timeout == 9

    v2 = i16(2) + s("consumer") + i32(1) + s("range") + s("m") + i64(55) + i32(1) + v1_member
    got2 = decode_group_metadata_value(v2)
    assert got2.current_state_timestamp == 55
    assert got2.members[0].rebalance_timeout == 9


def test_group_metadata_value_v4_is_compact() -> None:
    member = (
        b"\x02m"  # member id
        + b"\x03i1"  # group instance id
        + b"\x02c"
        + b"\x02h"
        + i32(9)
        + i32(7)
        + b"\x02s"  # compact bytes
        + b"\x02a"
        + b"\x00"  # member tagged fields
    )
    v4 = i16(4) + b"\x09consumer" + i32(1) + b"\x06range" + b"\x02m" + i64(5) + b"\x02" + member
    v4 += b"\x00"
    value = decode_group_metadata_value(v4)
    assert value == GroupMetadataValue(
        "consumer",
        1,
        "range",
        "m",
        5,
        (MemberMetadataValue("m", "c", "h", 7, b"s", b"a", 9, "i1"),),
    )
    assert encode_group_metadata_value(value, version=4) == v4


@pytest.mark.parametrize(
    "data",
    [b"", b"\x00", i16(3) + i64(1), i16(9) + i64(1), i16(3) + i64(1) + i32(0) + i16(-1) + i64(0)],
)
def test_garbage_offset_values_raise_record_format_error(data: bytes) -> None:
    with pytest.raises(RecordFormatError):
        decode_offset_commit_value(data)


def test_garbage_keys_raise_record_format_error() -> None:
    with pytest.raises(RecordFormatError):
        decode_key(b"\x00")
    with pytest.raises(RecordFormatError):
        decode_key(i16(1) + i16(5) + b"ab")


# ---------------------------------------------------------------- round trips

text = st.text(max_size=40)
i32s = st.integers(-(2**31), 2**31 - 1)
i64s = st.integers(-(2**63), 2**63 - 1)
blobs = st.binary(max_size=64)


@given(group=text, topic=text, partition=i32s, version=st.sampled_from([0, 1]))
def test_offset_commit_key_round_trip(group: str, topic: str, partition: int, version: int) -> None:
    key = OffsetCommitKey(group, topic, partition)
    assert decode_key(encode_offset_commit_key(key, version)) == key


@given(group=text)
def test_group_metadata_key_round_trip(group: str) -> None:
    assert decode_key(encode_group_metadata_key(GroupMetadataKey(group))) == GroupMetadataKey(group)


@given(
    version=st.integers(0, 4),
    offset=i64s,
    metadata=text,
    commit_ts=i64s,
    leader_epoch=i32s,
    expire_ts=i64s,
)
def test_offset_commit_value_round_trip(
    version: int, offset: int, metadata: str, commit_ts: int, leader_epoch: int, expire_ts: int
) -> None:
    value = OffsetCommitValue(
        offset=offset,
        metadata=metadata,
        commit_timestamp=commit_ts,
        leader_epoch=leader_epoch if version >= 3 else -1,
        expire_timestamp=expire_ts if version == 1 else -1,
    )
    assert decode_offset_commit_value(encode_offset_commit_value(value, version)) == value


@st.composite
def group_values(draw: st.DrawFn) -> tuple[int, GroupMetadataValue]:
    version = draw(st.integers(0, 4))
    members = tuple(
        MemberMetadataValue(
            member_id=draw(text),
            client_id=draw(text),
            client_host=draw(text),
            session_timeout=draw(i32s),
            subscription=draw(blobs),
            assignment=draw(blobs),
            rebalance_timeout=draw(i32s) if version >= 1 else -1,
            group_instance_id=draw(st.none() | text) if version >= 3 else None,
        )
        for _ in range(draw(st.integers(0, 4)))
    )
    value = GroupMetadataValue(
        protocol_type=draw(text),
        generation=draw(i32s),
        protocol=draw(st.none() | text),
        leader=draw(st.none() | text),
        current_state_timestamp=draw(i64s) if version >= 2 else -1,
        members=members,
    )
    return version, value


@given(group_values())
def test_group_metadata_value_round_trip(case: tuple[int, GroupMetadataValue]) -> None:
    version, value = case
    assert decode_group_metadata_value(encode_group_metadata_value(value, version)) == value


@given(st.binary(max_size=80))
def test_decoders_never_raise_anything_but_record_format_error(data: bytes) -> None:
    for decode in (decode_key, decode_offset_commit_value, decode_group_metadata_value):
        with contextlib.suppress(RecordFormatError):
            decode(data)


# ---------------------------------------------------------------- partitionFor


@pytest.mark.parametrize(
    ("text_", "hashcode"),
    [
        ("", 0),
        ("hello", 99162322),
        ("Aa", 2112),
        ("BB", 2112),
        ("Hello World", -862545276),
        ("polygenelubricants", -(2**31)),
        ("\U0001f600", 31 * 0xD83D + 0xDE00),  # one code point, two UTF-16 code units
    ],
)
def test_java_string_hashcode(text_: str, hashcode: int) -> None:
    assert java_string_hashcode(text_) == hashcode


def test_partition_for_uses_kafkas_utils_abs() -> None:
    # Utils.abs(Integer.MIN_VALUE) is 0 (n & 0x7fffffff), where Math.abs would stay negative.
    assert partition_for("polygenelubricants", 50) == 0
    assert partition_for("Hello World", 50) == (-862545276 & 0x7FFFFFFF) % 50 == 22
    assert partition_for("hello", 50) == 99162322 % 50


def test_utf16_length_counts_code_units_like_java() -> None:
    assert utf16_length("abc") == 3
    assert utf16_length("\U0001f600") == 2
    assert utf16_length("é") == 1
