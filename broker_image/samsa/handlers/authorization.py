"""What handlers ask the authorizer: may this request's principal do an operation on a
resource. Every answer is yes when no authorizer is configured."""

from __future__ import annotations

from typing import Any

from samsa.handlers import authorized_operations
from samsa.handlers.context import BrokerServices, RequestContext
from samsa.security.acl import (
    CLUSTER_NAME,
    AclBinding,
    AclFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from samsa.security.session import ConnectionSession

NOT_PROVIDED = -(2**31)
_ANONYMOUS_SESSION = ConnectionSession()


def _session(ctx: RequestContext) -> ConnectionSession:
    return getattr(ctx.conn, "session", None) or _ANONYMOUS_SESSION


def _host(ctx: RequestContext) -> str:
    return ctx.conn.peer.rsplit(":", 1)[0]


def allowed(
    services: BrokerServices,
    ctx: RequestContext,
    op: AclOperation,
    rtype: ResourceType,
    name: str = CLUSTER_NAME,
) -> bool:
    authorizer = services.authorizer
    if authorizer is None:
        return True
    return authorizer.allowed(_session(ctx), _host(ctx), op, rtype, name)


def topic_allowed(
    services: BrokerServices, ctx: RequestContext, op: AclOperation, topic: str
) -> bool:
    return allowed(services, ctx, op, ResourceType.TOPIC, topic)


def group_allowed(
    services: BrokerServices, ctx: RequestContext, op: AclOperation, group: str
) -> bool:
    return allowed(services, ctx, op, ResourceType.GROUP, group)


def transactional_id_allowed(
    services: BrokerServices, ctx: RequestContext, op: AclOperation, transactional_id: str
) -> bool:
    return allowed(services, ctx, op, ResourceType.TRANSACTIONAL_ID, transactional_id)


def cluster_allowed(services: BrokerServices, ctx: RequestContext, op: AclOperation) -> bool:
    return allowed(services, ctx, op, ResourceType.CLUSTER)


def allowed_on_any(
    services: BrokerServices, ctx: RequestContext, op: AclOperation, rtype: ResourceType
) -> bool:
    """May the principal do ``op`` on some resource of the type (authorizeByResourceType)?"""
    authorizer = services.authorizer
    if authorizer is None:
        return True
    return authorizer.allowed_on_any(_session(ctx), _host(ctx), op, rtype)


def operations(
    services: BrokerServices, ctx: RequestContext, rtype: ResourceType, name: str = CLUSTER_NAME
) -> int:
    """An authorized-operations bit set (KIP-430); with no authorizer, as Kafka answers then,
    every operation the resource type supports."""
    authorizer = services.authorizer
    if authorizer is None:
        return authorized_operations.SUPPORTED.get(rtype, NOT_PROVIDED)
    return authorizer.operations(_session(ctx), _host(ctx), rtype, name)


def cluster_operations(
    services: BrokerServices, ctx: RequestContext, requested: object, denied: int = 0
) -> int:
    """cluster_authorized_operations as Kafka fills it: "not provided" unless requested, the
    bit set with DESCRIBE on the cluster, else ``denied`` (0 in DescribeCluster, "not
    provided" in Metadata)."""
    if not requested:
        return NOT_PROVIDED
    if not cluster_allowed(services, ctx, AclOperation.DESCRIBE):
        return denied
    return operations(services, ctx, ResourceType.CLUSTER)


def binding_fields(b: AclBinding, pattern_key: str = "pattern_type") -> dict[str, object]:
    """One binding as Create/Describe/DeleteAcls carry it."""
    return {
        "resource_type": int(b.resource_type),
        "resource_name": b.name,
        pattern_key: int(b.pattern_type),
        "principal": b.principal,
        "host": b.host,
        "operation": int(b.operation),
        "permission_type": int(b.permission),
    }


def acl_filter(request: Any, version: int) -> AclFilter:
    """A Describe/DeleteAcls filter (v0 has no pattern type: it matches literal ACLs)."""
    return AclFilter(
        ResourceType(int(request.resource_type_filter)),
        request.resource_name_filter,
        PatternType(int(getattr(request, "pattern_type_filter", PatternType.LITERAL))),
        request.principal_filter,
        request.host_filter,
        AclOperation(int(request.operation)),
        AclPermissionType(int(request.permission_type)),
    )


def from_the_controller(services: BrokerServices, controller_epoch: int) -> bool:
    """Whether to take a controller-to-broker request (LeaderAndIsr, UpdateMetadata,
    StopReplica): only in a cluster, since a standalone broker is its own controller and takes
    none from the network (any client could otherwise empty its metadata), and only from the
    newest controller (the split-brain fence)."""
    if not services.config["zookeeper.connect"]:
        return False
    return services.replica_manager.check_controller_epoch(controller_epoch)
