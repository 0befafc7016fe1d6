"""The hand-written reader of the followers' Fetch v12 request reads what kio reads, and
leaves anything of another shape (or malformed) to kio's reader."""

from __future__ import annotations

import datetime
import struct
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from samsa.protocol.fetch_request import FetchRequest, parse_fetch_request
from samsa.protocol.messages import InvalidRequestError, decode_request
from samsa.protocol.replica_fetch import VERSION, encode_replica_fetch

_i32 = st.integers(-(2**31), 2**31 - 1)
_i64 = st.integers(-(2**63), 2**63 - 1)
_partition = st.tuples(_i32, _i32, _i64, _i32, _i64, _i32)
_topics = st.dictionaries(
    st.text(min_size=1, max_size=200), st.lists(_partition, max_size=5), max_size=4
)


def _fields(r: Any) -> tuple[Any, ...]:
    """What the Fetch handler reads of a request, as plain values."""
    return (
        r.replica_id,
        r.max_wait,
        r.min_bytes,
        r.max_bytes,
        r.isolation_level,
        r.session_id,
        r.session_epoch,
        r.rack_id,
        tuple(r.forgotten_topics_data),
        r.cluster_id,
        [
            (
                t.topic,
                [
                    (
                        p.partition,
                        p.current_leader_epoch,
                        p.fetch_offset,
                        p.last_fetched_epoch,
                        p.log_start_offset,
                        p.partition_max_bytes,
                    )
                    for p in t.partitions
                ],
            )
            for t in r.topics
        ],
    )


@settings(max_examples=200, deadline=None)
@given(_i32, _i32, _i32, _i32, _topics, st.binary(max_size=3))
def test_a_followers_request_reads_as_kio_reads_it(
    replica_id: int,
    wait: int,
    min_bytes: int,
    max_bytes: int,
    topics: dict[str, list[Any]],
    trailing: bytes,
) -> None:
    body = encode_replica_fetch(replica_id, wait, min_bytes, max_bytes, topics.items())
    frame = b"\x07" * 5 + body + trailing  # an offset into the frame, as after a header
    ours = parse_fetch_request(VERSION, memoryview(frame), 5)
    assert isinstance(ours, FetchRequest)
    assert ours.max_wait == datetime.timedelta(milliseconds=wait)
    assert _fields(ours) == _fields(decode_request(1, VERSION, frame, 5))


def test_a_request_of_another_shape_is_read_by_kio() -> None:
    body = encode_replica_fetch(1, 500, 1, 1 << 20, [("t", [(0, 3, 10, 2, 0, 1 << 20)])])
    # The same request with one forgotten topic ("f", partition 7) instead of none.
    tail = len(body) - 3  # forgotten topics, rack id, tagged fields: one byte each
    forgotten = bytes([2, 2]) + b"f" + bytes([2]) + struct.pack(">i", 7) + b"\0"
    other = body[:tail] + forgotten + body[tail + 1 :]
    read = parse_fetch_request(VERSION, other, 0)
    assert not isinstance(read, FetchRequest)
    assert [(t.topic, list(t.partitions)) for t in read.forgotten_topics_data] == [("f", [7])]
    assert _fields(read)[10] == [("t", [(0, 3, 10, 2, 0, 1 << 20)])]


@pytest.mark.parametrize(
    "cut",
    [
        pytest.param(lambda b: b[:20], id="truncated header"),
        pytest.param(lambda b: b[:-4], id="truncated partition"),
        pytest.param(lambda b: b[:25] + b"\xff\xff\xff\xff\x0f" + b[26:], id="topic count lies"),
        pytest.param(lambda b: b[:28] + b"\xff\xff\xff\x0f" + b[29:], id="partition count lies"),
        pytest.param(lambda b: b[:27] + b"\xff" + b[28:], id="topic name is not UTF-8"),
    ],
)
def test_a_malformed_request_is_refused_as_kio_refuses_it(cut: Callable[[bytes], bytes]) -> None:
    body = encode_replica_fetch(1, 500, 1, 1 << 20, [("t", [(0, 3, 10, 2, 0, 1 << 20)])])
    with pytest.raises(InvalidRequestError):
        parse_fetch_request(VERSION, cut(body), 0)
