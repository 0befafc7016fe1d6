"""The records of __consumer_offsets, byte-compatible with Apache Kafka: their formats, and
what a group and its offsets become on the log and come back from it.

Keys start with an int16 that says what the record is (Kafka's "key version"): 0 and 1 are
offset commits (``OffsetCommitKey``), 2 is group metadata (``GroupMetadataKey``). Values start
with their own int16 schema version. Layouts follow Kafka's ``OffsetCommitKey.json``,
``OffsetCommitValue.json`` (v0-4), ``GroupMetadataKey.json`` and ``GroupMetadataValue.json``
(v0-4); version 4 of both values is the flexible (compact, tagged-field) encoding.

We write what Kafka 3.x writes: offset commit keys as version 1, group metadata keys as 2,
``OffsetCommitValue`` v3 (v1 when the commit carries an explicit expire timestamp) and
``GroupMetadataValue`` v3. Every version is read.

The GroupMetadataManager writes and replays only through the record functions at the end
(``offset_commit_record``, ``group_metadata_record``, their tombstones, ``read_record``): they
turn a ``GroupMetadata`` and ``OffsetAndMetadata`` into (key, value) bytes and back, as Kafka's
``GroupMetadataManager`` object does with its ``offsetCommitValue`` and ``readGroupMessageValue``.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from samsa.coordinator.group import GroupMetadata, GroupState
from samsa.coordinator.group_store import Record
from samsa.coordinator.member import MemberMetadata
from samsa.coordinator.offsets import OffsetAndMetadata
from samsa.metadata.model import TopicPartition

OFFSET_COMMIT_KEY_VERSION = 1
GROUP_METADATA_KEY_VERSION = 2
OFFSET_COMMIT_VALUE_VERSION = 3
OFFSET_COMMIT_VALUE_VERSION_WITH_EXPIRY = 1
GROUP_METADATA_VALUE_VERSION = 3
MAX_VALUE_VERSION = 4
FLEXIBLE_VERSION = 4

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


class RecordFormatError(ValueError):
    """Bytes that are not a record of __consumer_offsets we know how to read."""


@dataclass(frozen=True)
class OffsetCommitKey:
    group: str
    topic: str
    partition: int


@dataclass(frozen=True)
class GroupMetadataKey:
    group: str


@dataclass(frozen=True)
class UnknownKey:
    """A key version this broker does not know; Kafka skips these while loading."""

    version: int


@dataclass(frozen=True)
class OffsetCommitValue:
    offset: int
    metadata: str = ""
    commit_timestamp: int = -1
    leader_epoch: int = -1  # v3+
    expire_timestamp: int = -1  # v1 only


@dataclass(frozen=True)
class MemberMetadataValue:
    member_id: str
    client_id: str
    client_host: str
    session_timeout: int
    subscription: bytes
    assignment: bytes
    rebalance_timeout: int = -1  # v1+; a v0 member's is its session timeout (Kafka's rule)
    group_instance_id: str | None = None  # v3+


@dataclass(frozen=True)
class GroupMetadataValue:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int = -1  # v2+
    members: tuple[MemberMetadataValue, ...] = field(default_factory=tuple)


# ---------------------------------------------------------------- writing


class _Writer:
    def __init__(self, flexible: bool) -> None:
        self.flexible = flexible
        self.parts: list[bytes] = []

    def i16(self, v: int) -> None:
        self.parts.append(_I16.pack(v))

    def i32(self, v: int) -> None:
        self.parts.append(_I32.pack(v))

    def i64(self, v: int) -> None:
        self.parts.append(_I64.pack(v))

    def uvarint(self, v: int) -> None:
        out = bytearray()
        while v >= 0x80:
            out.append((v & 0x7F) | 0x80)
            v >>= 7
        out.append(v)
        self.parts.append(bytes(out))

    def string(self, v: str | None, nullable: bool = False) -> None:
        if v is None:
            if not nullable:
                raise RecordFormatError("null in a non-nullable string field")
            if self.flexible:
                self.uvarint(0)
            else:
                self.i16(-1)
            return
        data = v.encode("utf-8")
        if len(data) > 0x7FFF:
            raise RecordFormatError("string longer than 32767 bytes")
        if self.flexible:
            self.uvarint(len(data) + 1)
        else:
            self.i16(len(data))
        self.parts.append(data)

    def bytes_(self, v: bytes) -> None:
        if self.flexible:
            self.uvarint(len(v) + 1)
        else:
            self.i32(len(v))
        self.parts.append(bytes(v))

    def array_len(self, n: int) -> None:
        if self.flexible:
            self.uvarint(n + 1)
        else:
            self.i32(n)

    def tagged_fields(self) -> None:
        if self.flexible:
            self.uvarint(0)

    def getvalue(self) -> bytes:
        return b"".join(self.parts)


def encode_offset_commit_key(
    key: OffsetCommitKey, version: int = OFFSET_COMMIT_KEY_VERSION
) -> bytes:
    if version not in (0, 1):
        raise RecordFormatError(f"offset commit key version {version}")
    w = _Writer(flexible=False)
    w.i16(version)
    w.string(key.group)
    w.string(key.topic)
    w.i32(key.partition)
    return w.getvalue()


def encode_group_metadata_key(key: GroupMetadataKey) -> bytes:
    w = _Writer(flexible=False)
    w.i16(GROUP_METADATA_KEY_VERSION)
    w.string(key.group)
    return w.getvalue()


def offset_commit_value_version(value: OffsetCommitValue) -> int:
    """The version Kafka 3.x picks: v1 only to keep an explicit expire timestamp, else v3."""
    if value.expire_timestamp != -1:
        return OFFSET_COMMIT_VALUE_VERSION_WITH_EXPIRY
    return OFFSET_COMMIT_VALUE_VERSION


def encode_offset_commit_value(value: OffsetCommitValue, version: int | None = None) -> bytes:
    if version is None:
        version = offset_commit_value_version(value)
    if not 0 <= version <= MAX_VALUE_VERSION:
        raise RecordFormatError(f"offset commit value version {version}")
    w = _Writer(flexible=version >= FLEXIBLE_VERSION)
    w.i16(version)
    w.i64(value.offset)
    if version >= 3:
        w.i32(value.leader_epoch)
    w.string(value.metadata)
    w.i64(value.commit_timestamp)
    if version == 1:
        w.i64(value.expire_timestamp)
    w.tagged_fields()
    return w.getvalue()


def encode_group_metadata_value(
    value: GroupMetadataValue, version: int = GROUP_METADATA_VALUE_VERSION
) -> bytes:
    if not 0 <= version <= MAX_VALUE_VERSION:
        raise RecordFormatError(f"group metadata value version {version}")
    w = _Writer(flexible=version >= FLEXIBLE_VERSION)
    w.i16(version)
    w.string(value.protocol_type)
    w.i32(value.generation)
    w.string(value.protocol, nullable=True)
    w.string(value.leader, nullable=True)
    if version >= 2:
        w.i64(value.current_state_timestamp)
    w.array_len(len(value.members))
    for m in value.members:
        w.string(m.member_id)
        if version >= 3:
            w.string(m.group_instance_id, nullable=True)
        w.string(m.client_id)
        w.string(m.client_host)
        if version >= 1:
            w.i32(m.rebalance_timeout)
        w.i32(m.session_timeout)
        w.bytes_(m.subscription)
        w.bytes_(m.assignment)
        w.tagged_fields()
    w.tagged_fields()
    return w.getvalue()


# ---------------------------------------------------------------- reading


class _Reader:
    def __init__(self, data: bytes | bytearray | memoryview, flexible: bool = False) -> None:
        self.data = bytes(data)
        self.pos = 0
        self.flexible = flexible

    def _take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise RecordFormatError("record truncated")
        chunk = self.data[self.pos : self.pos + n]
        self.pos += n
        return chunk

    def i16(self) -> int:
        return int(_I16.unpack(self._take(2))[0])

    def i32(self) -> int:
        return int(_I32.unpack(self._take(4))[0])

    def i64(self) -> int:
        return int(_I64.unpack(self._take(8))[0])

    def uvarint(self) -> int:
        value = 0
        shift = 0
        while True:
            b = self._take(1)[0]
            value |= (b & 0x7F) << shift
            if not b & 0x80:
                return value
            shift += 7
            if shift > 63:
                raise RecordFormatError("varint too long")

    def string(self, nullable: bool = False) -> str | None:
        n = self.uvarint() - 1 if self.flexible else self.i16()
        if n < 0:
            if n == -1 and nullable:
                return None
            raise RecordFormatError("null in a non-nullable string field")
        try:
            return self._take(n).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise RecordFormatError(f"string is not UTF-8: {exc}") from None

    def required_string(self) -> str:
        s = self.string()
        assert s is not None
        return s

    def bytes_(self) -> bytes:
        n = self.uvarint() - 1 if self.flexible else self.i32()
        if n < 0:
            raise RecordFormatError("null in a non-nullable bytes field")
        return self._take(n)

    def array_len(self) -> int:
        n = self.uvarint() - 1 if self.flexible else self.i32()
        if n < 0:
            raise RecordFormatError("null in a non-nullable array field")
        return n

    def skip_tagged_fields(self) -> None:
        if not self.flexible:
            return
        for _ in range(self.uvarint()):
            self.uvarint()
            self._take(self.uvarint())


def decode_key(
    data: bytes | bytearray | memoryview,
) -> OffsetCommitKey | GroupMetadataKey | UnknownKey:
    r = _Reader(data)
    version = r.i16()
    if version in (0, 1):
        return OffsetCommitKey(r.required_string(), r.required_string(), r.i32())
    if version == GROUP_METADATA_KEY_VERSION:
        return GroupMetadataKey(r.required_string())
    return UnknownKey(version)


def decode_offset_commit_value(data: bytes | bytearray | memoryview) -> OffsetCommitValue:
    r = _Reader(data)
    version = r.i16()
    if not 0 <= version <= MAX_VALUE_VERSION:
        raise RecordFormatError(f"unknown offset commit value version {version}")
    r.flexible = version >= FLEXIBLE_VERSION
    offset = r.i64()
    leader_epoch = r.i32() if version >= 3 else -1
    metadata = r.required_string()
    commit_timestamp = r.i64()
    expire_timestamp = r.i64() if version == 1 else -1
    r.skip_tagged_fields()
    return OffsetCommitValue(offset, metadata, commit_timestamp, leader_epoch, expire_timestamp)


def decode_group_metadata_value(data: bytes | bytearray | memoryview) -> GroupMetadataValue:
    r = _Reader(data)
    version = r.i16()
    if not 0 <= version <= MAX_VALUE_VERSION:
        raise RecordFormatError(f"unknown group metadata value version {version}")
    r.flexible = version >= FLEXIBLE_VERSION
    protocol_type = r.required_string()
    generation = r.i32()
    protocol = r.string(nullable=True)
    leader = r.string(nullable=True)
    current_state_timestamp = r.i64() if version >= 2 else -1
    members = []
    for _ in range(r.array_len()):
        member_id = r.required_string()
        group_instance_id = r.string(nullable=True) if version >= 3 else None
        client_id = r.required_string()
        client_host = r.required_string()
        rebalance_timeout = r.i32() if version >= 1 else -1
        session_timeout = r.i32()
        subscription = r.bytes_()
        assignment = r.bytes_()
        r.skip_tagged_fields()
        members.append(
            MemberMetadataValue(
                member_id=member_id,
                client_id=client_id,
                client_host=client_host,
                session_timeout=session_timeout,
                subscription=subscription,
                assignment=assignment,
                rebalance_timeout=rebalance_timeout,
                group_instance_id=group_instance_id,
            )
        )
    r.skip_tagged_fields()
    return GroupMetadataValue(
        protocol_type=protocol_type,
        generation=generation,
        protocol=protocol,
        leader=leader,
        current_state_timestamp=current_state_timestamp,
        members=tuple(members),
    )


# ---------------------------------------------------------------- groups and offsets


@dataclass(frozen=True)
class OffsetCommitRecord:
    """An offset commit read from the log; ``offset`` None is its tombstone."""

    group: str
    tp: TopicPartition
    offset: OffsetAndMetadata | None


@dataclass(frozen=True)
class GroupMetadataRecord:
    """A group's metadata read from the log; ``value`` None is its tombstone."""

    group: str
    value: GroupMetadataValue | None


