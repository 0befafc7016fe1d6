"""ACLs and the authorization decision, as Kafka's AclAuthorizer makes it: pure functions over
a list of bindings, no storage.

A request is allowed when the principal is a super user; else it is denied if any DENY binding
matches (deny wins), allowed if an ALLOW binding matches (READ, WRITE, DELETE and ALTER imply
DESCRIBE; ALTER_CONFIGS implies DESCRIBE_CONFIGS; ALL implies everything), and otherwise
denied, unless no binding names the resource at all and allow.everyone.if.no.acl.found is set.
A binding matches a resource by its literal name, the wildcard ``*``, or a prefix; a principal
by its name or ``User:*``; a host by its address or ``*``.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any


class ResourceType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclOperation(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class AclPermissionType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


WILDCARD = "*"
WILDCARD_PRINCIPAL = "User:*"
CLUSTER_NAME = "kafka-cluster"

# Kafka's names in ZooKeeper's JSON and its znode paths.
_TYPE_NAMES = {
    ResourceType.TOPIC: "Topic",
    ResourceType.GROUP: "Group",
    ResourceType.CLUSTER: "Cluster",
    ResourceType.TRANSACTIONAL_ID: "TransactionalId",
    ResourceType.DELEGATION_TOKEN: "DelegationToken",
    ResourceType.USER: "User",
}
_OP_NAMES: dict[AclOperation, str] = {
    op: "".join(part.capitalize() for part in op.name.split("_"))
    for op in AclOperation
    if op not in (AclOperation.UNKNOWN, AclOperation.ANY)
}
_IMPLIED = {
    AclOperation.DESCRIBE: {
        AclOperation.READ,
        AclOperation.WRITE,
        AclOperation.DELETE,
        AclOperation.ALTER,
    },
    AclOperation.DESCRIBE_CONFIGS: {AclOperation.ALTER_CONFIGS},
}
# What each resource type's authorized-operations bit set can hold (Kafka's supportedOperations).
SUPPORTED_OPERATIONS = {
    ResourceType.TOPIC: (
        AclOperation.READ,
        AclOperation.WRITE,
        AclOperation.CREATE,
        AclOperation.DESCRIBE,
        AclOperation.DELETE,
        AclOperation.ALTER,
        AclOperation.DESCRIBE_CONFIGS,
        AclOperation.ALTER_CONFIGS,
    ),
    ResourceType.GROUP: (AclOperation.READ, AclOperation.DESCRIBE, AclOperation.DELETE),
    ResourceType.CLUSTER: (
        AclOperation.CREATE,
        AclOperation.CLUSTER_ACTION,
        AclOperation.DESCRIBE_CONFIGS,
        AclOperation.ALTER_CONFIGS,
        AclOperation.IDEMPOTENT_WRITE,
        AclOperation.ALTER,
        AclOperation.DESCRIBE,
    ),
    ResourceType.TRANSACTIONAL_ID: (AclOperation.DESCRIBE, AclOperation.WRITE),
}


@dataclass(frozen=True, slots=True)
class AclBinding:
    resource_type: ResourceType
    name: str
    pattern_type: PatternType
    principal: str
    host: str
    operation: AclOperation
    permission: AclPermissionType

    @property
    def key(self) -> tuple[str, str, str]:
        """Where it is stored: (resource type name, LITERAL or PREFIXED, resource name)."""
        return (_TYPE_NAMES[self.resource_type], self.pattern_type.name, self.name)

    def entry(self) -> dict[str, Any]:
        """Kafka's JSON for one ACL of a resource."""
        return {
            "principal": self.principal,
            "permissionType": self.permission.name.capitalize(),
            "operation": _OP_NAMES[self.operation],
            "host": self.host,
        }


def bindings_from(key: tuple[str, str, str], entries: Iterable[dict[str, Any]]) -> list[AclBinding]:
    type_name, pattern, name = key
    rtype = next(t for t, n in _TYPE_NAMES.items() if n == type_name)
    ops = {n: op for op, n in _OP_NAMES.items()}
    return [
        AclBinding(
            rtype,
            name,
            PatternType[pattern],
            e["principal"],
            e["host"],
            ops[e["operation"]],
            AclPermissionType[e["permissionType"].upper()],
        )
        for e in entries
    ]


def _resource_matches(b: AclBinding, rtype: ResourceType, name: str) -> bool:
    if b.resource_type != rtype:
        return False
    if b.pattern_type == PatternType.LITERAL:
        return b.name in (name, WILDCARD)
    return b.pattern_type == PatternType.PREFIXED and name.startswith(b.name)


def _operation_matches(b: AclBinding, op: AclOperation, permission: AclPermissionType) -> bool:
    if b.operation in (op, AclOperation.ALL):
        return True
    # Implication only widens what is allowed; a DENY READ does not deny DESCRIBE.
    return permission == AclPermissionType.ALLOW and b.operation in _IMPLIED.get(op, ())


