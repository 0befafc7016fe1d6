"""DescribeGroups (15): state, protocol and members (with assignments) of groups."""

from __future__ import annotations

from typing import Any

from samsa.coordinator import GroupSummary
from samsa.handlers import authorized
from samsa.handlers.context import BrokerServices, RequestContext
from samsa.handlers.groups import NOT_AVAILABLE, coordinator
from samsa.protocol.errors import ErrorCode

KEY = 15
MIN_VERSION, MAX_VERSION = 0, 6


def _entry(summary: GroupSummary) -> dict[str, Any]:
    return {
        "error_code": summary.error,
        "error_message": summary.error_message,
        "group_id": summary.group_id,
        "group_state": summary.state,
        "protocol_type": summary.protocol_type,
        "protocol_data": summary.protocol,
        "members": [
            {
                "member_id": m.member_id,
                "group_instance_id": m.group_instance_id,
                "client_id": m.client_id,
                "client_host": m.client_host,
                "member_metadata": m.metadata,
                "member_assignment": m.assignment,
            }
            for m in summary.members
        ],
        "authorized_operations": authorized.NOT_REQUESTED,
    }


async def handle(services: BrokerServices, ctx: RequestContext, request: Any) -> dict[str, Any]:
    group_coordinator = coordinator(services)
    if group_coordinator is None:
        summaries = [GroupSummary(g, NOT_AVAILABLE, "") for g in request.groups]
    else:
        summaries = await group_coordinator.describe_groups(request.groups, ctx.version)
    groups = [_entry(s) for s in summaries]
    for g in groups:
        if g["error_code"] == ErrorCode.none:
            g["authorized_operations"] = authorized.operations(
                getattr(request, "include_authorized_operations", False), authorized.GROUP
            )
    return {"throttle_time": 0, "groups": groups}
