"""DescribeAcls (29): the ACL bindings a filter matches, grouped by resource (DESCRIBE on the
cluster)."""

from __future__ import annotations

from typing import Any

from samsa.handlers.authorization import acl_filter, cluster_allowed
from samsa.handlers.context import BrokerServices, RequestContext
from samsa.protocol.errors import ErrorCode
from samsa.security.acl import AclOperation

KEY = 29
MIN_VERSION, MAX_VERSION = 1, 3  # v0 went in Kafka 4.0 (KIP-896)


def handle(services: BrokerServices, ctx: RequestContext, request: Any) -> dict[str, Any]:
    def error(code: ErrorCode, message: str | None) -> dict[str, Any]:
        return {"throttle_time": 0, "error_code": code, "error_message": message, "resources": []}

    authorizer = services.authorizer
    if authorizer is None:
        return error(ErrorCode.security_disabled, "No Authorizer is configured on the broker")
    if not cluster_allowed(services, ctx, AclOperation.DESCRIBE):
        return error(ErrorCode.cluster_authorization_failed, "Cluster authorization failed.")
    resources: dict[tuple[int, str, int], list[dict[str, Any]]] = {}
    for b in authorizer.describe(acl_filter(request, ctx.version)):
        resources.setdefault((int(b.resource_type), b.name, int(b.pattern_type)), []).append(
            {
                "principal": b.principal,
                "host": b.host,
                "operation": int(b.operation),
                "permission_type": int(b.permission),
            }
        )
    return {
        "throttle_time": 0,
        "error_code": ErrorCode.none,
        "error_message": None,
        "resources": [
            {"resource_type": t, "resource_name": n, "pattern_type": p, "acls": acls}
            for (t, n, p), acls in resources.items()
        ],
    }