def authorize(
    bindings: Iterable[AclBinding],
    principal: str,
    host: str,
    op: AclOperation,
    rtype: ResourceType,
    name: str,
    *,
    super_users: frozenset[str] = frozenset(),
    allow_if_no_acl: bool = False,
) -> bool:
    if principal in super_users:
        return True
    relevant = [b for b in bindings if _resource_matches(b, rtype, name)]
    if not relevant:
        return allow_if_no_acl
    mine = [
        b
        for b in relevant
        if b.principal in (principal, WILDCARD_PRINCIPAL) and b.host in (host, WILDCARD)
    ]
    if any(
        b.permission == AclPermissionType.DENY and _operation_matches(b, op, b.permission)
        for b in mine
    ):
        return False
    return any(
        b.permission == AclPermissionType.ALLOW and _operation_matches(b, op, b.permission)
        for b in mine
    )


def authorize_by_resource_type(
    bindings: Iterable[AclBinding],
    principal: str,
    host: str,
    op: AclOperation,
    rtype: ResourceType,
    *,
    super_users: frozenset[str] = frozenset(),
    allow_if_no_acl: bool = False,
) -> bool:
    """May the principal do ``op`` on at least one resource of the type (Kafka's
    Authorizer.authorizeByResourceType, which InitProducerId asks for WRITE on any topic)?

    As Kafka: allowed if the operation is allowed on a made-up name (super users, and
    allow.everyone.if.no.acl.found); else if some ALLOW for it is not wholly covered by a DENY:
    a wildcard DENY covers everything, a literal DENY its own name, a prefixed DENY every name
    that starts with it. Implied operations do not count here.
    """
    listed = list(bindings)
    kwargs: dict[str, Any] = {"super_users": super_users, "allow_if_no_acl": allow_if_no_acl}
    if authorize(listed, principal, host, op, rtype, "hardcode", **kwargs):
        return True
    deny_literal: set[str] = set()
    deny_prefixed: set[str] = set()
    allows: list[AclBinding] = []
    for b in listed:
        if b.resource_type != rtype or b.operation not in (op, AclOperation.ALL):
            continue
        if b.principal not in (principal, WILDCARD_PRINCIPAL) or b.host not in (host, WILDCARD):
            continue
        if b.permission == AclPermissionType.DENY:
            if b.pattern_type == PatternType.LITERAL and b.name == WILDCARD:
                return False
            (deny_literal if b.pattern_type == PatternType.LITERAL else deny_prefixed).add(b.name)
        elif b.permission == AclPermissionType.ALLOW:
            allows.append(b)
    if any(b.pattern_type == PatternType.LITERAL and b.name == WILDCARD for b in allows):
        return True
    for b in allows:
        if b.pattern_type == PatternType.LITERAL and b.name in deny_literal:
            continue
        if not any(b.name[:i] in deny_prefixed for i in range(1, len(b.name) + 1)):
            return True
    return False


@dataclass(frozen=True, slots=True)
class AclFilter:
    """What DescribeAcls and DeleteAcls select; ANY and None match everything."""

    resource_type: ResourceType = ResourceType.ANY
    name: str | None = None
    pattern_type: PatternType = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: AclOperation = AclOperation.ANY
    permission: AclPermissionType = AclPermissionType.ANY

    def matches(self, b: AclBinding) -> bool:
        if self.resource_type not in (ResourceType.ANY, b.resource_type):
            return False
        if self.pattern_type == PatternType.MATCH:
            if self.name is not None and not (
                b.name == self.name
                or (b.pattern_type == PatternType.LITERAL and b.name == WILDCARD)
                or (b.pattern_type == PatternType.PREFIXED and self.name.startswith(b.name))
            ):
                return False
        else:
            if self.pattern_type not in (PatternType.ANY, b.pattern_type):
                return False
            if self.name is not None and self.name != b.name:
                return False
        return (
            self.principal in (None, b.principal)
            and self.host in (None, b.host)
            and self.operation in (AclOperation.ANY, b.operation)
            and self.permission in (AclPermissionType.ANY, b.permission)
        )


def authorized_operations(
    bindings: Iterable[AclBinding],
    principal: str,
    host: str,
    rtype: ResourceType,
    name: str,
    **kwargs: Any,
) -> int:
    """The bit set of operations the principal may do on a resource (the authorized-operations
    fields of Metadata, DescribeGroups and DescribeCluster)."""
    listed = list(bindings)
    bits = 0
    for op in SUPPORTED_OPERATIONS.get(rtype, ()):
        if authorize(listed, principal, host, op, rtype, name, **kwargs):
            bits |= 1 << int(op)
    return bits
