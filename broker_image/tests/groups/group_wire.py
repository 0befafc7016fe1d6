"""A consumer-group member speaking the group APIs itself, over one raw connection: for the
requests a client library would never send wrong on purpose.  Kio encodes the requests."""

from __future__ import annotations

import datetime
import struct
from collections.abc import Sequence
from typing import Any

from groups_support import SESSION_TIMEOUT_MS
from kafka_support import Wire
from kio.index import load_request_schema

# Kafka error codes the group tests look for.
NONE = 0
UNKNOWN_TOPIC_OR_PARTITION = 3
OFFSET_METADATA_TOO_LARGE = 12
ILLEGAL_GENERATION = 22
INCONSISTENT_GROUP_PROTOCOL = 23
INVALID_GROUP_ID = 24
UNKNOWN_MEMBER_ID = 25
INVALID_SESSION_TIMEOUT = 26
REBALANCE_IN_PROGRESS = 27
MEMBER_ID_REQUIRED = 79
GROUP_MAX_SIZE_REACHED = 81
FENCED_INSTANCE_ID = 82


def subscription(*topics: str, user_data: bytes | None = None) -> bytes:
    """ConsumerProtocolSubscription v0: the JoinGroup metadata of a consumer."""
    out = struct.pack(">hi", 0, len(topics))
    for t in topics:
        out += struct.pack(">h", len(t)) + t.encode()
    if user_data is None:
        return out + struct.pack(">i", -1)
    return out + struct.pack(">i", len(user_data)) + user_data


def assignment(topic: str, partitions: Sequence[int]) -> bytes:
    """ConsumerProtocolAssignment v0: one topic's partitions for a member."""
    out = struct.pack(">hi", 0, 1) + struct.pack(">h", len(topic)) + topic.encode()
    out += struct.pack(">i", len(partitions)) + b"".join(struct.pack(">i", p) for p in partitions)
    return out + struct.pack(">i", -1)


def _schema(api_key: int, version: int, *names: str) -> tuple[Any, ...]:
    cls = load_request_schema(api_key, version)
    module = __import__(cls.__module__, fromlist=list(names))
    return (cls, *(getattr(module, n) for n in names))


