"""ListGroups (16): the groups this broker coordinates, filtered by state (v4+) and type (v5+)."""

from __future__ import annotations

from typing import Any

from samsa.coordinator import ListGroupsResult
from samsa.handlers.authorization import cluster_allowed, group_allowed
from samsa.handlers.context import BrokerServices, RequestContext
from samsa.handlers.groups import NOT_AVAILABLE, coordinator
from samsa.security.acl import AclOperation

KEY = 16
MIN_VERSION, MAX_VERSION = 0, 5


async def handle(services: BrokerServices, ctx: RequestContext, request: Any) -> dict[str, Any]:
    group_coordinator = coordinator(services)
    if group_coordinator is None:
        result = ListGroupsResult(NOT_AVAILABLE)
    else:
        result = await group_coordinator.list_groups(
            getattr(request, "states_filter", ()) or (),
            getattr(request, "types_filter", ()) or (),
        )
    # As Kafka: every group with DESCRIBE on the cluster, else those the principal may describe.
    everything = cluster_allowed(services, ctx, AclOperation.DESCRIBE)
    shown = [
        g
        for g in result.groups
        if everything or group_allowed(services, ctx, AclOperation.DESCRIBE, g.group_id)
    ]
    return {
        "throttle_time": 0,
        "error_code": result.error,
        "groups": [
            {
                "group_id": g.group_id,
                "protocol_type": g.protocol_type,
                "group_state": g.state,
                "group_type": g.group_type,
            }
            for g in shown
        ],
    }
