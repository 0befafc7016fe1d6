"""CreateAcls (30): add ACL bindings (ALTER on the cluster)."""

from __future__ import annotations

from typing import Any

from samsa.handlers.authorization import cluster_allowed
from samsa.handlers.context import BrokerServices, RequestContext
from samsa.protocol.errors import ErrorCode
from samsa.security.acl import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from samsa.security.principal import KafkaPrincipal

KEY = 30
MIN_VERSION, MAX_VERSION = 1, 3  # v0 went in Kafka 4.0 (KIP-896)


def _binding(c: Any) -> AclBinding:
    """The binding asked for, or ValueError naming what is wrong with it."""
    b = AclBinding(
        ResourceType(int(c.resource_type)),
        c.resource_name,
        PatternType(int(getattr(c, "resource_pattern_type", PatternType.LITERAL))),
        c.principal,
        c.host,
        AclOperation(int(c.operation)),
        AclPermissionType(int(c.permission_type)),
    )
    if b.resource_type in (ResourceType.ANY, ResourceType.UNKNOWN):
        raise ValueError("resource type must be a concrete type")
    if b.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        raise ValueError("pattern type must be LITERAL or PREFIXED")
    if b.operation in (AclOperation.ANY, AclOperation.UNKNOWN):
        raise ValueError("operation must be a concrete operation")
    if b.permission not in (AclPermissionType.ALLOW, AclPermissionType.DENY):
        raise ValueError("permission type must be ALLOW or DENY")
    if not b.name:
        raise ValueError("resource name must not be empty")
    if b.resource_type == ResourceType.CLUSTER and b.name != "kafka-cluster":
        raise ValueError("the cluster resource is named kafka-cluster")
    KafkaPrincipal.parse(b.principal)
    return b


async def handle(services: BrokerServices, ctx: RequestContext, request: Any) -> dict[str, Any]:
    results: list[dict[str, Any]] = []
    authorizer = services.authorizer
    if authorizer is None:
        error = (ErrorCode.security_disabled, "No Authorizer is configured on the broker")
        return {
            "throttle_time": 0,
            "results": [
                {"error_code": error[0], "error_message": error[1]} for _ in request.creations
            ],
        }
    if not cluster_allowed(services, ctx, AclOperation.ALTER):
        return {
            "throttle_time": 0,
            "results": [
                {"error_code": ErrorCode.cluster_authorization_failed, "error_message": None}
                for _ in request.creations
            ],
        }
    good: list[AclBinding] = []
    for creation in request.creations:
        try:
            good.append(_binding(creation))
            results.append({"error_code": ErrorCode.none, "error_message": None})
        except ValueError as exc:
            results.append({"error_code": ErrorCode.invalid_request, "error_message": str(exc)})
    await authorizer.create(good)
    return {"throttle_time": 0, "results": results}
