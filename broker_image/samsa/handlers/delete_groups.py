"""DeleteGroups (42): remove empty groups and their committed offsets."""

from __future__ import annotations

from typing import Any

from samsa.handlers.authorization import group_allowed
from samsa.handlers.context import BrokerServices, RequestContext
from samsa.handlers.groups import NOT_AVAILABLE, coordinator
from samsa.protocol.errors import ErrorCode
from samsa.security.acl import AclOperation

KEY = 42
MIN_VERSION, MAX_VERSION = 0, 2


async def handle(services: BrokerServices, ctx: RequestContext, request: Any) -> dict[str, Any]:
    names = list(request.groups_names)
    allowed = [g for g in names if group_allowed(services, ctx, AclOperation.DELETE, g)]
    errors: dict[str, Any] = {
        g: ErrorCode.group_authorization_failed for g in names if g not in allowed
    }
    group_coordinator = coordinator(services)
    if group_coordinator is None:
        errors |= dict.fromkeys(allowed, NOT_AVAILABLE)
    elif allowed:
        errors |= await group_coordinator.delete_groups(allowed)
    return {
        "throttle_time": 0,
        "results": [{"group_id": g, "error_code": errors[g]} for g in dict.fromkeys(names)],
    }
