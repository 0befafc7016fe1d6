"""JoinGroup (11): join a group; answered when its rebalance completes."""

from __future__ import annotations

from typing import Any

from samsa.coordinator import JoinResult
from samsa.handlers.authorization import group_allowed
from samsa.handlers.context import BrokerServices, RequestContext
from samsa.handlers.groups import NOT_AVAILABLE, client_host, client_id, coordinator
from samsa.protocol.errors import ErrorCode
from samsa.protocol.messages import ms
from samsa.security.acl import AclOperation

KEY = 11
MIN_VERSION, MAX_VERSION = 0, 9


def _response(ctx: RequestContext, result: Any) -> dict[str, Any]:
    return {
        "throttle_time": 0,
        "error_code": result.error,
        "generation_id": result.generation_id,
        "protocol_type": result.protocol_type,
        # Before v7 the protocol name is not nullable.
        "protocol_name": result.protocol_name if ctx.version >= 7 else result.protocol_name or "",
        "leader": result.leader_id,
        "skip_assignment": result.skip_assignment,
        "member_id": result.member_id,
        "members": [
            {
                "member_id": m.member_id,
                "group_instance_id": m.group_instance_id,
                "metadata": m.metadata,
            }
            for m in result.members
        ],
    }


async def handle(services: BrokerServices, ctx: RequestContext, request: Any) -> dict[str, Any]:
    group_coordinator = coordinator(services)
    if group_coordinator is None:
        return _response(ctx, JoinResult.failed(request.member_id, NOT_AVAILABLE))
    if not group_allowed(services, ctx, AclOperation.READ, request.group_id):
        return _response(
            ctx, JoinResult.failed(request.member_id, ErrorCode.group_authorization_failed)
        )
    session_timeout = ms(request.session_timeout)
    instance_id = getattr(request, "group_instance_id", None)
    result = await group_coordinator.join_group(
        group_id=request.group_id,
        member_id=request.member_id,
        client_id=client_id(ctx),
        client_host=client_host(ctx),
        # v0 has no rebalance timeout: the session timeout stands in, as in Kafka.
        rebalance_timeout_ms=ms(getattr(request, "rebalance_timeout", session_timeout)),
        session_timeout_ms=session_timeout,
        protocol_type=request.protocol_type,
        protocols=[(p.name, p.metadata) for p in request.protocols],
        group_instance_id=instance_id,
        require_known_member_id=ctx.version >= 4 and instance_id is None,
        supports_skip_assignment=ctx.version >= 9,
        reason=getattr(request, "reason", None),
    )
    return _response(ctx, result)
