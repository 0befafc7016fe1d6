"""SyncGroup (14): the leader hands out assignments; every member receives its own."""

from __future__ import annotations

from typing import Any

from samsa.coordinator import SyncResult
from samsa.handlers.authorization import group_allowed
from samsa.handlers.context import BrokerServices, RequestContext
from samsa.handlers.groups import NOT_AVAILABLE, coordinator
from samsa.protocol.errors import ErrorCode
from samsa.security.acl import AclOperation

KEY = 14
MIN_VERSION, MAX_VERSION = 0, 5


async def handle(services: BrokerServices, ctx: RequestContext, request: Any) -> dict[str, Any]:
    group_coordinator = coordinator(services)
    if not group_allowed(services, ctx, AclOperation.READ, request.group_id):
        result = SyncResult(ErrorCode.group_authorization_failed)
    elif group_coordinator is None:
        result = SyncResult(NOT_AVAILABLE)
    else:
        result = await group_coordinator.sync_group(
            group_id=request.group_id,
            generation_id=request.generation_id,
            member_id=request.member_id,
            assignments={a.member_id: a.assignment for a in request.assignments},
            group_instance_id=getattr(request, "group_instance_id", None),
            protocol_type=getattr(request, "protocol_type", None),
            protocol_name=getattr(request, "protocol_name", None),
        )
    return {
        "throttle_time": 0,
        "error_code": result.error,
        "protocol_type": result.protocol_type,
        "protocol_name": result.protocol_name,
        "assignment": result.assignment,
    }
