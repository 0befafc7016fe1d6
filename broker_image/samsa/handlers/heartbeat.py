"""Heartbeat (12): a member is alive; the answer tells it when to rejoin."""

from __future__ import annotations

from typing import Any

from samsa.handlers.authorization import group_allowed
from samsa.handlers.context import BrokerServices, RequestContext
from samsa.handlers.groups import NOT_AVAILABLE, coordinator
from samsa.protocol.errors import ErrorCode
from samsa.security.acl import AclOperation

KEY = 12
MIN_VERSION, MAX_VERSION = 0, 4


async def handle(services: BrokerServices, ctx: RequestContext, request: Any) -> dict[str, Any]:
    group_coordinator = coordinator(services)
    if not group_allowed(services, ctx, AclOperation.READ, request.group_id):
        error = ErrorCode.group_authorization_failed
    elif group_coordinator is None:
        error = NOT_AVAILABLE
    else:
        error = await group_coordinator.heartbeat(
            request.group_id,
            request.generation_id,
            request.member_id,
            getattr(request, "group_instance_id", None),
        )
    return {"throttle_time": 0, "error_code": error}