class RawMember:
    """One member of a group speaking the group APIs over its own connection: JoinGroup v5,
    SyncGroup v3, Heartbeat v3, LeaveGroup v3, OffsetCommit v8 and OffsetFetch v7.

    Each call returns the Kafka error code(s), as a client would see them."""

    JOIN, SYNC, HEARTBEAT, LEAVE, COMMIT, FETCH = 11, 14, 12, 13, 8, 9

    def __init__(self, port: int, group: str, topic: str, instance: str | None = None) -> None:
        self.wire = Wire(port, timeout=30)
        self.group = group
        self.topic = topic
        self.instance = instance
        self.member_id = ""
        self.generation = -1
        self.leader = ""
        self.members: list[str] = []
        self._pending: int | None = None

    def close(self) -> None:
        self.wire.close()

    # JoinGroup blocks until the rebalance completes, so it is sent and read apart.
    def send_join(
        self,
        session_timeout_ms: int = SESSION_TIMEOUT_MS,
        protocol_type: str = "consumer",
        protocols: Sequence[tuple[str, bytes]] | None = None,
    ) -> None:
        cls, protocol = _schema(self.JOIN, 5, "JoinGroupRequestProtocol")
        body = cls(
            group_id=self.group,
            session_timeout=datetime.timedelta(milliseconds=session_timeout_ms),
            rebalance_timeout=datetime.timedelta(milliseconds=10_000),
            member_id=self.member_id,
            group_instance_id=self.instance,
            protocol_type=protocol_type,
            protocols=tuple(
                protocol(name=n, metadata=m)
                for n, m in (protocols or [("range", subscription(self.topic))])
            ),
        )
        self._pending = self.wire.send_request(self.JOIN, 5, body)

    def read_join(self) -> int:
        assert self._pending is not None
        response = self.wire.read_response(self.JOIN, 5, self._pending)
        self._pending = None
        error = int(response.error_code.value)
        if response.member_id:
            self.member_id = response.member_id
        if error == NONE:
            self.generation = response.generation_id
            self.leader = response.leader
            self.members = [m.member_id for m in response.members]
        return error

    def join(self, **options: Any) -> int:
        """JoinGroup, answering MEMBER_ID_REQUIRED with the given id as clients do."""
        self.send_join(**options)
        error = self.read_join()
        if error == MEMBER_ID_REQUIRED:
            self.send_join(**options)
            error = self.read_join()
        return error

    def sync(
        self, assignments: dict[str, bytes] | None = None, generation: int | None = None
    ) -> int:
        cls, entry = _schema(self.SYNC, 3, "SyncGroupRequestAssignment")
        body = cls(
            group_id=self.group,
            generation_id=self.generation if generation is None else generation,
            member_id=self.member_id,
            group_instance_id=self.instance,
            assignments=tuple(
                entry(member_id=m, assignment=a) for m, a in (assignments or {}).items()
            ),
        )
        return int(self.wire.request(self.SYNC, 3, body).error_code.value)

    def join_alone(self, partitions: Sequence[int] = (0,)) -> None:
        """Join, lead, assign itself every partition: a stable group of one."""
        assert self.join() == NONE
        assert self.leader == self.member_id
        assert self.sync({self.member_id: assignment(self.topic, partitions)}) == NONE

    def heartbeat(self, generation: int | None = None) -> int:
        (cls,) = _schema(self.HEARTBEAT, 3)
        body = cls(
            group_id=self.group,
            generation_id=self.generation if generation is None else generation,
            member_id=self.member_id,
            group_instance_id=self.instance,
        )
        return int(self.wire.request(self.HEARTBEAT, 3, body).error_code.value)

    def leave(self) -> tuple[int, list[int]]:
        """(top-level error, per-member errors)."""
        cls, identity = _schema(self.LEAVE, 3, "MemberIdentity")
        body = cls(
            group_id=self.group,
            members=(identity(member_id=self.member_id, group_instance_id=self.instance),),
        )
        response = self.wire.request(self.LEAVE, 3, body)
        return int(response.error_code.value), [int(m.error_code.value) for m in response.members]

    def commit(
        self,
        offsets: dict[tuple[str, int], int],
        generation: int | None = None,
        member_id: str | None = None,
        metadata: str = "",
    ) -> dict[tuple[str, int], int]:
        """OffsetCommit as this member (generation and member id overridable); errors by
        (topic, partition)."""
        cls, topic_cls, partition_cls = _schema(
            self.COMMIT, 8, "OffsetCommitRequestTopic", "OffsetCommitRequestPartition"
        )
        by_topic: dict[str, list[tuple[int, int]]] = {}
        for (t, p), o in offsets.items():
            by_topic.setdefault(t, []).append((p, o))
        body = cls(
            group_id=self.group,
            generation_id_or_member_epoch=self.generation if generation is None else generation,
            member_id=self.member_id if member_id is None else member_id,
            group_instance_id=self.instance,
            topics=tuple(
                topic_cls(
                    name=t,
                    partitions=tuple(
                        partition_cls(
                            partition_index=p,
                            committed_offset=o,
                            committed_leader_epoch=-1,
                            committed_metadata=metadata,
                        )
                        for p, o in parts
                    ),
                )
                for t, parts in by_topic.items()
            ),
        )
        response = self.wire.request(self.COMMIT, 8, body)
        return {
            (t.name, p.partition_index): int(p.error_code.value)
            for t in response.topics
            for p in t.partitions
        }

    def fetch(self, group: str | None = None) -> tuple[int, dict[tuple[str, int], int]]:
        """OffsetFetch of every committed partition: (error, offsets by (topic, partition))."""
        (cls,) = _schema(self.FETCH, 7)
        body = cls(
            group_id=self.group if group is None else group, topics=None, require_stable=False
        )
        response = self.wire.request(self.FETCH, 7, body)
        return int(response.error_code.value), {
            (t.name, p.partition_index): p.committed_offset
            for t in response.topics
            for p in t.partitions
        }
