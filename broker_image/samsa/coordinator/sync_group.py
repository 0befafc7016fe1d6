"""SyncGroup (Kafka's handleSyncGroup): members park until the leader's assignment is stored,
then each gets its own; in a stable group a member gets its assignment at once.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable

from samsa.coordinator.group import GroupMetadata, GroupState
from samsa.coordinator.member import SyncCallback
from samsa.coordinator.rebalance import Rebalancer
from samsa.coordinator.results import SyncResult
from samsa.protocol.errors import ErrorCode

log = logging.getLogger(__name__)

_S = GroupState


def handle_sync(
    rebalancer: Rebalancer,
    group: GroupMetadata,
    generation_id: int,
    member_id: str,
    protocol_type: str | None,
    protocol_name: str | None,
    group_instance_id: str | None,
    assignments: dict[str, bytes],
    respond: SyncCallback,
) -> None:
    """Kafka's handleSyncGroup, after the group's coordinator status was checked."""
    if group.is_(_S.DEAD):
        respond(SyncResult(ErrorCode.coordinator_not_available))
        return
    error = group.validate_current_member(member_id, group_instance_id)
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
        rebalancer.remove_pending_sync_member(group, member_id)
        if group.is_leader(member_id):
            log.info(
                "assignment from leader %s of group %s for generation %d",
                member_id,
                group.group_id,
                group.generation_id,
            )
            for missing in group.all_members():
                assignments.setdefault(missing, b"")
            write = rebalancer.manager.store_group(group, assignments)
            rebalancer.spawn(
                _store_leader_assignment(rebalancer, group, group.generation_id, assignments, write)
            )
    else:
        member = group.get(member_id)
        rebalancer.remove_pending_sync_member(group, member_id)
        respond(
            SyncResult(ErrorCode.none, group.protocol_type, group.protocol_name, member.assignment)
        )
        rebalancer.heartbeats.complete_and_schedule_next_heartbeat(group, member)


async def _store_leader_assignment(
    rebalancer: Rebalancer,
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
        rebalancer.reset_and_propagate_assignment_error(group, error)
        rebalancer.maybe_prepare_rebalance(group, f"storing the assignment failed: {error.name}")
    else:
        for member in group.all_member_metadata():
            member.assignment = assignment.get(member.member_id, b"")
        rebalancer.propagate_assignment(group, ErrorCode.none)
        group.transition_to(_S.STABLE)