def offset_commit_value(offset: OffsetAndMetadata) -> OffsetCommitValue:
    return OffsetCommitValue(
        offset=offset.offset,
        metadata=offset.metadata,
        commit_timestamp=offset.commit_timestamp_ms,
        leader_epoch=-1 if offset.leader_epoch is None else offset.leader_epoch,
        expire_timestamp=-1 if offset.expire_timestamp_ms is None else offset.expire_timestamp_ms,
    )


def offset_and_metadata(value: OffsetCommitValue) -> OffsetAndMetadata:
    return OffsetAndMetadata(
        offset=value.offset,
        leader_epoch=None if value.leader_epoch == -1 else value.leader_epoch,
        metadata=value.metadata,
        commit_timestamp_ms=value.commit_timestamp,
        expire_timestamp_ms=None if value.expire_timestamp == -1 else value.expire_timestamp,
    )


def group_metadata_value(
    group: GroupMetadata, assignment: Mapping[str, bytes]
) -> GroupMetadataValue:
    members = []
    for m in group.all_member_metadata():
        if group.protocol_name is None:
            raise ValueError(f"non-empty group {group.group_id} has no protocol")
        members.append(
            MemberMetadataValue(
                member_id=m.member_id,
                group_instance_id=m.group_instance_id,
                client_id=m.client_id,
                client_host=m.client_host,
                rebalance_timeout=m.rebalance_timeout_ms,
                session_timeout=m.session_timeout_ms,
                subscription=m.metadata(group.protocol_name),
                assignment=assignment[m.member_id],
            )
        )
    return GroupMetadataValue(
        protocol_type=group.protocol_type or "",
        generation=group.generation_id,
        protocol=group.protocol_name,
        leader=group.leader_id,
        current_state_timestamp=(
            -1 if group.current_state_timestamp is None else group.current_state_timestamp
        ),
        members=tuple(members),
    )


