"""LeaveGroup (13): members leave at once, one (v0-v2) or a batch (v3+, KIP-345)."""

from __future__ import annotations

from typing import Any

from samsa.coordinator import LeaveResult, MemberIdentity
from samsa.handlers.authorization import group_allowed
from samsa.handlers.context import BrokerServices, RequestContext
from samsa.handlers.groups import NOT_AVAILABLE, coordinator
from samsa.protocol.errors import ErrorCode
from samsa.security.acl import AclOperation

KEY = 13
MIN_VERSION, MAX_VERSION = 0, 5
FIRST_BATCHED = 3


async def handle(services: BrokerServices, ctx: RequestContext, request: Any) -> dict[str, Any]:
    if ctx.version >= FIRST_BATCHED:
        members = [
            MemberIdentity(m.member_id, m.group_instance_id, getattr(m, "reason", None))
            for m in request.members
        ]
    else:
        members = [MemberIdentity(request.member_id)]
    group_coordinator = coordinator(services)
    if not group_allowed(services, ctx, AclOperation.READ, request.group_id):
        result = LeaveResult(ErrorCode.group_authorization_failed)
    elif group_coordinator is None:
        result = LeaveResult(NOT_AVAILABLE)
    else:
        result = await group_coordinator.leave_group(request.group_id, members)
    error = result.error
    if ctx.version < FIRST_BATCHED and error == 0 and result.members:
        # One member, and no per-member field to carry its error: it is the top-level one.
        error = result.members[0].error
    return {
        "throttle_time": 0,
        "error_code": error,
        "members": [
            {
                "member_id": m.member_id,
                "group_instance_id": m.group_instance_id,
                "error_code": m.error,
            }
            for m in result.members
        ],
    }
