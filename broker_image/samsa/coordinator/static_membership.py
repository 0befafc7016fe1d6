"""Static membership (KIP-345): a member with a group.instance.id that rejoins under a new
member id takes its old place, fencing the old id. In a stable group that keeps its protocol
this needs no rebalance: the new member id is persisted, and only then is the member answered
(or, if the write fails, the old id is put back).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Awaitable

from samsa.coordinator.group import GroupMetadata, GroupState
from samsa.coordinator.member import JoinCallback, MemberMetadata
from samsa.coordinator.rebalance import Rebalancer, join_result_for
from samsa.coordinator.results import UNKNOWN_MEMBER_ID, JoinRequest, JoinResult
from samsa.protocol.errors import ErrorCode

log = logging.getLogger(__name__)

_S = GroupState


def update_static_member_and_rebalance(
    rebalancer: Rebalancer,
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
    rebalancer.heartbeats.complete_and_schedule_next_heartbeat(group, member)
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
            write = rebalancer.manager.store_group(group, assignment)
            rebalancer.spawn(
                _persist_static_member(
                    rebalancer,
                    group,
                    req,
                    member,
                    old_member_id,
                    previous,
                    current_leader,
                    write,
                    respond,
                )
            )
        else:
            rebalancer.maybe_prepare_rebalance(
                group, f"static member {instance_id} changed the group's protocol"
            )
    elif group.is_(_S.COMPLETING_REBALANCE):
        # The leader may already be assigning with the old member id: start over.
        rebalancer.prepare_rebalance(group, f"static member {instance_id} rejoined: {req.reason}")


async def _persist_static_member(
    rebalancer: Rebalancer,
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
        rebalancer.heartbeats.complete_and_schedule_next_heartbeat(group, old_member)
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
        result = join_result_for(group, new_member_id, with_members=is_leader)
        group.maybe_invoke_join_callback(
            member,
            dataclasses.replace(result, skip_assignment=is_leader),
        )
    else:
        # Older clients: give the old leader id, so even a returning leader does not run
        # an assignment that a stable group would never hand out.
        result = join_result_for(group, new_member_id, with_members=False)
        group.maybe_invoke_join_callback(
            member, dataclasses.replace(result, leader_id=current_leader or "")
        )
