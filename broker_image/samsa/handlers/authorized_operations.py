"""Authorized-operations bit fields (KIP-430) as Kafka answers them with no authorizer: every
operation the resource type supports when the client asks, "not requested" otherwise."""

from __future__ import annotations

# Kafka's AclOperation codes.
READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE = 3, 4, 5, 6, 7, 8
CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE = 9, 10, 11, 12

NOT_REQUESTED = -(2**31)


def _bits(*operations: int) -> int:
    return sum(1 << op for op in operations)


TOPIC = _bits(READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS)
GROUP = _bits(READ, DESCRIBE, DELETE, DESCRIBE_CONFIGS, ALTER_CONFIGS)
CLUSTER = _bits(
    CREATE, ALTER, DESCRIBE, CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE
)


#: by Kafka's resource type codes (topic 2, group 3, cluster 4)
SUPPORTED = {2: TOPIC, 3: GROUP, 4: CLUSTER}


def operations(requested: object, supported: int) -> int:
    return supported if requested else NOT_REQUESTED
