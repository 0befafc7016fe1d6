"""One classic consumer group (Kafka's GroupMetadata): its state machine, members and offsets.

Pure bookkeeping: no I/O, no asyncio. The rebalance protocol (``rebalance`` and the request
modules) decides when to move the group between states; this class enforces that each move is
one Kafka allows, keeps the counts that decide when a rebalance may complete, chooses the
group's protocol, and holds committed and in-flight offsets.

States and the moves Kafka allows (target <- allowed previous states):

- PreparingRebalance <- Stable, CompletingRebalance, Empty
- CompletingRebalance <- PreparingRebalance
- Stable <- CompletingRebalance
- Empty <- PreparingRebalance
- Dead <- any
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from enum import Enum
from typing import Any

from samsa.coordinator.consumer_protocol import (
    CONSUMER_PROTOCOL_TYPE,
    SubscriptionFormatError,
    subscribed_topics,
)
from samsa.coordinator.member import JoinCallback, MemberMetadata
from samsa.coordinator.offsets import CommitRecordMetadataAndOffset, OffsetAndMetadata
from samsa.coordinator.results import (
    GroupOverview,
    GroupSummary,
    JoinGroupMember,
    JoinResult,
    SyncResult,
)
from samsa.metadata.model import TopicPartition
from samsa.protocol.errors import ErrorCode


class GroupState(Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"

    def __str__(self) -> str:
        return self.value


_VALID_PREVIOUS: dict[GroupState, frozenset[GroupState]] = {
    GroupState.PREPARING_REBALANCE: frozenset(
        {GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY}
    ),
    GroupState.COMPLETING_REBALANCE: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.STABLE: frozenset({GroupState.COMPLETING_REBALANCE}),
    GroupState.EMPTY: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.DEAD: frozenset(GroupState),
}


class IllegalGroupTransition(RuntimeError):
    """A move between states that Kafka's state machine forbids: a coordinator bug."""


