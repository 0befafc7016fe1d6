"""FetchRequest v4-v18 read by hand: the request of every consumer's and follower's round
trip. kio's reader needed a walk of the whole body first (`check_lengths`, so that no count
it reserves for is a lie) and built a dataclass per partition; this reads once, into slotted
objects holding what the handler uses. Malformed bytes raise InvalidRequestError."""

from __future__ import annotations

import datetime
import uuid
from dataclasses import dataclass

from samsa.protocol.bounds import InvalidRequestError
from samsa.protocol.hand_reader import Reader

FIRST_FLEXIBLE = 12
FIRST_TOPIC_ID = 13
FIRST_REPLICA_STATE = 15  # the replica id moved into a tagged field
REPLICA_STATE_TAG = 1


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
    topic: str | None  # to v12
    topic_id: uuid.UUID | None  # from v13
    partitions: list[FetchPartition]


@dataclass(slots=True)
class ForgottenTopic:
    topic: str | None
    topic_id: uuid.UUID | None
    partitions: list[int]


@dataclass(slots=True)
class FetchRequest:
    replica_id: int  # -1 for a consumer
    max_wait: datetime.timedelta
    min_bytes: int
    max_bytes: int
    isolation_level: int
    session_id: int
    session_epoch: int
    topics: list[FetchTopic]
    forgotten_topics_data: list[ForgottenTopic]
    rack_id: str


def parse_fetch_request(version: int, frame: bytes | memoryview, offset: int) -> FetchRequest:
    view = frame if isinstance(frame, memoryview) else memoryview(frame)
    r = Reader(view, offset, version >= FIRST_FLEXIBLE, "FetchRequest")
    replica_id = r.int32() if version < FIRST_REPLICA_STATE else -1
    max_wait_ms = r.int32()
    min_bytes = r.int32()
    max_bytes = r.int32()
    isolation_level = r.int8()
    session_id, session_epoch = (r.int32(), r.int32()) if version >= 7 else (0, -1)
    by_id = version >= FIRST_TOPIC_ID
    topics = []
    for _ in range(r.count()):
        name, topic_id = _topic(r, by_id)
        partitions = []
        for _ in range(r.count()):
            partition = r.int32()
            current_leader_epoch = r.int32() if version >= 9 else -1
            fetch_offset = r.int64()
            last_fetched_epoch = r.int32() if version >= 12 else -1
            log_start_offset = r.int64() if version >= 5 else -1
            partitions.append(
                FetchPartition(
                    partition,
                    current_leader_epoch,
                    fetch_offset,
                    last_fetched_epoch,
                    log_start_offset,
                    r.int32(),
                )
            )
            r.tags()
        topics.append(FetchTopic(name, topic_id, partitions))
        r.tags()
    forgotten = []
    if version >= 7:
        for _ in range(r.count()):
            name, topic_id = _topic(r, by_id)
            forgotten.append(ForgottenTopic(name, topic_id, [r.int32() for _ in range(r.count())]))
            r.tags()
    rack_id = (r.string() or "") if version >= 11 else ""
    if version >= FIRST_FLEXIBLE:
        state = r.tagged().get(REPLICA_STATE_TAG)
        if state is not None and version >= FIRST_REPLICA_STATE:
            # ReplicaState: replica id, replica epoch, its own tagged fields.
            replica_id = Reader(state, 0, True, "FetchRequest's ReplicaState").int32()
    # Trailing bytes are ignored, as Kafka ignores them.
    return FetchRequest(
        replica_id,
        datetime.timedelta(milliseconds=max_wait_ms),
        min_bytes,
        max_bytes,
        isolation_level,
        session_id,
        session_epoch,
        topics,
        forgotten,
        rack_id,
    )


def _topic(r: Reader, by_id: bool) -> tuple[str | None, uuid.UUID | None]:
    if by_id:
        return None, r.uuid()
    name = r.string()
    if name is None:
        raise InvalidRequestError("null topic name")
    return name, None
