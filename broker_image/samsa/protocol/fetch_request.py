"""The followers' Fetch request (v12) read by hand, the replication hot path; kio otherwise.

Every follower sends one per round trip, and kio's reader with the malformed-input walk in
front of it (samsa.protocol.bounds) was a few per cent of a replicating broker's CPU. This
reads exactly what a follower sends (samsa.protocol.replica_fetch writes it): no fetch
session data it would not send, no forgotten topics, no tagged fields, a rack id. Anything
else, malformed or merely unusual, goes to kio's reader, so a request that reads here reads
the same there, and malformed ones still end as InvalidRequestError.
"""

from __future__ import annotations

import datetime
import functools
from dataclasses import dataclass, field
from struct import Struct
from typing import Any

from samsa.protocol.bounds import read_uvarint
from samsa.protocol.messages import decode_request

KEY = 1
VERSION = 12

# replica_id, max_wait_ms, min_bytes, max_bytes, isolation_level, session_id, session_epoch
_TOP = Struct(">iiiibii")
# partition, current_leader_epoch, fetch_offset, last_fetched_epoch, log_start_offset,
# partition_max_bytes, tagged fields (one byte: none)
_PARTITION = Struct(">iiqiqiB")


@dataclass(slots=True)
class FetchPartition:
    partition: int
    current_leader_epoch: int
    fetch_offset: int
    last_fetched_epoch: int
    log_start_offset: int
    partition_max_bytes: int


@dataclass(slots=True)
class FetchTopic:
    topic: str
    partitions: list[FetchPartition]


@dataclass(slots=True)
class FetchRequest:
    """The fields of kio's FetchRequest v12 a follower sets (cluster_id, tagged, is None)."""

    replica_id: int
    max_wait: datetime.timedelta
    min_bytes: int
    max_bytes: int
    isolation_level: int
    session_id: int
    session_epoch: int
    topics: list[FetchTopic]
    rack_id: str
    forgotten_topics_data: tuple[Any, ...] = field(default=())
    cluster_id: str | None = None


def parse_fetch_request(version: int, frame: bytes | memoryview, offset: int) -> Any:
    """The request body: a follower's v12 read here, anything else by kio."""
    if version == VERSION:
        try:
            request = _follower_fetch(frame, offset)
        except Exception:  # malformed: kio's reader says how, or reads what this does not
            request = None
        if request is not None:
            return request
    return decode_request(KEY, version, frame, offset)


@functools.lru_cache(maxsize=16)
def _max_wait(ms: int) -> datetime.timedelta:
    """Followers send the same max wait every time: one timedelta for it, not one a request."""
    return datetime.timedelta(milliseconds=ms)


def _uvarint(buf: Any, pos: int) -> tuple[int, int]:
    byte = buf[pos]
    if byte < 0x80:
        return byte, pos + 1
    return read_uvarint(buf, pos)


def _string(buf: Any, pos: int) -> tuple[str | None, int]:
    """A compact string that is not null, or None (then the caller gives up)."""
    n, pos = _uvarint(buf, pos)
    end = pos + n - 1
    if n == 0 or end > len(buf):
        return None, pos
    return str(buf[pos:end], "utf-8"), end


def _follower_fetch(buf: bytes | memoryview, pos: int) -> FetchRequest | None:
    """The request if it has exactly a follower's shape; None for anything else."""
    top = _TOP.unpack_from(buf, pos)
    pos += _TOP.size
    count, pos = _uvarint(buf, pos)
    if count == 0:
        return None  # null topics
    unpack, size = _PARTITION.unpack_from, _PARTITION.size
    topics = []
    for _ in range(count - 1):
        name, pos = _string(buf, pos)
        if name is None:
            return None
        count, pos = _uvarint(buf, pos)
        # Bounded by the bytes present before anything is built from the count.
        if count == 0 or pos + (count - 1) * size > len(buf):
            return None
        partitions = []
        for _ in range(count - 1):
            p, leader_epoch, fetch_offset, last_epoch, start, max_bytes, tags = unpack(buf, pos)
            if tags:
                return None
            partitions.append(
                FetchPartition(p, leader_epoch, fetch_offset, last_epoch, start, max_bytes)
            )
            pos += size
        if buf[pos] != 0:
            return None  # tagged fields
        pos += 1
        topics.append(FetchTopic(name, partitions))
    if buf[pos] != 1:
        return None  # forgotten topics (or null)
    rack_id, pos = _string(buf, pos + 1)
    if rack_id is None or buf[pos] != 0:
        return None  # trailing bytes after the tagged fields are ignored, as kio does
    replica_id, max_wait_ms, min_bytes, max_bytes, isolation, session_id, session_epoch = top
    return FetchRequest(
        replica_id,
        _max_wait(max_wait_ms),
        min_bytes,
        max_bytes,
        isolation,
        session_id,
        session_epoch,
        topics,
        rack_id,
    )
