"""The hand-written FetchRequest reader agrees with kio on every version the broker serves,
and refuses what is short or lies about its counts."""

from __future__ import annotations

import dataclasses
import datetime
import io
import typing
import uuid
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kio.index import load_request_schema
from kio.serial import entity_writer

from samsa.protocol.fetch_request import parse_fetch_request
from samsa.protocol.messages import InvalidRequestError, decode_request

VERSIONS = range(4, 19)


def _nested(cls: type, field: str) -> type:
    hint = typing.get_type_hints(cls)[field]
    args = typing.get_args(hint)
    return args[0] if args else hint  # type: ignore[no-any-return]


def _build(cls: type, **values: Any) -> Any:
    """An instance of kio's class for one version, from the fields that version has."""
    names = {f.name for f in dataclasses.fields(cls)}
    return cls(**{k: v for k, v in values.items() if k in names})


def _encode(version: int, d: dict[str, Any]) -> bytes:
    req = load_request_schema(1, version)
    topic_cls = _nested(req, "topics")
    part_cls = _nested(topic_cls, "partitions")
    values: dict[str, Any] = dict(d["top"])
    if "replica_state" in {f.name for f in dataclasses.fields(req)}:
        state_cls = typing.get_type_hints(req)["replica_state"]
        values["replica_state"] = state_cls(replica_id=d["replica_id"], replica_epoch=7)
    else:
        values["replica_id"] = d["replica_id"]
    values["topics"] = tuple(
        _build(
            topic_cls,
            topic=name,
            topic_id=topic_id,
            partitions=tuple(_build(part_cls, **p) for p in parts),
        )
        for name, topic_id, parts in d["topics"]
    )
    if "forgotten_topics_data" in {f.name for f in dataclasses.fields(req)}:
        forgotten_cls = _nested(req, "forgotten_topics_data")
        values["forgotten_topics_data"] = tuple(
            _build(forgotten_cls, topic=name, topic_id=topic_id, partitions=tuple(parts))
            for name, topic_id, parts in d["forgotten"]
        )
    out = io.BytesIO()
    entity_writer(req)(out, _build(req, **values))
    return out.getvalue()


i32 = st.integers(-(2**31), 2**31 - 1)
i64 = st.integers(-(2**63), 2**63 - 1)
partition = st.fixed_dictionaries(
    {
        "partition": i32,
        "current_leader_epoch": i32,
        "fetch_offset": i64,
        "last_fetched_epoch": i32,
        "log_start_offset": i64,
        "partition_max_bytes": i32,
        "high_watermark": i64,
        "replica_directory_id": st.one_of(st.none(), st.uuids()),
    }
)
topic = st.tuples(st.text(min_size=1, max_size=12), st.uuids(), st.lists(partition, max_size=3))
request = st.fixed_dictionaries(
    {
        "replica_id": st.sampled_from([-1, 0, 3]),
        "top": st.fixed_dictionaries(
            {
                "max_wait": st.integers(0, 2**31 - 1).map(
                    lambda n: datetime.timedelta(milliseconds=n)
                ),
                "min_bytes": i32,
                "max_bytes": i32,
                "isolation_level": st.sampled_from([0, 1]),
                "session_id": i32,
                "session_epoch": i32,
                "rack_id": st.text(max_size=8),
                "cluster_id": st.one_of(st.none(), st.text(max_size=8)),
            }
        ),
        "topics": st.lists(topic, max_size=3),
        "forgotten": st.lists(
            st.tuples(st.text(min_size=1, max_size=8), st.uuids(), st.lists(i32, max_size=3)),
            max_size=2,
        ),
    }
)

TOP = ("max_wait", "min_bytes", "max_bytes", "isolation_level", "session_id", "session_epoch")
PARTITION = (
    "partition",
    "current_leader_epoch",
    "fetch_offset",
    "last_fetched_epoch",
    "log_start_offset",
    "partition_max_bytes",
)


def _kio_view(version: int, kio: Any) -> Any:
    """What the handler reads of kio's object, in the hand reader's terms."""
    state = getattr(kio, "replica_state", None)
    return (
        state.replica_id if state is not None else kio.replica_id,
        # What the handler takes for a field a version lacks (a fetch without a session).
        [getattr(kio, f, {"session_id": 0, "session_epoch": -1}.get(f)) for f in TOP],
        getattr(kio, "rack_id", ""),
        [
            (
                getattr(t, "topic", None),
                getattr(t, "topic_id", None),
                [tuple(getattr(p, f, -1) for f in PARTITION) for p in t.partitions],
            )
            for t in kio.topics
        ],
        [
            (getattr(t, "topic", None), getattr(t, "topic_id", None), list(t.partitions))
            for t in getattr(kio, "forgotten_topics_data", ())
        ],
    )


def _hand_view(parsed: Any) -> Any:
    return (
        parsed.replica_id,
        [getattr(parsed, f) for f in TOP],
        parsed.rack_id,
        [
            (t.topic, t.topic_id, [tuple(getattr(p, f) for f in PARTITION) for p in t.partitions])
            for t in parsed.topics
        ],
        [(t.topic, t.topic_id, t.partitions) for t in parsed.forgotten_topics_data],
    )


@settings(max_examples=150, deadline=None)
@given(version=st.sampled_from(list(VERSIONS)), d=request)
def test_matches_kio(version: int, d: dict[str, Any]) -> None:
    data = _encode(version, d)
    kio = decode_request(1, version, data, 0)
    parsed = parse_fetch_request(version, memoryview(data), 0)
    assert _hand_view(parsed) == _kio_view(version, kio)


@pytest.mark.parametrize("version", [4, 11, 12, 15, 18])
def test_truncated_requests_are_refused_and_trailing_bytes_ignored(version: int) -> None:
    part = {f: 5 for f in PARTITION}
    d = {
        "replica_id": 2,
        "top": {"max_wait": datetime.timedelta(milliseconds=500), "min_bytes": 1},
        "topics": [("t", uuid.UUID(int=1), [part])],
        "forgotten": [("u", uuid.UUID(int=2), [1, 2])],
    }
    d["top"].update(max_bytes=9, isolation_level=1, session_id=3, session_epoch=4, rack_id="r")
    data = _encode(version, d)
    for cut in range(len(data)):
        with pytest.raises(InvalidRequestError):
            parse_fetch_request(version, memoryview(data[:cut]), 0)
    parsed = parse_fetch_request(version, memoryview(data + b"\0\0"), 0)
    assert parsed.topics[0].partitions[0].fetch_offset == 5
    assert parsed.replica_id == 2


def test_huge_counts_are_refused_without_allocating() -> None:
    d = {
        "replica_id": -1,
        "top": {"max_wait": datetime.timedelta(0), "min_bytes": 1, "max_bytes": 1},
        "topics": [],
        "forgotten": [],
    }
    d["top"].update(isolation_level=0, session_id=0, session_epoch=-1, rack_id="")
    data = _encode(11, d)
    # The topics' count sits after the fixed fields (4 + 4 + 4 + 4 + 1 + 4 + 4 bytes).
    lying = data[:25] + (2**31 - 1).to_bytes(4, "big") + data[29:]
    with pytest.raises(InvalidRequestError):
        parse_fetch_request(11, memoryview(lying), 0)
