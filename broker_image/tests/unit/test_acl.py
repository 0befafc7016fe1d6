"""The authorization decision as Kafka's AclAuthorizer makes it, as a table."""

from __future__ import annotations

import pytest

from samsa.security.acl import (
    AclBinding,
    AclFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
    authorize,
    authorize_by_resource_type,
    authorized_operations,
    bindings_from,
)
from samsa.security.security_store import acl_change_note

T, G, C = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER
LIT, PRE = PatternType.LITERAL, PatternType.PREFIXED
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
Op = AclOperation


def acl(rtype, name, pattern, principal, op, perm, host="*"):  # type: ignore[no-untyped-def,unused-ignore]
    return AclBinding(rtype, name, pattern, principal, host, op, perm)


ACLS = [
    acl(T, "a", LIT, "User:alice", Op.WRITE, ALLOW),
    acl(T, "pre-", PRE, "User:alice", Op.READ, ALLOW),
    acl(T, "pre-secret", LIT, "User:alice", Op.READ, DENY),
    acl(T, "*", LIT, "User:*", Op.DESCRIBE, ALLOW, host="10.0.0.9"),
    acl(G, "g", LIT, "User:bob", Op.ALL, ALLOW),
    acl(T, "x", LIT, "User:bob", Op.ALL, DENY),
    acl(T, "x", LIT, "User:bob", Op.READ, ALLOW),
]


@pytest.mark.parametrize(
    ("principal", "host", "op", "rtype", "name", "allowed"),
    [
        ("User:alice", "h", Op.WRITE, T, "a", True),
        ("User:alice", "h", Op.DESCRIBE, T, "a", True),  # WRITE implies DESCRIBE
        ("User:alice", "h", Op.READ, T, "a", False),
        ("User:alice", "h", Op.WRITE, T, "b", False),  # no ACL on b: denied by default
        ("User:alice", "h", Op.READ, T, "pre-x", True),  # prefixed
        ("User:alice", "h", Op.READ, T, "pre-secret", False),  # deny wins
        ("User:alice", "h", Op.DESCRIBE, T, "pre-secret", True),  # a DENY READ implies nothing
        ("User:carol", "10.0.0.9", Op.DESCRIBE, T, "any", True),  # wildcard name, principal
        ("User:carol", "10.0.0.8", Op.DESCRIBE, T, "any", False),  # host
        ("User:bob", "h", Op.READ, G, "g", True),  # ALL
        ("User:bob", "h", Op.READ, T, "x", False),  # DENY ALL beats ALLOW READ
        ("User:alice", "h", Op.READ, G, "g", False),
        ("User:alice", "h", Op.CREATE, C, "kafka-cluster", False),
    ],
)
def test_decisions(
    principal: str, host: str, op: AclOperation, rtype: ResourceType, name: str, allowed: bool
) -> None:
    assert authorize(ACLS, principal, host, op, rtype, name) is allowed


def test_super_users_and_allow_everyone_if_no_acl_found() -> None:
    assert authorize(
        ACLS, "User:admin", "h", Op.READ, T, "x", super_users=frozenset({"User:admin"})
    )
    assert authorize(ACLS, "User:alice", "h", Op.READ, G, "other", allow_if_no_acl=True)
    # The wildcard ACL on topics names every topic.
    assert not authorize(ACLS, "User:alice", "h", Op.READ, T, "other", allow_if_no_acl=True)
    # A resource that has ACLs is not open to everyone, even with the setting.
    assert not authorize(ACLS, "User:carol", "h", Op.WRITE, T, "a", allow_if_no_acl=True)


def test_authorized_operations_bits() -> None:
    bits = authorized_operations(ACLS, "User:alice", "h", T, "a")
    assert bits == (1 << Op.WRITE) | (1 << Op.DESCRIBE)


def test_filters_as_describe_and_delete_use_them() -> None:
    assert [b.name for b in ACLS if AclFilter(T, "pre-x", PatternType.MATCH).matches(b)] == [
        "pre-",
        "*",
    ]
    assert [b.name for b in ACLS if AclFilter(principal="User:bob").matches(b)] == ["g", "x", "x"]
    assert not any(AclFilter(T, "a", PRE).matches(b) for b in ACLS[:1])


def test_kafka_json_round_trip() -> None:
    b = ACLS[0]
    assert b.entry() == {
        "principal": "User:alice",
        "permissionType": "Allow",
        "operation": "Write",
        "host": "*",
    }
    assert b.key == ("Topic", "LITERAL", "a")
    assert bindings_from(b.key, [b.entry()]) == [b]
    cluster = acl(C, "kafka-cluster", LIT, "User:x", Op.IDEMPOTENT_WRITE, DENY)
    assert cluster.entry()["operation"] == "IdempotentWrite"
    assert bindings_from(cluster.key, [cluster.entry()]) == [cluster]


@pytest.mark.parametrize(
    ("acls", "allowed"),
    [
        ([], False),
        ([acl(T, "a", LIT, "User:alice", Op.WRITE, ALLOW)], True),
        ([acl(T, "a", LIT, "User:alice", Op.READ, ALLOW)], False),
        ([acl(T, "a", LIT, "User:*", Op.ALL, ALLOW)], True),
        ([acl(G, "a", LIT, "User:alice", Op.WRITE, ALLOW)], False),
        ([acl(T, "a", LIT, "User:bob", Op.WRITE, ALLOW)], False),
        # A literal DENY covers only its own name, a prefixed DENY every name it starts.
        (
            [
                acl(T, "a", LIT, "User:alice", Op.WRITE, ALLOW),
                acl(T, "a", LIT, "User:alice", Op.WRITE, DENY),
            ],
            False,
        ),
        (
            [
                acl(T, "ab", LIT, "User:alice", Op.WRITE, ALLOW),
                acl(T, "a", PRE, "User:alice", Op.WRITE, DENY),
            ],
            False,
        ),
        (
            [
                acl(T, "ab", PRE, "User:alice", Op.WRITE, ALLOW),
                acl(T, "abc", PRE, "User:alice", Op.WRITE, DENY),
            ],
            True,
        ),
        (
            [
                acl(T, "a", LIT, "User:alice", Op.WRITE, ALLOW),
                acl(T, "*", LIT, "User:*", Op.WRITE, DENY),
            ],
            False,
        ),
    ],
)
def test_authorize_by_resource_type_as_kafka(acls: list[AclBinding], allowed: bool) -> None:
    got = authorize_by_resource_type(acls, "User:alice", "10.0.0.1", Op.WRITE, T)
    assert got is allowed


def test_authorize_by_resource_type_for_super_users_and_no_acls() -> None:
    deny_all = [acl(T, "*", LIT, "User:*", Op.WRITE, DENY)]
    assert authorize_by_resource_type(
        deny_all, "User:admin", "h", Op.WRITE, T, super_users=frozenset({"User:admin"})
    )
    assert authorize_by_resource_type([], "User:alice", "h", Op.WRITE, T, allow_if_no_acl=True)


@pytest.mark.parametrize(
    ("key", "note"),
    [
        (("Topic", "LITERAL", "a"), b"TOPIC:a"),
        (("TransactionalId", "LITERAL", "tx:1"), b"TRANSACTIONAL_ID:tx:1"),
        (
            ("Group", "PREFIXED", "g-"),
            b'{"version":1,"resourceType":"GROUP","name":"g-","patternType":"PREFIXED"}',
        ),
    ],
)
def test_acl_change_notes_are_written_as_kafka_writes_them(
    key: tuple[str, str, str], note: bytes
) -> None:
    assert acl_change_note(key) == note
