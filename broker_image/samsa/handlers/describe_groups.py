"""DescribeGroups (15): state, protocol and members (with assignments) of groups."""

from __future__ import annotations

from typing import Any

from samsa.coordinator import GroupSummary
from samsa.handlers.authorization import group_allowed, operations
from samsa.handlers.context import BrokerServices, RequestContext
from samsa.handlers.groups import NOT_AVAILABLE, coordinator
from samsa.protocol.errors import ErrorCode
from samsa.security.acl import AclOperation, ResourceType

NOT_REQUESTED = -(2**31)

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
        "authorized_operations": NOT_REQUESTED,
    }


async def handle(services: BrokerServices, ctx: RequestContext, request: Any) -> dict[str, Any]:
    # As Kafka: DESCRIBE on each group, else GROUP_AUTHORIZATION_FAILED for it.
    allowed = [g for g in request.groups if group_allowed(services, ctx, AclOperation.DESCRIBE, g)]
    refused = [
        GroupSummary(g, ErrorCode.group_authorization_failed, "")
        for g in request.groups
        if g not in allowed
    ]
    group_coordinator = coordinator(services)
    if group_coordinator is None:
        summaries = [GroupSummary(g, NOT_AVAILABLE, "") for g in allowed]
    elif allowed:
        summaries = await group_coordinator.describe_groups(allowed, ctx.version)
    else:
        summaries = []
    groups = [_entry(s) for s in [*refused, *summaries]]
    if getattr(request, "include_authorized_operations", False):
        for g in groups:
            if g["error_code"] == ErrorCode.none:
                g["authorized_operations"] = operations(
                    services, ctx, ResourceType.GROUP, g["group_id"]
                )
    return {"throttle_time": 0, "groups": groups}
