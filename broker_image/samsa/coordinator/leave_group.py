"""LeaveGroup (Kafka's handleLeaveGroup): members leave by member id, pending members by
theirs, and static members may be removed by group.instance.id alone (KIP-345).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from samsa.coordinator.group import GroupMetadata, GroupState
from samsa.coordinator.rebalance import Rebalancer
from samsa.coordinator.results import (
    UNKNOWN_MEMBER_ID,
    LeaveMemberResult,
    LeaveResult,
    MemberIdentity,
)
from samsa.protocol.errors import ErrorCode

log = logging.getLogger(__name__)

_S = GroupState


def handle_leave(
    rebalancer: Rebalancer, group: GroupMetadata, members: Sequence[MemberIdentity]
) -> LeaveResult:
    """Kafka's handleLeaveGroup, after the group's coordinator status was checked."""
    if group.is_(_S.DEAD):
        return LeaveResult(ErrorCode.coordinator_not_available)
    return LeaveResult(
        ErrorCode.none,
        tuple(
            LeaveMemberResult(m.member_id, m.group_instance_id, _leave_one(rebalancer, group, m))
            for m in members
        ),
    )


def _leave_one(rebalancer: Rebalancer, group: GroupMetadata, identity: MemberIdentity) -> ErrorCode:
    member_id = identity.member_id
    if member_id == UNKNOWN_MEMBER_ID:
        # KIP-345: administrative removal by group.instance.id.
        instance_id = identity.group_instance_id
        current = None if instance_id is None else group.current_static_member_id(instance_id)
        if current is None:
            return ErrorCode.unknown_member_id
        rebalancer.remove_member_and_update_group(group, group.get(current))
        return ErrorCode.none
    if group.is_pending_member(member_id):
        rebalancer.remove_pending_member_and_update_group(group, member_id)
        return ErrorCode.none
    error = group.validate_current_member(member_id, identity.group_instance_id)
    if error is not None:
        return error
    log.info(
        "member %s left group %s: %s",
        member_id,
        group.group_id,
        identity.reason or "not provided",
    )
    rebalancer.remove_member_and_update_group(group, group.get(member_id))
    return ErrorCode.none
