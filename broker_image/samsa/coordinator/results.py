"""What the GroupCoordinator takes and returns: plain values a Kafka API handler maps 1:1,
and the JoinRequest it builds from a JoinGroup's fields for the rebalance protocol."""

from __future__ import annotations

from dataclasses import dataclass, field

from samsa.metadata.model import TopicPartition
from samsa.protocol.errors import ErrorCode

NO_GENERATION = -1
UNKNOWN_MEMBER_ID = ""


@dataclass(frozen=True)
class JoinGroupMember:
    """One member as the leader sees it in its JoinGroup response."""

    member_id: str
    group_instance_id: str | None
    metadata: bytes


@dataclass(frozen=True)
class JoinResult:
    error: ErrorCode
    member_id: str
    generation_id: int = NO_GENERATION
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str = ""
    members: tuple[JoinGroupMember, ...] = ()
    skip_assignment: bool = False

    @classmethod
    def failed(cls, member_id: str, error: ErrorCode) -> JoinResult:
        return cls(error=error, member_id=member_id)


@dataclass(frozen=True)
class JoinRequest:
    """A JoinGroup as the coordinator needs it. ``require_known_member_id`` is Kafka's
    ``version >= 4 and no group instance id`` (KIP-394); ``supports_skip_assignment`` is
    ``version >= 9``; for JoinGroup v0 pass the session timeout as the rebalance timeout."""

    group_id: str
    member_id: str
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: tuple[tuple[str, bytes], ...]
    group_instance_id: str | None = None
    require_known_member_id: bool = True
    supports_skip_assignment: bool = True
    reason: str = "not provided"

    @property
    def protocol_names(self) -> list[str]:
        return [name for name, _ in self.protocols]


@dataclass(frozen=True)
class SyncResult:
    error: ErrorCode
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


@dataclass(frozen=True)
class MemberIdentity:
    """A LeaveGroup entry: by member id, or by group instance id with an empty member id."""

    member_id: str
    group_instance_id: str | None = None
    reason: str | None = None


@dataclass(frozen=True)
class LeaveMemberResult:
    member_id: str
    group_instance_id: str | None
    error: ErrorCode


@dataclass(frozen=True)
class LeaveResult:
    """LeaveGroup v0-v2 carry only the top-level error: use the single member's error there."""

    error: ErrorCode
    members: tuple[LeaveMemberResult, ...] = ()


@dataclass(frozen=True)
class OffsetCommitPartition:
    """One partition of an OffsetCommit request; -1 and None mean "not given", as on the wire."""

    topic: str
    partition: int
    offset: int
    leader_epoch: int = -1
    metadata: str | None = None
    commit_timestamp_ms: int = -1  # OffsetCommit v1 only


@dataclass(frozen=True)
class OffsetFetchPartition:
    topic: str
    partition: int
    offset: int = -1
    leader_epoch: int = -1
    metadata: str = ""
    error: ErrorCode = ErrorCode.none


@dataclass(frozen=True)
class OffsetFetchResult:
    error: ErrorCode
    partitions: tuple[OffsetFetchPartition, ...] = ()


@dataclass(frozen=True)
class MemberSummary:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes


@dataclass(frozen=True)
class GroupSummary:
    """A DescribeGroups entry. Metadata and assignments are filled in only for Stable groups."""

    group_id: str
    error: ErrorCode
    state: str
    protocol_type: str = ""
    protocol: str = ""
    members: tuple[MemberSummary, ...] = ()
    error_message: str | None = None


@dataclass(frozen=True)
class GroupOverview:
    group_id: str
    protocol_type: str
    state: str
    group_type: str = "classic"


@dataclass(frozen=True)
class ListGroupsResult:
    error: ErrorCode
    groups: tuple[GroupOverview, ...] = ()


@dataclass(frozen=True)
class OffsetDeleteResult:
    """A group-level error leaves ``partitions`` empty, as in Kafka."""

    error: ErrorCode
    partitions: dict[TopicPartition, ErrorCode] = field(default_factory=dict)