def group_from_value(
    group_id: str, value: GroupMetadataValue, now_ms: Callable[[], int]
) -> GroupMetadata:
    """Kafka's ``GroupMetadata.loadGroup``: Stable with members, else Empty."""
    state = GroupState.STABLE if value.members else GroupState.EMPTY
    group = GroupMetadata(group_id, now_ms, state)
    group.generation_id = value.generation
    group.protocol_type = value.protocol_type or None
    # A non-empty group always has a protocol; an unreadable record that says otherwise gets
    # an empty name rather than a group that cannot be described.
    group.protocol_name = "" if value.protocol is None and value.members else value.protocol
    group.leader_id = value.leader
    group.current_state_timestamp = (
        None if value.current_state_timestamp == -1 else value.current_state_timestamp
    )
    for mv in value.members:
        member = MemberMetadata(
            member_id=mv.member_id,
            group_instance_id=mv.group_instance_id,
            client_id=mv.client_id,
            client_host=mv.client_host,
            rebalance_timeout_ms=(
                mv.session_timeout if mv.rebalance_timeout == -1 else mv.rebalance_timeout
            ),
            session_timeout_ms=mv.session_timeout,
            protocol_type=value.protocol_type,
            supported_protocols=[(value.protocol or "", mv.subscription)],
            assignment=mv.assignment,
        )
        group.add(member)
    group.subscribed_topics = group.compute_subscribed_topics()
    return group


