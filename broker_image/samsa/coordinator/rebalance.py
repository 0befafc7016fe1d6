"""The rebalance (Kafka's GroupCoordinator: prepareRebalance, onCompleteJoin and the delayed
operations): a group's moves through PreparingRebalance and CompletingRebalance, members
leaving, and the group's timers, which die with it when it is unloaded.

- DelayedJoin: completes when every member has rejoined, or at the rebalance timeout (the
  largest rebalance.timeout.ms of the members), when dynamic members that did not rejoin are
  dropped (static members stay until their session ends);
- InitialDelayedJoin (KIP-134): the first rebalance of an empty group waits
  group.initial.rebalance.delay.ms, extended while new members keep arriving, up to the
  rebalance timeout;
- DelayedSync: members that do not send SyncGroup within the rebalance timeout are dropped.

Members' sessions are ``heartbeats``; the requests that drive all this are ``join_group``,
``static_membership``, ``sync_group`` and ``leave_group``, each a set of functions of the
``Rebalancer``. Everything here runs synchronously on the event loop; parked requests are
answered through the callbacks kept on each member.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from samsa.coordinator.config import GroupCoordinatorConfig
from samsa.coordinator.group import GroupMetadata, GroupState
from samsa.coordinator.group_metadata_manager import GroupMetadataManager
from samsa.coordinator.heartbeats import Heartbeats
from samsa.coordinator.member import MemberMetadata
from samsa.coordinator.results import UNKNOWN_MEMBER_ID, JoinResult, SyncResult
from samsa.coordinator.timers import Clock, TimerHandle
from samsa.protocol.errors import ErrorCode

log = logging.getLogger(__name__)

_S = GroupState


@dataclass
class _DelayedJoin:
    handle: TimerHandle
    initial: bool = False
    configured_delay_ms: int = 0
    delay_ms: int = 0
    remaining_ms: int = 0


class _NoTimer:
    def cancel(self) -> None:
        pass


def join_result_for(group: GroupMetadata, member_id: str, with_members: bool = True) -> JoinResult:
    """The JoinGroup answer of a member of the group's current generation; only the leader
    gets the members (with ``with_members``)."""
    is_leader = group.is_leader(member_id)
    return JoinResult(
        error=ErrorCode.none,
        member_id=member_id,
        generation_id=group.generation_id,
        protocol_type=group.protocol_type,
        protocol_name=group.protocol_name,
        leader_id=group.leader_id or "",
        members=group.current_member_metadata() if with_members and is_leader else (),
    )


class Rebalancer:
    """What the group requests share: the settings, the GroupMetadataManager (to store a
    group), the clock, the coordinator's background tasks and the members' heartbeats."""

    def __init__(
        self,
        config: GroupCoordinatorConfig,
        manager: GroupMetadataManager,
        clock: Clock,
        spawn: Callable[[Awaitable[Any]], object],
    ) -> None:
        self.config = config
        self.manager = manager
        self.clock = clock
        self.spawn = spawn
        self.heartbeats = Heartbeats(
            clock, self.remove_member_and_update_group, self.remove_pending_member_and_update_group
        )

    # ------------------------------------------------------------------ PreparingRebalance

    def maybe_prepare_rebalance(self, group: GroupMetadata, reason: str) -> None:
        if group.can_rebalance():
            self.prepare_rebalance(group, reason)

    def prepare_rebalance(self, group: GroupMetadata, reason: str) -> None:
        if group.is_(_S.COMPLETING_REBALANCE):
            self.reset_and_propagate_assignment_error(group, ErrorCode.rebalance_in_progress)
        self._remove_sync_expiration(group)
        initial = group.is_(_S.EMPTY)
        delay = self.config.group_initial_rebalance_delay_ms
        rebalance_timeout = group.rebalance_timeout_ms
        group.transition_to(_S.PREPARING_REBALANCE)
        log.info(
            "preparing to rebalance group %s with old generation %d (__consumer_offsets-%d): %s",
            group.group_id,
            group.generation_id,
            self.manager.partition_for(group.group_id),
            reason,
        )
        if initial:
            self._install_join_op(
                group,
                delay,
                initial=True,
                configured_delay_ms=delay,
                remaining_ms=max(rebalance_timeout - delay, 0),
            )
        else:
            self._install_join_op(group, rebalance_timeout)
            self.check_join(group)

    def _install_join_op(
        self,
        group: GroupMetadata,
        delay_ms: int,
        *,
        initial: bool = False,
        configured_delay_ms: int = 0,
        remaining_ms: int = 0,
    ) -> None:
        if group.join_op is not None:
            group.join_op.handle.cancel()
        op = _DelayedJoin(_NoTimer(), initial, configured_delay_ms, delay_ms, remaining_ms)
        op.handle = self.clock.call_later(delay_ms, lambda: self._on_join_timer(group, op))
        group.join_op = op

    def check_join(self, group: GroupMetadata) -> None:
        """Kafka's checkAndComplete on the DelayedJoin: done once everyone has rejoined.
        The initial delay is never cut short."""
        op: _DelayedJoin | None = group.join_op
        if op is None or op.initial or not group.is_(_S.PREPARING_REBALANCE):
            return
        if group.has_all_members_joined():
            op.handle.cancel()
            group.join_op = None
            self._on_complete_join(group)

    def _on_join_timer(self, group: GroupMetadata, op: _DelayedJoin) -> None:
        if group.join_op is not op:
            return
        group.join_op = None
        if op.initial and group.new_member_added and op.remaining_ms != 0:
            group.new_member_added = False
            self._install_join_op(
                group,
                min(op.configured_delay_ms, op.remaining_ms),
                initial=True,
                configured_delay_ms=op.configured_delay_ms,
                remaining_ms=max(op.remaining_ms - op.delay_ms, 0),
            )
        else:
            self._on_complete_join(group)

    def _on_complete_join(self, group: GroupMetadata) -> None:
        # Static members that missed the rebalance keep their place; their session timeout
        # decides whether they are gone.
        for member in group.not_yet_rejoined_members():
            if not member.is_static:
                group.remove(member.member_id)
                self.heartbeats.cancel_heartbeat(member)
        if group.is_(_S.DEAD):
            return
        if not group.maybe_elect_new_joined_leader() and group.members:
            log.error("group %s cannot complete its rebalance: nobody rejoined", group.group_id)
            self._install_join_op(group, group.rebalance_timeout_ms)
            self.check_join(group)
            return
        group.init_next_generation()
        if group.is_(_S.EMPTY):
            log.info("group %s generation %d is empty", group.group_id, group.generation_id)
            self.spawn(self._store_empty_group(group, self.manager.store_group(group, {})))
            return
        log.info(
            "stabilized group %s generation %d with %d members",
            group.group_id,
            group.generation_id,
            group.size,
        )
        for member in group.all_member_metadata():
            group.maybe_invoke_join_callback(member, join_result_for(group, member.member_id))
            self.heartbeats.complete_and_schedule_next_heartbeat(group, member)
            member.is_new = False
            group.add_pending_sync_member(member.member_id)
        self._schedule_pending_sync(group)

    async def _store_empty_group(self, group: GroupMetadata, write: Awaitable[ErrorCode]) -> None:
        error = await write
        if error is not ErrorCode.none:
            # No member depends on it: if we fail over first, the previous generation comes
            # back and times out, which is harmless.
            log.warning("could not store empty group %s: %s", group.group_id, error.name)

    # ------------------------------------------------------------------ DelayedSync

    def _schedule_pending_sync(self, group: GroupMetadata) -> None:
        generation = group.generation_id
        group.sync_timer = self.clock.call_later(
            group.rebalance_timeout_ms, lambda: self._on_expire_pending_sync(group, generation)
        )

    def remove_pending_sync_member(self, group: GroupMetadata, member_id: str) -> None:
        group.remove_pending_sync_member(member_id)
        if group.has_received_sync_from_all_members() and group.sync_timer is not None:
            group.sync_timer.cancel()
            group.sync_timer = None

    def _remove_sync_expiration(self, group: GroupMetadata) -> None:
        group.clear_pending_sync_members()
        if group.sync_timer is not None:
            group.sync_timer.cancel()
            group.sync_timer = None

    def _on_expire_pending_sync(self, group: GroupMetadata, generation: int) -> None:
        group.sync_timer = None
        if generation != group.generation_id:
            return
        if group.state not in (_S.COMPLETING_REBALANCE, _S.STABLE):
            return
        if group.has_received_sync_from_all_members():
            return
        pending = sorted(group.pending_sync_members)
        for member_id in pending:
            member = group.remove(member_id)
            if member is not None:
                self.heartbeats.cancel_heartbeat(member)
        self.prepare_rebalance(group, f"members {pending} did not send SyncGroup in time")

    # ------------------------------------------------------------------ answering parked SyncGroups

    def reset_and_propagate_assignment_error(self, group: GroupMetadata, error: ErrorCode) -> None:
        for member in group.all_member_metadata():
            member.assignment = b""
        self.propagate_assignment(group, error)

    def propagate_assignment(self, group: GroupMetadata, error: ErrorCode) -> None:
        ok = error is ErrorCode.none
        for member in group.all_member_metadata():
            result = SyncResult(
                error,
                group.protocol_type if ok else None,
                group.protocol_name if ok else None,
                member.assignment,
            )
            if group.maybe_invoke_sync_callback(member, result):
                # Its session may have run out while it waited for the leader or the store;
                # that expiry was ignored, so start the session clock again.
                self.heartbeats.complete_and_schedule_next_heartbeat(group, member)

    # ------------------------------------------------------------------ members leaving

    def remove_member_and_update_group(self, group: GroupMetadata, member: MemberMetadata) -> None:
        # A new member may still be parked in JoinGroup: tell it to start over.
        group.maybe_invoke_join_callback(
            member, JoinResult.failed(UNKNOWN_MEMBER_ID, ErrorCode.unknown_member_id)
        )
        # Kafka leaves a parked SyncGroup of a removed member unanswered until the client
        # times out; answering at once is kinder and changes nothing else.
        group.maybe_invoke_sync_callback(member, SyncResult(ErrorCode.unknown_member_id))
        self.heartbeats.cancel_heartbeat(member)
        group.remove(member.member_id)
        if group.state in (_S.STABLE, _S.COMPLETING_REBALANCE):
            self.maybe_prepare_rebalance(group, f"member {member.member_id} left or failed")
        elif group.is_(_S.PREPARING_REBALANCE):
            self.check_join(group)

    def remove_pending_member_and_update_group(self, group: GroupMetadata, member_id: str) -> None:
        group.remove(member_id)
        timer = group.pending_member_timers.pop(member_id, None)
        if timer is not None:
            timer.cancel()
        if group.is_(_S.PREPARING_REBALANCE):
            self.check_join(group)

    # ------------------------------------------------------------------ load / unload

    def on_group_loaded(self, group: GroupMetadata) -> None:
        if group.size > self.config.group_max_size:
            # Rebalancing sheds the members over the limit, after they had a chance to commit.
            self.prepare_rebalance(group, "freshly loaded group is over capacity")
        for member in group.all_member_metadata():
            self.heartbeats.complete_and_schedule_next_heartbeat(group, member)

    def on_group_unloaded(self, group: GroupMetadata) -> None:
        previous = group.state
        group.transition_to(_S.DEAD)
        for member in group.all_member_metadata():
            if previous is _S.PREPARING_REBALANCE:
                group.maybe_invoke_join_callback(
                    member, JoinResult.failed(member.member_id, ErrorCode.not_coordinator)
                )
            elif previous in (_S.STABLE, _S.COMPLETING_REBALANCE):
                group.maybe_invoke_sync_callback(member, SyncResult(ErrorCode.not_coordinator))
        self.cancel_group_timers(group)

    def cancel_group_timers(self, group: GroupMetadata) -> None:
        if group.join_op is not None:
            group.join_op.handle.cancel()
            group.join_op = None
        if group.sync_timer is not None:
            group.sync_timer.cancel()
            group.sync_timer = None
        for timer in group.pending_member_timers.values():
            timer.cancel()
        group.pending_member_timers.clear()
        for member in group.all_member_metadata():
            self.heartbeats.cancel_heartbeat(member)
