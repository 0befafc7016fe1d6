"""DeleteAcls (31): remove the ACL bindings each filter matches (ALTER on the cluster)."""

from __future__ import annotations

from typing import Any

from samsa.handlers.authorization import acl_filter, binding_fields, cluster_allowed
from samsa.handlers.context import BrokerServices, RequestContext
from samsa.protocol.errors import ErrorCode
from samsa.security.acl import AclOperation

KEY = 31
MIN_VERSION, MAX_VERSION = 1, 3  # v0 went in Kafka 4.0 (KIP-896)


async def handle(services: BrokerServices, ctx: RequestContext, request: Any) -> dict[str, Any]:
    def failed(code: ErrorCode, message: str | None) -> dict[str, Any]:
        return {
            "throttle_time": 0,
            "filter_results": [
                {"error_code": code, "error_message": message, "matching_acls": []}
                for _ in request.filters
            ],
        }

    authorizer = services.authorizer
    if authorizer is None:
        return failed(ErrorCode.security_disabled, "No Authorizer is configured on the broker")
    if not cluster_allowed(services, ctx, AclOperation.ALTER):
        return failed(ErrorCode.cluster_authorization_failed, None)
    matched = await authorizer.delete([acl_filter(f, ctx.version) for f in request.filters])
    return {
        "throttle_time": 0,
        "filter_results": [
            {
                "error_code": ErrorCode.none,
                "error_message": None,
                "matching_acls": [
                    {"error_code": ErrorCode.none, "error_message": None, **binding_fields(b)}
                    for b in found
                ],
            }
            for found in matched
        ],
    }