def offset_commit_record(group_id: str, tp: TopicPartition, offset: OffsetAndMetadata) -> Record:
    key = encode_offset_commit_key(OffsetCommitKey(group_id, tp.topic, tp.partition))
    return key, encode_offset_commit_value(offset_commit_value(offset))


def offset_commit_tombstone(group_id: str, tp: TopicPartition) -> Record:
    return encode_offset_commit_key(OffsetCommitKey(group_id, tp.topic, tp.partition)), None


def group_metadata_record(group: GroupMetadata, assignment: Mapping[str, bytes]) -> Record:
    """The group's membership with each member's ``assignment``, as it is at the call."""
    key = encode_group_metadata_key(GroupMetadataKey(group.group_id))
    return key, encode_group_metadata_value(group_metadata_value(group, assignment))


def group_metadata_tombstone(group_id: str) -> Record:
    return encode_group_metadata_key(GroupMetadataKey(group_id)), None


def read_record(
    key: bytes, value: bytes | None
) -> OffsetCommitRecord | GroupMetadataRecord | UnknownKey:
    """One record replayed from the log; RecordFormatError if it cannot be read."""
    k = decode_key(key)
    if isinstance(k, OffsetCommitKey):
        offset = None if value is None else offset_and_metadata(decode_offset_commit_value(value))
        return OffsetCommitRecord(k.group, TopicPartition(k.topic, k.partition), offset)
    if isinstance(k, GroupMetadataKey):
        group = None if value is None else decode_group_metadata_value(value)
        return GroupMetadataRecord(k.group, group)
    return k


def read_txn_offset_commit(
    key: bytes, value: bytes | None
) -> tuple[str, TopicPartition, OffsetAndMetadata] | None:
    """The (group, partition, offset) of an offset commit in a transactional batch
    (TxnOffsetCommit); None for any other record, which a transaction never holds and the
    replay ignores."""
    k = decode_key(key)
    if not isinstance(k, OffsetCommitKey) or value is None:
        return None
    offset = offset_and_metadata(decode_offset_commit_value(value))
    return k.group, TopicPartition(k.topic, k.partition), offset