class GroupMetadata:
    def __init__(
        self,
        group_id: str,
        now_ms: Callable[[], int],
        initial_state: GroupState = GroupState.EMPTY,
    ) -> None:
        self.group_id = group_id
        self._now_ms = now_ms
        self.state = initial_state
        self.current_state_timestamp: int | None = now_ms()
        self.protocol_type: str | None = None
        self.protocol_name: str | None = None
        self.generation_id = 0
        self.leader_id: str | None = None

        self.members: dict[str, MemberMetadata] = {}
        self.static_members: dict[str, str] = {}  # group.instance.id -> member id
        self.pending_members: set[str] = set()  # KIP-394: ids handed out, not yet joined
        self.pending_sync_members: set[str] = set()
        self._num_awaiting_join = 0
        self._supported_protocols: Counter[str] = Counter()

        self.offsets: dict[TopicPartition, CommitRecordMetadataAndOffset] = {}
        self.pending_offset_commits: dict[TopicPartition, OffsetAndMetadata] = {}
        # TxnOffsetCommit: per producer id, offsets written in its open transaction; the
        # value is None until the write is durable. They count once its marker commits.
        self.pending_transactional_offset_commits: dict[
            int, dict[TopicPartition, OffsetAndMetadata | CommitRecordMetadataAndOffset]
        ] = {}
        # None when unknown (not a consumer group, or unreadable subscriptions): callers then
        # assume every topic is subscribed, which is the safe answer.
        self.subscribed_topics: set[str] | None = None

        # KIP-134: a new member joined during the initial delay, so the delay may be extended.
        self.new_member_added = False

        # Timers owned by the Rebalancer, kept here so they die with the group.
        self.join_op: Any = None
        self.sync_timer: Any = None
        self.pending_member_timers: dict[str, Any] = {}

    # ------------------------------------------------------------------ basics

    def is_(self, state: GroupState) -> bool:
        return self.state is state

    def has(self, member_id: str) -> bool:
        return member_id in self.members

    def get(self, member_id: str) -> MemberMetadata:
        return self.members[member_id]

    @property
    def size(self) -> int:
        return len(self.members)

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id == member_id

    @property
    def is_consumer_group(self) -> bool:
        return self.protocol_type == CONSUMER_PROTOCOL_TYPE

    def all_members(self) -> list[str]:
        return list(self.members)

    def all_member_metadata(self) -> list[MemberMetadata]:
        return list(self.members.values())

    @property
    def num_awaiting(self) -> int:
        return self._num_awaiting_join

    @property
    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def generate_member_id(self, client_id: str, group_instance_id: str | None) -> str:
        prefix = client_id if group_instance_id is None else group_instance_id
        return f"{prefix}-{uuid.uuid4()}"

    # ------------------------------------------------------------------ state machine

    def can_rebalance(self) -> bool:
        return self.state in _VALID_PREVIOUS[GroupState.PREPARING_REBALANCE]

    def transition_to(self, target: GroupState) -> None:
        if self.state not in _VALID_PREVIOUS[target]:
            raise IllegalGroupTransition(
                f"group {self.group_id} cannot move from {self.state} to {target}"
            )
        self.state = target
        self.current_state_timestamp = self._now_ms()

    # ------------------------------------------------------------------ membership

    def add(self, member: MemberMetadata, callback: JoinCallback | None = None) -> None:
        if member.group_instance_id is not None:
            if member.group_instance_id in self.static_members:
                raise ValueError(
                    f"static member {member.group_instance_id} is already in {self.group_id}"
                )
            self.static_members[member.group_instance_id] = member.member_id
        if not self.members:
            self.protocol_type = member.protocol_type
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.members[member.member_id] = member
        self._supported_protocols.update(member.protocol_names())
        member.awaiting_join = callback
        if member.is_awaiting_join:
            self._num_awaiting_join += 1
        self.pending_members.discard(member.member_id)

    def remove(self, member_id: str) -> MemberMetadata | None:
        member = self.members.pop(member_id, None)
        if member is not None:
            self._supported_protocols.subtract(member.protocol_names())
            if member.is_awaiting_join:
                self._num_awaiting_join -= 1
            if member.group_instance_id is not None:
                self.static_members.pop(member.group_instance_id, None)
        if self.is_leader(member_id):
            self.leader_id = next(iter(self.members), None)
        self.pending_members.discard(member_id)
        self.pending_sync_members.discard(member_id)
        return member

    def maybe_elect_new_joined_leader(self) -> bool:
        """Keep the leader if it rejoined, else pick any member that did.

        False when there is no leader (the group is empty) or nobody rejoined.
        """
        if self.leader_id is None:
            return False
        leader = self.members.get(self.leader_id)
        if leader is not None and leader.is_awaiting_join:
            return True
        for member_id, member in self.members.items():
            if member.is_awaiting_join:
                self.leader_id = member_id
                return True
        return False

    def replace_static_member(
        self, group_instance_id: str, old_member_id: str, new_member_id: str
    ) -> MemberMetadata:
        """Give a static member a new member id, fencing whoever still uses the old one."""
        member = self.members.pop(old_member_id, None)
        if member is None:
            raise KeyError(f"cannot replace unknown member {old_member_id}")
        self.maybe_invoke_join_callback(
            member, JoinResult.failed(old_member_id, ErrorCode.fenced_instance_id)
        )
        self.maybe_invoke_sync_callback(member, SyncResult(ErrorCode.fenced_instance_id))
        member.member_id = new_member_id
        self.members[new_member_id] = member
        if self.is_leader(old_member_id):
            self.leader_id = new_member_id
        if old_member_id in self.pending_sync_members:
            self.pending_sync_members.discard(old_member_id)
            self.pending_sync_members.add(new_member_id)
        self.static_members[group_instance_id] = new_member_id
        return member

    def update_member(
        self,
        member: MemberMetadata,
        protocols: Sequence[tuple[str, bytes]],
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        callback: JoinCallback | None,
    ) -> None:
        self._supported_protocols.subtract(member.protocol_names())
        member.supported_protocols = [(n, bytes(m)) for n, m in protocols]
        self._supported_protocols.update(member.protocol_names())
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.session_timeout_ms = session_timeout_ms
        if callback is not None and not member.is_awaiting_join:
            self._num_awaiting_join += 1
        elif callback is None and member.is_awaiting_join:
            self._num_awaiting_join -= 1
        member.awaiting_join = callback

    def is_pending_member(self, member_id: str) -> bool:
        return member_id in self.pending_members

    def add_pending_member(self, member_id: str) -> None:
        if self.has(member_id):
            raise ValueError(f"{member_id} is already a member of {self.group_id}")
        self.pending_members.add(member_id)

    def add_pending_sync_member(self, member_id: str) -> None:
        if not self.has(member_id):
            raise KeyError(f"{member_id} is not a member of {self.group_id}")
        self.pending_sync_members.add(member_id)

    def remove_pending_sync_member(self, member_id: str) -> None:
        self.pending_sync_members.discard(member_id)

    def has_received_sync_from_all_members(self) -> bool:
        return not self.pending_sync_members

    def clear_pending_sync_members(self) -> None:
        self.pending_sync_members.clear()

    def current_static_member_id(self, group_instance_id: str) -> str | None:
        return self.static_members.get(group_instance_id)

    def validate_current_member(
        self, member_id: str, group_instance_id: str | None
    ) -> ErrorCode | None:
        """A static member's instance id must map to this member id (else it is fenced);
        any member must be known."""
        if group_instance_id is not None:
            current = self.current_static_member_id(group_instance_id)
            if current is None:
                return ErrorCode.unknown_member_id
            if current != member_id:
                return ErrorCode.fenced_instance_id
        if not self.has(member_id):
            return ErrorCode.unknown_member_id
        return None

    def is_static_member_fenced(self, group_instance_id: str, member_id: str) -> bool:
        current = self.static_members.get(group_instance_id)
        return current is not None and current != member_id

    def not_yet_rejoined_members(self) -> list[MemberMetadata]:
        return [m for m in self.members.values() if not m.is_awaiting_join]

    def has_all_members_joined(self) -> bool:
        return len(self.members) == self._num_awaiting_join and not self.pending_members

    def maybe_invoke_join_callback(self, member: MemberMetadata, result: JoinResult) -> None:
        callback = member.awaiting_join
        if callback is None:
            return
        member.awaiting_join = None
        self._num_awaiting_join -= 1
        callback(result)

    def maybe_invoke_sync_callback(self, member: MemberMetadata, result: SyncResult) -> bool:
        callback = member.awaiting_sync
        if callback is None:
            return False
        member.awaiting_sync = None
        callback(result)
        return True

    # ------------------------------------------------------------------ protocols

    def _candidate_protocols(self) -> set[str]:
        n = len(self.members)
        return {name for name, count in self._supported_protocols.items() if count == n}

    def select_protocol(self) -> str:
        """Each member votes for its favourite protocol that all support; the most votes win.

        Ties go to the protocol that got its first vote earliest (members in join order), a
        deterministic stand-in for Kafka's hash-map order.
        """
        if not self.members:
            raise ValueError(f"cannot select a protocol for empty group {self.group_id}")
        candidates = self._candidate_protocols()
        votes = Counter(member.vote(candidates) for member in self.members.values())
        return max(votes, key=lambda name: votes[name])

    def supports_protocols(
        self, member_protocol_type: str, member_protocols: Iterable[str]
    ) -> bool:
        protocols = set(member_protocols)
        if self.is_(GroupState.EMPTY):
            return bool(member_protocol_type) and bool(protocols)
        n = len(self.members)
        return self.protocol_type == member_protocol_type and any(
            self._supported_protocols[p] == n for p in protocols
        )

    def compute_subscribed_topics(self) -> set[str] | None:
        if self.protocol_type != CONSUMER_PROTOCOL_TYPE:
            return None
        if not self.members:
            return set()
        if self.protocol_name is None:
            return None
        topics: set[str] = set()
        try:
            for member in self.members.values():
                topics |= subscribed_topics(member.metadata(self.protocol_name))
        except (SubscriptionFormatError, ValueError):
            return None
        return topics

    def is_subscribed_to_topic(self, topic: str) -> bool:
        return self.subscribed_topics is None or topic in self.subscribed_topics

    # ------------------------------------------------------------------ generations

    def init_next_generation(self) -> None:
        self.generation_id += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self.subscribed_topics = self.compute_subscribed_topics()
            self.transition_to(GroupState.COMPLETING_REBALANCE)
        else:
            self.protocol_name = None
            self.subscribed_topics = self.compute_subscribed_topics()
            self.transition_to(GroupState.EMPTY)
        self.clear_pending_sync_members()

    def current_member_metadata(self) -> tuple[JoinGroupMember, ...]:
        if self.state in (GroupState.DEAD, GroupState.PREPARING_REBALANCE):
            raise ValueError(f"no member metadata for a group in state {self.state}")
        assert self.protocol_name is not None
        return tuple(
            JoinGroupMember(m.member_id, m.group_instance_id, m.metadata(self.protocol_name))
            for m in self.members.values()
        )

    def summary(self) -> GroupSummary:
        if self.is_(GroupState.STABLE):
            protocol = self.protocol_name
            if protocol is None:
                raise ValueError(f"stable group {self.group_id} has no protocol")
            members = tuple(m.summary(protocol) for m in self.members.values())
            return GroupSummary(
                self.group_id,
                ErrorCode.none,
                str(self.state),
                self.protocol_type or "",
                protocol,
                members,
            )
        members = tuple(m.summary_no_metadata() for m in self.members.values())
        return GroupSummary(
            self.group_id, ErrorCode.none, str(self.state), self.protocol_type or "", "", members
        )

    def overview(self) -> GroupOverview:
        return GroupOverview(self.group_id, self.protocol_type or "", str(self.state))

    # ------------------------------------------------------------------ offsets

    def initialize_offsets(
        self, offsets: Mapping[TopicPartition, CommitRecordMetadataAndOffset]
    ) -> None:
        self.offsets.update(offsets)

    def prepare_offset_commit(self, offsets: Mapping[TopicPartition, OffsetAndMetadata]) -> None:
        self.pending_offset_commits.update(offsets)

    def on_offset_commit_append(
        self, tp: TopicPartition, committed: CommitRecordMetadataAndOffset
    ) -> None:
        if tp in self.pending_offset_commits:
            current = self.offsets.get(tp)
            if current is None or current.older_than(committed):
                self.offsets[tp] = committed
        # A later commit of the same partition may be in flight: only clear our own.
        if self.pending_offset_commits.get(tp) == committed.offset_and_metadata:
            del self.pending_offset_commits[tp]

    def fail_pending_offset_write(self, tp: TopicPartition, offset: OffsetAndMetadata) -> None:
        if self.pending_offset_commits.get(tp) == offset:
            del self.pending_offset_commits[tp]

    def has_pending_offset_commits_for(self, tp: TopicPartition) -> bool:
        """Also true while an open transaction holds an offset of the partition (KIP-447:
        OffsetFetch with require_stable then answers UNSTABLE_OFFSET_COMMIT)."""
        return tp in self.pending_offset_commits or any(
            tp in pending for pending in self.pending_transactional_offset_commits.values()
        )

    # Kafka's prepareTxnOffsetCommit, onTxnOffsetCommitAppend, failPendingTxnOffsetCommit and
    # completePendingTxnOffsetCommit.

    def prepare_txn_offset_commit(
        self, producer_id: int, offsets: Mapping[TopicPartition, OffsetAndMetadata]
    ) -> None:
        self.pending_transactional_offset_commits.setdefault(producer_id, {}).update(offsets)

    def on_txn_offset_commit_append(
        self, producer_id: int, tp: TopicPartition, committed: CommitRecordMetadataAndOffset
    ) -> None:
        pending = self.pending_transactional_offset_commits.get(producer_id)
        if pending is not None and pending.get(tp) == committed.offset_and_metadata:
            pending[tp] = committed

    def fail_pending_txn_offset_commit(self, producer_id: int, tp: TopicPartition) -> None:
        pending = self.pending_transactional_offset_commits.get(producer_id)
        if pending is not None:
            pending.pop(tp, None)
            if not pending:
                del self.pending_transactional_offset_commits[producer_id]

    def complete_pending_txn_offset_commit(self, producer_id: int, committed: bool) -> int:
        """The producer's transaction ended: its durable offsets become committed (if newer
        than what the partition has) or are dropped. Returns how many were applied."""
        pending = self.pending_transactional_offset_commits.pop(producer_id, None)
        applied = 0
        if committed and pending:
            for tp, c in pending.items():
                if not isinstance(c, CommitRecordMetadataAndOffset):
                    continue  # its write never became durable
                current = self.offsets.get(tp)
                if current is None or current.older_than(c):
                    self.offsets[tp] = c
                    applied += 1
        return applied

    def has_pending_offset_commits_from(self, producer_id: int) -> bool:
        return producer_id in self.pending_transactional_offset_commits

    def remove_offsets(
        self, partitions: Iterable[TopicPartition]
    ) -> dict[TopicPartition, OffsetAndMetadata]:
        removed: dict[TopicPartition, OffsetAndMetadata] = {}
        for tp in partitions:
            tp = TopicPartition(*tp)
            self.pending_offset_commits.pop(tp, None)
            for pending in self.pending_transactional_offset_commits.values():
                pending.pop(tp, None)
            committed = self.offsets.pop(tp, None)
            if committed is not None:
                removed[tp] = committed.offset_and_metadata
        return removed

    def remove_all_offsets(self) -> dict[TopicPartition, OffsetAndMetadata]:
        return self.remove_offsets(list(self.offsets))

    def remove_expired_offsets(
        self, now_ms: int, retention_ms: int
    ) -> dict[TopicPartition, OffsetAndMetadata]:
        """KIP-211: an empty group's offsets expire ``retention_ms`` after it became empty;
        a standalone (simple) group's, and a stable consumer group's offsets of topics it no
        longer subscribes to, ``retention_ms`` after their commit. Explicit expire timestamps
        from old clients win.
        """

        def expired(
            base: Callable[[CommitRecordMetadataAndOffset], int], keep: set[str]
        ) -> dict[TopicPartition, OffsetAndMetadata]:
            out: dict[TopicPartition, OffsetAndMetadata] = {}
            for tp, committed in self.offsets.items():
                if tp.topic in keep or tp in self.pending_offset_commits:
                    continue
                oam = committed.offset_and_metadata
                if oam.expire_timestamp_ms is None:
                    if now_ms - base(committed) >= retention_ms:
                        out[tp] = oam
                elif now_ms >= oam.expire_timestamp_ms:
                    out[tp] = oam
            return out

        def commit_time(c: CommitRecordMetadataAndOffset) -> int:
            return c.offset_and_metadata.commit_timestamp_ms

        if self.protocol_type is not None and self.is_(GroupState.EMPTY):
            state_ts = self.current_state_timestamp
            result = expired(commit_time if state_ts is None else (lambda _c: state_ts), set())
        elif (
            self.protocol_type == CONSUMER_PROTOCOL_TYPE
            and self.subscribed_topics is not None
            and self.is_(GroupState.STABLE)
        ):
            result = expired(commit_time, self.subscribed_topics)
        elif self.protocol_type is None:
            result = expired(commit_time, set())
        else:
            result = {}
        for tp in result:
            del self.offsets[tp]
        return result

    def offset(self, tp: TopicPartition) -> OffsetAndMetadata | None:
        committed = self.offsets.get(tp)
        return None if committed is None else committed.offset_and_metadata

    def has_offsets(self) -> bool:
        return (
            bool(self.offsets)
            or bool(self.pending_offset_commits)
            or bool(self.pending_transactional_offset_commits)
        )

    def __repr__(self) -> str:
        return (
            f"GroupMetadata(group_id={self.group_id!r}, generation={self.generation_id}, "
            f"protocol_type={self.protocol_type!r}, state={self.state}, "
            f"members={list(self.members)})"
        )
