"""The classic rebalance protocol: JoinGroup, SyncGroup, Heartbeat and LeaveGroup on a group
that the GroupCoordinator has already found, and the timers that stand in for Kafka's delayed
operations:

- DelayedJoin: completes when every member has rejoined, or at the rebalance timeout (the
  largest rebalance.timeout.ms of the members), when dynamic members that did not rejoin are
  dropped (static members stay until their session ends);
- InitialDelayedJoin (KIP-134): the first rebalance of an empty group waits
  group.initial.rebalance.delay.ms, extended while new members keep arriving, up to the
  rebalance timeout;
- DelayedSync: members that do not send SyncGroup within the rebalance timeout are dropped;
- DelayedHeartbeat: a member silent for session.timeout.ms is dropped (5 minutes for a new
  member still waiting for its first JoinGroup answer), and so is a KIP-394 pending member
  that does not come back with its member id.

Everything here runs synchronously on the event loop; parked requests are answered through
the callbacks kept on each member.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from samsa.coordinator.config import GroupCoordinatorConfig
from samsa.coordinator.group import GroupMetadata, GroupState
from samsa.coordinator.group_metadata_manager import GroupMetadataManager
from samsa.coordinator.member import JoinCallback, MemberMetadata, SyncCallback
from samsa.coordinator.results import (
    UNKNOWN_MEMBER_ID,
    JoinResult,
    LeaveMemberResult,
    LeaveResult,
    MemberIdentity,
    SyncResult,
)
from samsa.coordinator.timers import Clock, TimerHandle
from samsa.protocol.errors import ErrorCode

log = logging.getLogger(__name__)

# Kafka's GroupCoordinator.NewMemberJoinTimeoutMs.
NEW_MEMBER_JOIN_TIMEOUT_MS = 5 * 60 * 1000

_S = GroupState


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


class GroupMembership:
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
        self._spawn = spawn

    # ================================================================== JoinGroup

    def handle_join(self, req: JoinRequest, respond: JoinCallback) -> None:
        """Kafka's handleJoinGroup, after the group's coordinator status was checked."""
        if not (
            self.config.group_min_session_timeout_ms
            <= req.session_timeout_ms
            <= self.config.group_max_session_timeout_ms
        ):
            respond(JoinResult.failed(req.member_id, ErrorCode.invalid_session_timeout))
            return
        is_unknown_member = req.member_id == UNKNOWN_MEMBER_ID
        group = self.manager.get_or_maybe_create_group(req.group_id, is_unknown_member)
        if group is None:
            respond(JoinResult.failed(req.member_id, ErrorCode.unknown_member_id))
            return
        if not self._accept_joining_member(group, req.member_id) or not self._storable_with(
            group, req
        ):
            dropped = group.remove(req.member_id)
            if dropped is not None:
                self.cancel_heartbeat(dropped)
            respond(JoinResult.failed(UNKNOWN_MEMBER_ID, ErrorCode.group_max_size_reached))
        elif is_unknown_member:
            self._new_member_join(group, req, respond)
        else:
            self._current_member_join(group, req, respond)
        if group.is_(_S.PREPARING_REBALANCE):
            self._check_join(group)

    def _accept_joining_member(self, group: GroupMetadata, member_id: str) -> bool:
        """group.max.size. During a rebalance count only those who rejoined, so that if the
        limit was lowered the last to rejoin are the ones turned away."""
        max_size = self.config.group_max_size
        if group.state in (_S.EMPTY, _S.DEAD):
            return True
        if group.is_(_S.PREPARING_REBALANCE):
            rejoined = group.has(member_id) and group.get(member_id).is_awaiting_join
            return rejoined or group.num_awaiting < max_size
        return group.has(member_id) or group.size < max_size

    def _storable_with(self, group: GroupMetadata, req: JoinRequest) -> bool:
        """Whether the group's metadata record could still be stored with this member in it.

        Not in Kafka, which lets such a group form and then fails every SyncGroup with
        UNKNOWN_SERVER_ERROR (the record is over message.max.bytes), so that its members
        rejoin and fail forever.  Here the member that cannot fit is turned away at once,
        with GROUP_MAX_SIZE_REACHED, and the others go on.  The size counted is a lower bound
        of the record's (each member's smallest protocol metadata and its ids, no
        assignments), so no group that Kafka could store is refused.
        """

        def least(ids: Sequence[str | None], protocols: Sequence[tuple[str, bytes]]) -> int:
            return sum(len(i or "") for i in ids) + min((len(m) for _, m in protocols), default=0)

        total = least(
            (req.member_id, req.group_instance_id, req.client_id, req.client_host), req.protocols
        )
        for m in group.all_member_metadata():
            replaced = m.member_id == req.member_id or (
                req.group_instance_id is not None and m.group_instance_id == req.group_instance_id
            )
            if not replaced:
                ids = (m.member_id, m.group_instance_id, m.client_id, m.client_host)
                total += least(ids, m.supported_protocols)
        return total <= self.config.max_message_bytes

    def _new_member_join(
        self, group: GroupMetadata, req: JoinRequest, respond: JoinCallback
    ) -> None:
        if group.is_(_S.DEAD):
            # The group was just removed (unloaded or deleted): let the member find the
            # coordinator again and rejoin.
            respond(JoinResult.failed(UNKNOWN_MEMBER_ID, ErrorCode.coordinator_not_available))
            return
        if not group.supports_protocols(req.protocol_type, req.protocol_names):
            respond(JoinResult.failed(UNKNOWN_MEMBER_ID, ErrorCode.inconsistent_group_protocol))
            return
        new_member_id = group.generate_member_id(req.client_id, req.group_instance_id)
        if req.group_instance_id is not None:
            old_member_id = group.current_static_member_id(req.group_instance_id)
            if old_member_id is not None:
                self._update_static_member_and_rebalance(
                    group, req, old_member_id, new_member_id, respond
                )
            else:
                self._add_member_and_rebalance(group, req, new_member_id, respond)
        elif req.require_known_member_id:
            # KIP-394: hand out the id and make the client come back with it, so a client
            # that times out and retries does not leave a ghost member behind.
            group.add_pending_member(new_member_id)
            self._add_pending_member_expiration(group, new_member_id, req.session_timeout_ms)
            respond(JoinResult.failed(new_member_id, ErrorCode.member_id_required))
        else:
            self._add_member_and_rebalance(group, req, new_member_id, respond)

    def validate_current_member(
        self, group: GroupMetadata, member_id: str, group_instance_id: str | None
    ) -> ErrorCode | None:
        """A static member's instance id must map to this member id (else it is fenced);
        any member must be known."""
        if group_instance_id is not None:
            current = group.current_static_member_id(group_instance_id)
            if current is None:
                return ErrorCode.unknown_member_id
            if current != member_id:
                return ErrorCode.fenced_instance_id
        if not group.has(member_id):
            return ErrorCode.unknown_member_id
        return None

    def _current_member_join(
        self, group: GroupMetadata, req: JoinRequest, respond: JoinCallback
    ) -> None:
        member_id = req.member_id
        if group.is_(_S.DEAD):
            respond(JoinResult.failed(member_id, ErrorCode.coordinator_not_available))
            return
        if not group.supports_protocols(req.protocol_type, req.protocol_names):
            respond(JoinResult.failed(member_id, ErrorCode.inconsistent_group_protocol))
            return
        if group.is_pending_member(member_id):
            if req.group_instance_id is not None:
                # Pending ids only go to dynamic members; Kafka fails this with an internal
                # error.
                respond(JoinResult.failed(member_id, ErrorCode.unknown_server_error))
                return
            self._add_member_and_rebalance(group, req, member_id, respond)
            return
        error = self.validate_current_member(group, member_id, req.group_instance_id)
        if error is not None:
            respond(JoinResult.failed(member_id, error))
            return
        member = group.get(member_id)
        if group.is_(_S.PREPARING_REBALANCE):
            self._update_member_and_rebalance(group, member, req, respond)
        elif group.is_(_S.COMPLETING_REBALANCE):
            if member.matches(req.protocols):
                # Probably a retry after a lost JoinGroup answer: give this generation again.
                respond(self._join_result_for(group, member_id))
            else:
                self._update_member_and_rebalance(group, member, req, respond)
        elif group.is_(_S.STABLE):
            if group.is_leader(member_id) or not member.matches(req.protocols):
                # A leader's JoinGroup forces a rebalance: that is how it reacts to changes
                # (new partitions, say) that do not show in its own metadata.
                self._update_member_and_rebalance(group, member, req, respond)
            else:
                respond(self._join_result_for(group, member_id, with_members=False))
        else:
            respond(JoinResult.failed(member_id, ErrorCode.unknown_member_id))

    def _join_result_for(
        self, group: GroupMetadata, member_id: str, with_members: bool = True
    ) -> JoinResult:
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

    def _add_member_and_rebalance(
        self, group: GroupMetadata, req: JoinRequest, member_id: str, respond: JoinCallback
    ) -> None:
        member = MemberMetadata(
            member_id,
            req.group_instance_id,
            req.client_id,
            req.client_host,
            req.rebalance_timeout_ms,
            req.session_timeout_ms,
            req.protocol_type,
            req.protocols,
        )
        member.is_new = True
        if group.is_(_S.PREPARING_REBALANCE) and group.generation_id == 0:
            group.new_member_added = True
        pending_timer = group.pending_member_timers.pop(member_id, None)
        if pending_timer is not None:
            pending_timer.cancel()
        group.add(member, respond)
        # A new member cannot heartbeat before its first JoinGroup answer, and a client that
        # gave up and retried would leave it behind: expire it after a long timeout.
        self._schedule_expiration(group, member, NEW_MEMBER_JOIN_TIMEOUT_MS)
        self._maybe_prepare_rebalance(
            group, f"adding member {member_id} (instance {req.group_instance_id}): {req.reason}"
        )

    def _update_member_and_rebalance(
        self, group: GroupMetadata, member: MemberMetadata, req: JoinRequest, respond: JoinCallback
    ) -> None:
        group.update_member(
            member, req.protocols, req.rebalance_timeout_ms, req.session_timeout_ms, respond
        )
        self._maybe_prepare_rebalance(group, f"member {member.member_id} rejoined: {req.reason}")

    # ------------------------------------------------------------------ static members

    def _update_static_member_and_rebalance(
        self,
        group: GroupMetadata,
        req: JoinRequest,
        old_member_id: str,
        new_member_id: str,
        respond: JoinCallback,
    ) -> None:
        instance_id = req.group_instance_id
        assert instance_id is not None
        current_leader = group.leader_id
        member = group.replace_static_member(instance_id, old_member_id, new_member_id)
        self.complete_and_schedule_next_heartbeat(group, member)
        previous = (
            list(member.supported_protocols),
            member.rebalance_timeout_ms,
            member.session_timeout_ms,
        )
        group.update_member(
            member, req.protocols, req.rebalance_timeout_ms, req.session_timeout_ms, respond
        )
        if group.is_(_S.STABLE):
            if group.protocol_name == group.select_protocol():
                # KIP-345: a restarted static member takes its old place without a rebalance;
                # only its new member id needs persisting.
                assignment = {m.member_id: m.assignment for m in group.all_member_metadata()}
                write = self.manager.store_group(group, assignment)
                self._spawn(
                    self._persist_static_member(
                        group, req, member, old_member_id, previous, current_leader, write, respond
                    )
                )
            else:
                self._maybe_prepare_rebalance(
                    group, f"static member {instance_id} changed the group's protocol"
                )
        elif group.is_(_S.COMPLETING_REBALANCE):
            # The leader may already be assigning with the old member id: start over.
            self._prepare_rebalance(group, f"static member {instance_id} rejoined: {req.reason}")

    async def _persist_static_member(
        self,
        group: GroupMetadata,
        req: JoinRequest,
        member: MemberMetadata,
        old_member_id: str,
        previous: tuple[list[tuple[str, bytes]], int, int],
        current_leader: str | None,
        write: Awaitable[ErrorCode],
        respond: JoinCallback,
    ) -> None:
        error = await write
        instance_id = req.group_instance_id
        assert instance_id is not None
        new_member_id = member.member_id
        if group.is_(_S.DEAD):
            respond(JoinResult.failed(UNKNOWN_MEMBER_ID, ErrorCode.not_coordinator))
            return
        if group.members.get(new_member_id) is not member or not group.is_(_S.STABLE):
            # The member was removed or fenced meanwhile (and told so), or a rebalance began,
            # which will answer its parked JoinGroup with the next generation.
            return
        if error is not ErrorCode.none:
            log.warning(
                "could not persist static member %s of group %s: %s",
                instance_id,
                group.group_id,
                error.name,
            )
            # Put the old member id back, so the previous instance is not fenced for nothing.
            protocols, rebalance_timeout_ms, session_timeout_ms = previous
            group.update_member(member, protocols, rebalance_timeout_ms, session_timeout_ms, None)
            old_member = group.replace_static_member(instance_id, new_member_id, old_member_id)
            self.complete_and_schedule_next_heartbeat(group, old_member)
            respond(
                JoinResult(
                    error=error,
                    member_id=UNKNOWN_MEMBER_ID,
                    generation_id=group.generation_id,
                    protocol_type=group.protocol_type,
                    protocol_name=group.protocol_name,
                    leader_id=current_leader or "",
                )
            )
        elif req.supports_skip_assignment:
            # JoinGroup v9+: a returning static leader learns it leads but skips the assignor
            # (a stable group would ignore the result) and keeps watching metadata.
            is_leader = group.is_leader(new_member_id)
            result = self._join_result_for(group, new_member_id, with_members=is_leader)
            group.maybe_invoke_join_callback(
                member,
                dataclasses.replace(result, skip_assignment=is_leader),
            )
        else:
            # Older clients: give the old leader id, so even a returning leader does not run
            # an assignment that a stable group would never hand out.
            result = self._join_result_for(group, new_member_id, with_members=False)
            group.maybe_invoke_join_callback(
                member, dataclasses.replace(result, leader_id=current_leader or "")
            )

    # ================================================================== rebalance

    def _maybe_prepare_rebalance(self, group: GroupMetadata, reason: str) -> None:
        if group.can_rebalance():
            self._prepare_rebalance(group, reason)

    def _prepare_rebalance(self, group: GroupMetadata, reason: str) -> None:
        if group.is_(_S.COMPLETING_REBALANCE):
            self._reset_and_propagate_assignment_error(group, ErrorCode.rebalance_in_progress)
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
            self._check_join(group)

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

    def _check_join(self, group: GroupMetadata) -> None:
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
                self.cancel_heartbeat(member)
        if group.is_(_S.DEAD):
            return
        if not group.maybe_elect_new_joined_leader() and group.members:
            log.error("group %s cannot complete its rebalance: nobody rejoined", group.group_id)
            self._install_join_op(group, group.rebalance_timeout_ms)
            self._check_join(group)
            return
        group.init_next_generation()
        if group.is_(_S.EMPTY):
            log.info("group %s generation %d is empty", group.group_id, group.generation_id)
            self._spawn(self._store_empty_group(group, self.manager.store_group(group, {})))
            return
        log.info(
            "stabilized group %s generation %d with %d members",
            group.group_id,
            group.generation_id,
            group.size,
        )
        for member in group.all_member_metadata():
            group.maybe_invoke_join_callback(member, self._join_result_for(group, member.member_id))
            self.complete_and_schedule_next_heartbeat(group, member)
            member.is_new = False
            group.add_pending_sync_member(member.member_id)
        self._schedule_pending_sync(group)

    async def _store_empty_group(self, group: GroupMetadata, write: Awaitable[ErrorCode]) -> None:
        error = await write
        if error is not ErrorCode.none:
            # No member depends on it: if we fail over first, the previous generation comes
            # back and times out, which is harmless.
            log.warning("could not store empty group %s: %s", group.group_id, error.name)

    # ------------------------------------------------------------------ pending syncs

    def _schedule_pending_sync(self, group: GroupMetadata) -> None:
        generation = group.generation_id
        group.sync_timer = self.clock.call_later(
            group.rebalance_timeout_ms, lambda: self._on_expire_pending_sync(group, generation)
        )

    def _remove_pending_sync_member(self, group: GroupMetadata, member_id: str) -> None:
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
                self.cancel_heartbeat(member)
        self._prepare_rebalance(group, f"members {pending} did not send SyncGroup in time")

    # ================================================================== SyncGroup

    def handle_sync(
        self,
        group: GroupMetadata,
        generation_id: int,
        member_id: str,
        protocol_type: str | None,
        protocol_name: str | None,
        group_instance_id: str | None,
        assignments: dict[str, bytes],
        respond: SyncCallback,
    ) -> None:
        if group.is_(_S.DEAD):
            respond(SyncResult(ErrorCode.coordinator_not_available))
            return
        error = self.validate_current_member(group, member_id, group_instance_id)
        if error is None:
            if generation_id != group.generation_id:
                error = ErrorCode.illegal_generation
            elif (protocol_type is not None and group.protocol_type != protocol_type) or (
                protocol_name is not None and group.protocol_name != protocol_name
            ):
                error = ErrorCode.inconsistent_group_protocol
        if error is not None:
            respond(SyncResult(error))
        elif group.is_(_S.EMPTY):
            respond(SyncResult(ErrorCode.unknown_member_id))
        elif group.is_(_S.PREPARING_REBALANCE):
            respond(SyncResult(ErrorCode.rebalance_in_progress))
        elif group.is_(_S.COMPLETING_REBALANCE):
            group.get(member_id).awaiting_sync = respond
            self._remove_pending_sync_member(group, member_id)
            if group.is_leader(member_id):
                log.info(
                    "assignment from leader %s of group %s for generation %d",
                    member_id,
                    group.group_id,
                    group.generation_id,
                )
                for missing in group.all_members():
                    assignments.setdefault(missing, b"")
                write = self.manager.store_group(group, assignments)
                self._spawn(
                    self._store_leader_assignment(group, group.generation_id, assignments, write)
                )
        else:
            member = group.get(member_id)
            self._remove_pending_sync_member(group, member_id)
            respond(
                SyncResult(
                    ErrorCode.none, group.protocol_type, group.protocol_name, member.assignment
                )
            )
            self.complete_and_schedule_next_heartbeat(group, member)

    async def _store_leader_assignment(
        self,
        group: GroupMetadata,
        generation_id: int,
        assignment: dict[str, bytes],
        write: Awaitable[ErrorCode],
    ) -> None:
        error = await write
        # Someone may have joined or left while the write was in flight; then this
        # generation's assignment no longer matters.
        if not (group.is_(_S.COMPLETING_REBALANCE) and group.generation_id == generation_id):
            return
        if error is not ErrorCode.none:
            self._reset_and_propagate_assignment_error(group, error)
            self._maybe_prepare_rebalance(group, f"storing the assignment failed: {error.name}")
        else:
            for member in group.all_member_metadata():
                member.assignment = assignment.get(member.member_id, b"")
            self._propagate_assignment(group, ErrorCode.none)
            group.transition_to(_S.STABLE)

    def _reset_and_propagate_assignment_error(self, group: GroupMetadata, error: ErrorCode) -> None:
        for member in group.all_member_metadata():
            member.assignment = b""
        self._propagate_assignment(group, error)

    def _propagate_assignment(self, group: GroupMetadata, error: ErrorCode) -> None:
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
                self.complete_and_schedule_next_heartbeat(group, member)

    # ================================================================== Heartbeat

    def handle_heartbeat(
        self,
        group: GroupMetadata,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
    ) -> ErrorCode:
        if group.is_(_S.DEAD):
            return ErrorCode.coordinator_not_available
        error = self.validate_current_member(group, member_id, group_instance_id)
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
        self._schedule_expiration(group, member, member.session_timeout_ms)

    def _schedule_expiration(
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
        self._remove_member_and_update_group(group, member)

    def _add_pending_member_expiration(
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
        self._remove_pending_member_and_update_group(group, member_id)

    def _remove_member_and_update_group(self, group: GroupMetadata, member: MemberMetadata) -> None:
        # A new member may still be parked in JoinGroup: tell it to start over.
        group.maybe_invoke_join_callback(
            member, JoinResult.failed(UNKNOWN_MEMBER_ID, ErrorCode.unknown_member_id)
        )
        # Kafka leaves a parked SyncGroup of a removed member unanswered until the client
        # times out; answering at once is kinder and changes nothing else.
        group.maybe_invoke_sync_callback(member, SyncResult(ErrorCode.unknown_member_id))
        self.cancel_heartbeat(member)
        group.remove(member.member_id)
        if group.state in (_S.STABLE, _S.COMPLETING_REBALANCE):
            self._maybe_prepare_rebalance(group, f"member {member.member_id} left or failed")
        elif group.is_(_S.PREPARING_REBALANCE):
            self._check_join(group)

    def _remove_pending_member_and_update_group(self, group: GroupMetadata, member_id: str) -> None:
        group.remove(member_id)
        timer = group.pending_member_timers.pop(member_id, None)
        if timer is not None:
            timer.cancel()
        if group.is_(_S.PREPARING_REBALANCE):
            self._check_join(group)

    # ================================================================== LeaveGroup

    def handle_leave(self, group: GroupMetadata, members: Sequence[MemberIdentity]) -> LeaveResult:
        if group.is_(_S.DEAD):
            return LeaveResult(ErrorCode.coordinator_not_available)
        return LeaveResult(
            ErrorCode.none,
            tuple(
                LeaveMemberResult(m.member_id, m.group_instance_id, self._leave_one(group, m))
                for m in members
            ),
        )

    def _leave_one(self, group: GroupMetadata, identity: MemberIdentity) -> ErrorCode:
        member_id = identity.member_id
        if member_id == UNKNOWN_MEMBER_ID:
            # KIP-345: administrative removal by group.instance.id.
            instance_id = identity.group_instance_id
            current = None if instance_id is None else group.current_static_member_id(instance_id)
            if current is None:
                return ErrorCode.unknown_member_id
            self._remove_member_and_update_group(group, group.get(current))
            return ErrorCode.none
        if group.is_pending_member(member_id):
            self._remove_pending_member_and_update_group(group, member_id)
            return ErrorCode.none
        error = self.validate_current_member(group, member_id, identity.group_instance_id)
        if error is not None:
            return error
        log.info(
            "member %s left group %s: %s",
            member_id,
            group.group_id,
            identity.reason or "not provided",
        )
        self._remove_member_and_update_group(group, group.get(member_id))
        return ErrorCode.none

    # ================================================================== load / unload

    def on_group_loaded(self, group: GroupMetadata) -> None:
        if group.size > self.config.group_max_size:
            # Rebalancing sheds the members over the limit, after they had a chance to commit.
            self._prepare_rebalance(group, "freshly loaded group is over capacity")
        for member in group.all_member_metadata():
            self.complete_and_schedule_next_heartbeat(group, member)

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
            self.cancel_heartbeat(member)
