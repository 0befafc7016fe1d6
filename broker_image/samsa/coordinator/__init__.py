"""Consumer groups and committed offsets in __consumer_offsets, and producer ids.

The group coordinator tells one story in three parts, as Kafka's does:

- The protocol and its state machine (Kafka's GroupCoordinator). ``coordinator`` is the API a
  handler awaits, one coroutine per request: it finds the group and checks that this broker
  coordinates it. The classic rebalance protocol is one module per request, ``join_group``,
  ``static_membership`` (KIP-345), ``sync_group`` and ``leave_group``, with ``heartbeats``
  (Heartbeat and members' sessions); all of them drive ``rebalance``, whose Rebalancer moves a
  group through its rebalance and owns its delayed operations. One group and its state machine
  is ``group`` (GroupMetadata), one member ``member``, a committed offset ``offsets``, and the
  topics a consumer subscribes to are read by ``consumer_protocol``. What the API takes and
  returns is ``results``.
- The storage (Kafka's GroupMetadataManager). ``group_metadata_manager`` holds the groups of
  the __consumer_offsets partitions this broker leads, loads them and writes through the
  ``GroupStore`` seam (``group_store``), which the broker implements over its log
  (``log_group_store``); ``offsets_topic`` says which partition holds a group.
- The records codec. ``group_records`` holds the byte formats of __consumer_offsets and
  what a group and its offsets become in them.

Settings are ``config``; the clock and timers every deadline goes through are ``timers``.
Idempotent producers' ids come from ``ProducerIdManager`` (``producer_id_manager``);
transactional ids belong to the transaction coordinator, in ``transaction``.
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
