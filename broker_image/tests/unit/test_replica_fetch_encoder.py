"""The followers' hand-written Fetch v12 request encoder writes exactly kio's bytes, and the
broker's own request reader decodes them back."""

from __future__ import annotations

import io

from hypothesis import given, settings
from hypothesis import strategies as st
from kio.serial import entity_writer

from samsa.protocol.messages import (
    build,
    decode_request,
    encode_request,
    parse_request_header,
    request_type,
)
from samsa.protocol.replica_fetch import VERSION, encode_replica_fetch

_i32 = st.integers(-(2**31), 2**31 - 1)
_i64 = st.integers(-(2**63), 2**63 - 1)
_partition = st.tuples(_i32, _i32, _i64, _i32, _i64, _i32)
_topics = st.dictionaries(
    st.text(min_size=1, max_size=200), st.lists(_partition, max_size=5), max_size=4
)


_forgotten = st.dictionaries(
    st.text(min_size=1, max_size=50), st.lists(_i32, max_size=5), max_size=3
)
_session = st.tuples(_i32, _i32)


def _kio(
    replica_id: int,
    wait: int,
    min_bytes: int,
    max_bytes: int,
    topics: dict,
    session: tuple[int, int] = (0, -1),
    forgotten: dict | None = None,
) -> bytes:
    cls = request_type(1, VERSION)
    body = build(
        cls,
        {
            "replica_id": replica_id,
            "max_wait": wait,
            "min_bytes": min_bytes,
            "max_bytes": max_bytes,
            "isolation_level": 0,
            "session_id": session[0],
            "session_epoch": session[1],
            "topics": [
                {
                    "topic": name,
                    "partitions": [
                        dict(
                            zip(
                                (
                                    "partition",
                                    "current_leader_epoch",
                                    "fetch_offset",
                                    "last_fetched_epoch",
                                    "log_start_offset",
                                    "partition_max_bytes",
                                ),
                                p,
                                strict=True,
                            )
                        )
                        for p in ps
                    ],
                }
                for name, ps in topics.items()
            ],
            "forgotten_topics_data": [
                {"topic": name, "partitions": numbers}
                for name, numbers in (forgotten or {}).items()
            ],
            "rack_id": "",
        },
    )
    out = io.BytesIO()
    entity_writer(cls)(out, body)
    return out.getvalue()


@settings(max_examples=200, deadline=None)
@given(_i32, st.integers(0, 2**31 - 1), _i32, _i32, _topics)
def test_same_bytes_as_kio(
    replica_id: int, wait: int, min_b: int, max_b: int, topics: dict
) -> None:
    ours = encode_replica_fetch(replica_id, wait, min_b, max_b, topics.items())
    assert ours == _kio(replica_id, wait, min_b, max_b, topics)


@settings(max_examples=200, deadline=None)
@given(_i32, _topics, _session, _forgotten)
def test_same_bytes_as_kio_in_a_session(
    replica_id: int, topics: dict, session: tuple[int, int], forgotten: dict
) -> None:
    ours = encode_replica_fetch(
        replica_id, 500, 1, 1 << 20, topics.items(), *session, forgotten.items()
    )
    assert ours == _kio(replica_id, 500, 1, 1 << 20, topics, session, forgotten)


def test_the_broker_reads_it_back() -> None:
    body = encode_replica_fetch(2, 500, 1, 10 << 20, [("t", [(3, 7, 1000, 6, 10, 1 << 20)])])
    frame = encode_request(1, VERSION, 99, "broker-2-fetcher", body)
    header = parse_request_header(frame[4:], True)
    assert (header.api_key, header.correlation_id) == (1, 99)
    request = decode_request(1, VERSION, frame[4:], header.size)
    assert request.replica_id == 2
    p = request.topics[0].partitions[0]
    assert (request.topics[0].topic, p.partition, p.fetch_offset, p.last_fetched_epoch) == (
        "t",
        3,
        1000,
        6,
    )
