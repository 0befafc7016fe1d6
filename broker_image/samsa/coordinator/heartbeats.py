"""Heartbeat and members' sessions (Kafka's DelayedHeartbeat): a member silent for
session.timeout.ms fails (5 minutes for a new member still waiting for its first JoinGroup
answer), and so does a KIP-394 pending member that does not come back with its member id.
What a failed member leaves behind is the rebalancer's: it is told through the callbacks.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from samsa.coordinator.group import GroupMetadata, GroupState
from samsa.coordinator.member import MemberMetadata
from samsa.coordinator.timers import Clock
from samsa.protocol.errors import ErrorCode

log = logging.getLogger(__name__)

_S = GroupState


class Heartbeats:
    def __init__(
        self,
        clock: Clock,
        on_member_failed: Callable[[GroupMetadata, MemberMetadata], None],
        on_pending_member_expired: Callable[[GroupMetadata, str], None],
    ) -> None:
        self.clock = clock
        self._on_member_failed = on_member_failed
        self._on_pending_member_expired = on_pending_member_expired

    def handle_heartbeat(
        self,
        group: GroupMetadata,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
    ) -> ErrorCode:
        if group.is_(_S.DEAD):
            return ErrorCode.coordinator_not_available
        error = group.validate_current_member(member_id, group_instance_id)
        if error is not None:
            return error
        if generation_id != group.generation_id:
            return ErrorCode.illegal_generation
        if group.is_(_S.EMPTY):
            return ErrorCode.unknown_member_id
        self.complete_and_schedule_next_heartbeat(group, group.get(member_id))
        if group.is_(_S.PREPARING_REBALANCE):
            return ErrorCode.rebalance_in_progress
        return ErrorCode.none

    def complete_and_schedule_next_heartbeat(
        self, group: GroupMetadata, member: MemberMetadata
    ) -> None:
        self.schedule_expiration(group, member, member.session_timeout_ms)

    def schedule_expiration(
        self, group: GroupMetadata, member: MemberMetadata, timeout_ms: int
    ) -> None:
        self.cancel_heartbeat(member)
        member_id = member.member_id
        member.heartbeat_timer = self.clock.call_later(
            timeout_ms, lambda: self._on_expire_heartbeat(group, member_id)
        )

    def cancel_heartbeat(self, member: MemberMetadata) -> None:
        if member.heartbeat_timer is not None:
            member.heartbeat_timer.cancel()
            member.heartbeat_timer = None

    def _on_expire_heartbeat(self, group: GroupMetadata, member_id: str) -> None:
        member = group.members.get(member_id)
        if group.is_(_S.DEAD) or member is None:
            return
        member.heartbeat_timer = None
        # A member parked in JoinGroup or SyncGroup is alive by definition (its next session
        # starts when it gets its answer), unless it is new: then the join timeout applies.
        if not member.is_new and (member.is_awaiting_join or member.is_awaiting_sync):
            return
        log.info("member %s of group %s has failed, removing it", member_id, group.group_id)
        self._on_member_failed(group, member)

    def add_pending_member_expiration(
        self, group: GroupMetadata, member_id: str, timeout_ms: int
    ) -> None:
        old = group.pending_member_timers.pop(member_id, None)
        if old is not None:
            old.cancel()
        group.pending_member_timers[member_id] = self.clock.call_later(
            timeout_ms, lambda: self._on_expire_pending_member(group, member_id)
        )

    def _on_expire_pending_member(self, group: GroupMetadata, member_id: str) -> None:
        group.pending_member_timers.pop(member_id, None)
        if group.is_(_S.DEAD) or not group.is_pending_member(member_id):
            return
        log.info("pending member %s of group %s expired", member_id, group.group_id)
        self._on_pending_member_expired(group, member_id)
