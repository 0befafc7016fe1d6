"""The hand-written ProduceRequest reader agrees with kio on every version it serves."""

from __future__ import annotations

import dataclasses
import datetime
import io
import typing

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kio.index import load_request_schema
from kio.serial import entity_writer

from samsa.protocol.messages import InvalidRequestError
from samsa.protocol.produce_request import parse_produce_request

VERSIONS = range(3, 13)


def _nested(cls: type, field: str) -> type:
    hint = typing.get_type_hints(cls)[field]
    return typing.get_args(hint)[0]  # type: ignore[no-any-return]


def _encode(version: int, txn: str | None, acks: int, timeout_ms: int, topics: list) -> bytes:
    req_cls = load_request_schema(0, version)
    topic_cls = _nested(req_cls, "topic_data")
    part_cls = _nested(topic_cls, "partition_data")
    obj = req_cls(
        transactional_id=txn,
        acks=acks,
        timeout=datetime.timedelta(milliseconds=timeout_ms),
        topic_data=tuple(
            topic_cls(
                name=name,
                partition_data=tuple(part_cls(index=i, records=rec) for i, rec in parts),
            )
            for name, parts in topics
        ),
    )
    out = io.BytesIO()
    entity_writer(req_cls)(out, obj)
    return out.getvalue()


topics_strategy = st.lists(
    st.tuples(
        st.text(min_size=1, max_size=20),
        st.lists(
            st.tuples(
                st.integers(0, 2**31 - 1),
                st.one_of(st.none(), st.binary(max_size=300)),
            ),
            max_size=4,
        ),
    ),
    max_size=4,
)


@settings(max_examples=60, deadline=None)
@given(
    version=st.sampled_from(list(VERSIONS)),
    txn=st.one_of(st.none(), st.text(max_size=10)),
    acks=st.sampled_from([-1, 0, 1]),
    timeout_ms=st.integers(0, 2**31 - 1),
    topics=topics_strategy,
)
def test_matches_kio(version: int, txn: str | None, acks: int, timeout_ms: int, topics: list):
    data = _encode(version, txn, acks, timeout_ms, topics)
    parsed = parse_produce_request(version, memoryview(data), 0)
    assert parsed.transactional_id == txn
    assert parsed.acks == acks
    assert parsed.timeout == datetime.timedelta(milliseconds=timeout_ms)
    got = [
        (
            t.name,
            [(p.index, None if p.records is None else bytes(p.records)) for p in t.partition_data],
        )
        for t in parsed.topic_data
    ]
    assert got == [(name, list(parts)) for name, parts in topics]
    assert all(
        isinstance(p.records, memoryview)
        for t in parsed.topic_data
        for p in t.partition_data
        if p.records is not None
    )


@pytest.mark.parametrize("version", [3, 9])
def test_truncated_requests_are_refused_and_trailing_bytes_ignored(version: int) -> None:
    data = _encode(version, None, 1, 1000, [("t", [(0, b"x" * 100)])])
    for cut in range(len(data)):
        with pytest.raises(InvalidRequestError):
            parse_produce_request(version, memoryview(data[:cut]), 0)
    parsed = parse_produce_request(version, memoryview(data + b"\0\0"), 0)
    assert bytes(parsed.topic_data[0].partition_data[0].records or b"") == b"x" * 100


def test_huge_counts_are_refused_without_allocating() -> None:
    data = _encode(3, None, 1, 1000, [])
    lying = data[:-4] + (2**31 - 1).to_bytes(4, "big")
    with pytest.raises(InvalidRequestError):
        parse_produce_request(3, memoryview(lying), 0)


def test_kio_field_names_match() -> None:
    # The handler reads these attributes; they must keep kio's names.
    names = {f.name for f in dataclasses.fields(load_request_schema(0, 9))}
    assert {"transactional_id", "acks", "timeout", "topic_data"} <= names
