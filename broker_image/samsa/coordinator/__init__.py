"""Consumer groups and committed offsets in __consumer_offsets, and producer ids.

The API a handler uses is ``GroupCoordinator`` (``coordinator``), its inputs and results
(``results``), its settings (``config``), the ``GroupStore`` seam (``store``) and the clocks
(``clock``); producer ids come from ``ProducerIdManager`` (``producer_id_manager``).
"""

from samsa.coordinator.config import GROUP_METADATA_TOPIC_NAME, GroupCoordinatorConfig
from samsa.coordinator.coordinator import GroupCoordinator
from samsa.coordinator.group import GroupMetadata, GroupState
from samsa.coordinator.group_store import GroupStore
from samsa.coordinator.offsets import OffsetAndMetadata
from samsa.coordinator.offsets_topic import java_string_hashcode, partition_for
from samsa.coordinator.producer_id_manager import ProducerIdManager
from samsa.coordinator.results import (
    GroupOverview,
    GroupSummary,
    JoinGroupMember,
    JoinRequest,
    JoinResult,
    LeaveMemberResult,
    LeaveResult,
    ListGroupsResult,
    MemberIdentity,
    MemberSummary,
    OffsetCommitPartition,
    OffsetDeleteResult,
    OffsetFetchPartition,
    OffsetFetchResult,
    SyncResult,
)
from samsa.coordinator.timers import AsyncioClock, Clock, TimerHandle

__all__ = [
    "GROUP_METADATA_TOPIC_NAME",
    "AsyncioClock",
    "Clock",
    "GroupCoordinator",
    "GroupCoordinatorConfig",
    "GroupMetadata",
    "GroupOverview",
    "GroupState",
    "GroupStore",
    "GroupSummary",
    "JoinGroupMember",
    "JoinRequest",
    "JoinResult",
    "LeaveMemberResult",
    "LeaveResult",
    "ListGroupsResult",
    "MemberIdentity",
    "MemberSummary",
    "OffsetAndMetadata",
    "OffsetCommitPartition",
    "OffsetDeleteResult",
    "OffsetFetchPartition",
    "OffsetFetchResult",
    "ProducerIdManager",
    "SyncResult",
    "TimerHandle",
    "java_string_hashcode",
    "partition_for",
]
