"""DeleteGroups (42): remove empty groups and their committed offsets."""

from __future__ import annotations

from typing import Any

from samsa.handlers.context import BrokerServices, RequestContext
from samsa.handlers.groups import NOT_AVAILABLE, coordinator

KEY = 42
MIN_VERSION, MAX_VERSION = 0, 2


async def handle(services: BrokerServices, ctx: RequestContext, request: Any) -> dict[str, Any]:
    names = list(request.groups_names)
    group_coordinator = coordinator(services)
    if group_coordinator is None:
        errors = dict.fromkeys(names, NOT_AVAILABLE)
    else:
        errors = await group_coordinator.delete_groups(names)
    return {
        "throttle_time": 0,
        "results": [{"group_id": g, "error_code": errors[g]} for g in dict.fromkeys(names)],
    }
