"""Every API against Kafka's authorization table (KafkaApis): on a broker with the ACL
authorizer and allow.everyone.if.no.acl.found=false, a principal with no ACLs gets Kafka's error
for each request (TOPIC_, GROUP_ or CLUSTER_AUTHORIZATION_FAILED), or sees nothing where Kafka
filters; a principal given just the ACL Kafka checks passes that check.

Each row has its own principal, so one row's ACLs cannot make another row pass.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)
from kafka_support import produce_request
from security_support import Client

from samsa.handlers.registry import default_apis
from samsa.protocol.controller_apis import (
    LEADER_AND_ISR,
    LEADER_AND_ISR_VERSION,
    STOP_REPLICA,
    STOP_REPLICA_VERSION,
    UPDATE_METADATA,
    UPDATE_METADATA_VERSION,
)
from samsa.protocol.record_batch import build_batch
from samsa.testing import InProcessBroker, free_port

pytestmark = pytest.mark.timeout(180)

TOPIC_DENIED, GROUP_DENIED, CLUSTER_DENIED, TXN_DENIED = 29, 30, 31, 53
AUTHORIZATION_ERRORS = {TOPIC_DENIED, GROUP_DENIED, CLUSTER_DENIED, TXN_DENIED}
NONE = 0
STALE_CONTROLLER_EPOCH = 11
NOT_CONTROLLER = 41
MEMBER_ID_REQUIRED = 79
UNKNOWN_MEMBER_ID = 25
GROUP_ID_NOT_FOUND = 69
RESOURCE_NOT_FOUND = 91
ELECTION_NOT_NEEDED = 84

T, G, C, X = (
    ResourceType.TOPIC,
    ResourceType.GROUP,
    ResourceType.BROKER,
    ResourceType.TRANSACTIONAL_ID,
)
Op = AclOperation
TOPIC, DOOMED, GROUP = "t", "doomed", "g"
# A transactional id the fixture's producer has initialised, one that does not exist, and a
# group for transactional offsets (kept apart from g, whose offsets other rows read).
TXN, NO_TXN, TXN_GROUP = "tx", "tx-none", "g-txn"
# Past the authorization check, the transaction APIs answer for a producer id that is not the
# transactional id's: Kafka's errors for that, never an authorization error.
NOT_THIS_PRODUCER = {0, 47, 48, 49, 51, 90}  # INVALID_PRODUCER_EPOCH .. PRODUCER_FENCED
COORDINATOR_MOVING = {14, 15, 16}  # load in progress, not available, not coordinator
TRANSACTIONAL_ID_NOT_FOUND = 105
STRANGER = 999_999
BROKER_RESOURCE, TOPIC_RESOURCE = 4, 2


def _partition_errors(topics_field: str = "topics", parts: str = "partitions") -> Any:
    def errors(r: Any) -> set[int]:
        return {p.error_code for t in getattr(r, topics_field) for p in getattr(t, parts)}

    return errors


def _top(r: Any) -> set[int]:
    return {r.error_code}


@dataclass(frozen=True)
class Row:
    name: str
    key: int
    version: int
    body: Callable[[], Any]
    # What Kafka checks: (resource type, name, operation); the allowed principal gets these.
    acls: tuple[tuple[ResourceType, str, AclOperation], ...]
    # The error codes of the answer (or, where Kafka filters rather than refuses, what shows).
    errors: Callable[[Any], set[Any]]
    denied: set[Any]
    allowed: set[Any]


def _produce() -> Any:
    batch = build_batch([(b"k", b"authz", [])], 0, 1_700_000_000)
    return produce_request(TOPIC, {0: batch}, acks=1, version=9)


ROWS = [
    Row(
        "Produce",
        0,
        9,
        _produce,
        ((T, TOPIC, Op.WRITE),),
        lambda r: {p.error_code for t in r.responses for p in t.partition_responses},
        {TOPIC_DENIED},
        {NONE},
    ),
    Row(
        "Fetch",
        1,
        12,
        lambda: {
            "replica_id": -1,
            "max_wait": 0,
            "min_bytes": 0,
            "max_bytes": 1 << 20,
            "isolation_level": 0,
            "session_id": 0,
            "session_epoch": -1,
            "topics": [
                {
                    "topic": TOPIC,
                    "partitions": [
                        {
                            "partition": 0,
                            "current_leader_epoch": -1,
                            "fetch_offset": 0,
                            "last_fetched_epoch": -1,
                            "log_start_offset": -1,
                            "partition_max_bytes": 1 << 20,
                        }
                    ],
                }
            ],
            "forgotten_topics_data": [],
            "rack_id": "",
        },
        ((T, TOPIC, Op.READ),),
        lambda r: {p.error_code for t in r.responses for p in t.partitions},
        {TOPIC_DENIED},
        {NONE},
    ),
    Row(
        "ListOffsets",
        2,
        7,
        lambda: {
            "replica_id": -1,
            "isolation_level": 0,
            "topics": [
                {
                    "name": TOPIC,
                    "partitions": [
                        {"partition_index": 0, "current_leader_epoch": -1, "timestamp": -1}
                    ],
                }
            ],
        },
        ((T, TOPIC, Op.DESCRIBE),),
        _partition_errors(),
        {TOPIC_DENIED},
        {NONE},
    ),
    Row(
        "Metadata (named)",
        3,
        12,
        lambda: {
            "topics": [{"name": TOPIC, "topic_id": None}],
            "allow_auto_topic_creation": False,
            "include_topic_authorized_operations": False,
        },
        ((T, TOPIC, Op.DESCRIBE),),
        lambda r: {t.error_code for t in r.topics},
        {TOPIC_DENIED},
        {NONE},
    ),
    Row(
        "Metadata (all topics: only the describable are listed)",
        3,
        12,
        lambda: {
            "topics": None,
            "allow_auto_topic_creation": False,
            "include_topic_authorized_operations": False,
        },
        ((T, TOPIC, Op.DESCRIBE),),
        lambda r: {len([t for t in r.topics if t.name == TOPIC])},
        {0},
        {1},
    ),
    Row(
        "LeaderAndIsr",
        LEADER_AND_ISR,
        LEADER_AND_ISR_VERSION,
        lambda: {
            "controller_id": 0,
            "controller_epoch": -2,
            "broker_epoch": -1,
            "type": 0,
            "topic_states": [],
            "live_leaders": [],
        },
        ((C, "kafka-cluster", Op.CLUSTER_ACTION),),
        _top,
        {CLUSTER_DENIED},
        {STALE_CONTROLLER_EPOCH},
    ),
    Row(
        "StopReplica",
        STOP_REPLICA,
        STOP_REPLICA_VERSION,
        lambda: {
            "controller_id": 0,
            "controller_epoch": -2,
            "broker_epoch": -1,
            "topic_states": [],
        },
        ((C, "kafka-cluster", Op.CLUSTER_ACTION),),
        _top,
        {CLUSTER_DENIED},
        {STALE_CONTROLLER_EPOCH},
    ),
    Row(
        "UpdateMetadata",
        UPDATE_METADATA,
        UPDATE_METADATA_VERSION,
        lambda: {
            "controller_id": 0,
            "controller_epoch": -2,
            "broker_epoch": -1,
            "topic_states": [],
            "live_brokers": [],
        },
        ((C, "kafka-cluster", Op.CLUSTER_ACTION),),
        _top,
        {CLUSTER_DENIED},
        {STALE_CONTROLLER_EPOCH},
    ),
    Row(
        "ControlledShutdown",
        7,
        3,
        lambda: {"broker_id": 0, "broker_epoch": -1},
        ((C, "kafka-cluster", Op.CLUSTER_ACTION),),
        _top,
        {CLUSTER_DENIED},
        {NOT_CONTROLLER},
    ),
    Row(
        "OffsetCommit",
        8,
        8,
        lambda: {
            "group_id": GROUP,
            "generation_id_or_member_epoch": -1,
            "member_id": "",
            "group_instance_id": None,
            "topics": [
                {
                    "name": TOPIC,
                    "partitions": [
                        {
                            "partition_index": 0,
                            "committed_offset": 0,
                            "committed_leader_epoch": -1,
                            "committed_metadata": "",
                        }
                    ],
                }
            ],
        },
        ((G, GROUP, Op.READ), (T, TOPIC, Op.READ)),
        _partition_errors(),
        {GROUP_DENIED},
        {NONE},
    ),
    Row(
        "OffsetFetch",
        9,
        7,
        lambda: {
            "group_id": GROUP,
            "topics": [{"name": TOPIC, "partition_indexes": [0]}],
            "require_stable": False,
        },
        ((G, GROUP, Op.DESCRIBE), (T, TOPIC, Op.DESCRIBE)),
        lambda r: {r.error_code} | _partition_errors()(r),
        {GROUP_DENIED},
        {NONE},
    ),
    Row(
        "FindCoordinator",
        10,
        3,
        lambda: {"key": GROUP, "key_type": 0},
        ((G, GROUP, Op.DESCRIBE),),
        _top,
        {GROUP_DENIED},
        {NONE},
    ),
    Row(
        "JoinGroup",
        11,
        5,
        lambda: {
            "group_id": GROUP,
            "session_timeout": 10_000,
            "rebalance_timeout": 10_000,
            "member_id": "",
            "group_instance_id": None,
            "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": b""}],
        },
        ((G, GROUP, Op.READ),),
        _top,
        {GROUP_DENIED},
        {MEMBER_ID_REQUIRED},
    ),
    Row(
        "Heartbeat",
        12,
        3,
        lambda: {
            "group_id": GROUP,
            "generation_id": 1,
            "member_id": "m",
            "group_instance_id": None,
        },
        ((G, GROUP, Op.READ),),
        _top,
        {GROUP_DENIED},
        {UNKNOWN_MEMBER_ID},
    ),
    Row(
        "LeaveGroup",
        13,
        3,
        lambda: {"group_id": GROUP, "members": [{"member_id": "m", "group_instance_id": None}]},
        ((G, GROUP, Op.READ),),
        lambda r: {r.error_code} | {m.error_code for m in r.members},
        {GROUP_DENIED},
        {NONE, UNKNOWN_MEMBER_ID},
    ),
    Row(
        "SyncGroup",
        14,
        3,
        lambda: {
            "group_id": GROUP,
            "generation_id": 1,
            "member_id": "m",
            "group_instance_id": None,
            "assignments": [],
        },
        ((G, GROUP, Op.READ),),
        _top,
        {GROUP_DENIED},
        {UNKNOWN_MEMBER_ID},
    ),
    Row(
        "DescribeGroups",
        15,
        3,
        lambda: {"groups": [GROUP], "include_authorized_operations": False},
        ((G, GROUP, Op.DESCRIBE),),
        lambda r: {g.error_code for g in r.groups},
        {GROUP_DENIED},
        {NONE},
    ),
    Row(
        "ListGroups (only the describable are listed)",
        16,
        3,
        lambda: {},
        ((G, GROUP, Op.DESCRIBE),),
        lambda r: {len([g for g in r.groups if g.group_id == GROUP])},
        {0},
        {1},
    ),
    Row(
        "CreateTopics",
        19,
        5,
        lambda: {
            "topics": [
                {
                    "name": "made-by-authz",
                    "num_partitions": 1,
                    "replication_factor": 1,
                    "assignments": [],
                    "configs": [],
                }
            ],
            "timeout": 10_000,
            "validate_only": True,
        },
        ((T, "made-by-authz", Op.CREATE),),
        lambda r: {t.error_code for t in r.topics},
        {TOPIC_DENIED},
        {NONE},
    ),
    Row(
        "DeleteTopics",
        20,
        5,
        lambda: {"topic_names": [DOOMED], "timeout": 10_000},
        ((T, DOOMED, Op.DELETE),),
        lambda r: {t.error_code for t in r.responses},
        {TOPIC_DENIED},
        {NONE},
    ),
    Row(
        "DeleteRecords",
        21,
        1,
        lambda: {
            "topics": [{"name": TOPIC, "partitions": [{"partition_index": 0, "offset": 0}]}],
            "timeout": 10_000,
        },
        ((T, TOPIC, Op.DELETE),),
        _partition_errors(),
        {TOPIC_DENIED},
        {NONE},
    ),
    Row(
        "InitProducerId (idempotent: WRITE on some topic)",
        22,
        4,
        lambda: {
            "transactional_id": None,
            "transaction_timeout": 60_000,
            "producer_id": -1,
            "producer_epoch": -1,
        },
        ((T, TOPIC, Op.WRITE),),
        _top,
        {CLUSTER_DENIED},
        {NONE},
    ),
    Row(
        "InitProducerId (idempotent: IDEMPOTENT_WRITE)",
        22,
        4,
        lambda: {
            "transactional_id": None,
            "transaction_timeout": 60_000,
            "producer_id": -1,
            "producer_epoch": -1,
        },
        ((C, "kafka-cluster", Op.IDEMPOTENT_WRITE),),
        _top,
        {CLUSTER_DENIED},
        {NONE},
    ),
    Row(
        "OffsetForLeaderEpoch",
        23,
        3,
        lambda: {
            "replica_id": -1,
            "topics": [
                {
                    "topic": TOPIC,
                    "partitions": [{"partition": 0, "current_leader_epoch": -1, "leader_epoch": 0}],
                }
            ],
        },
        ((T, TOPIC, Op.DESCRIBE),),
        _partition_errors(),
        {TOPIC_DENIED},
        {NONE},
    ),
    Row(
        "DescribeAcls",
        29,
        1,
        lambda: {
            "resource_type_filter": 1,
            "resource_name_filter": None,
            "pattern_type_filter": 1,
            "principal_filter": None,
            "host_filter": None,
            "operation": 1,
            "permission_type": 1,
        },
        ((C, "kafka-cluster", Op.DESCRIBE),),
        _top,
        {CLUSTER_DENIED},
        {NONE},
    ),
    Row(
        "CreateAcls",
        30,
        1,
        lambda: {
            "creations": [
                {
                    "resource_type": 2,
                    "resource_name": "zzz",
                    "resource_pattern_type": 3,
                    "principal": "User:nobody-else",
                    "host": "*",
                    "operation": 3,
                    "permission_type": 3,
                }
            ]
        },
        ((C, "kafka-cluster", Op.ALTER),),
        lambda r: {x.error_code for x in r.results},
        {CLUSTER_DENIED},
        {NONE},
    ),
    Row(
        "DeleteAcls",
        31,
        1,
        lambda: {
            "filters": [
                {
                    "resource_type_filter": 2,
                    "resource_name_filter": "zzz",
                    "pattern_type_filter": 3,
                    "principal_filter": "User:nobody-else",
                    "host_filter": None,
                    "operation": 1,
                    "permission_type": 1,
                }
            ]
        },
        ((C, "kafka-cluster", Op.ALTER),),
        lambda r: {x.error_code for x in r.filter_results},
        {CLUSTER_DENIED},
        {NONE},
    ),
    Row(
        "DescribeConfigs (topic)",
        32,
        1,
        lambda: {
            "resources": [
                {
                    "resource_type": TOPIC_RESOURCE,
                    "resource_name": TOPIC,
                    "configuration_keys": None,
                }
            ],
            "include_synonyms": False,
        },
        ((T, TOPIC, Op.DESCRIBE_CONFIGS),),
        lambda r: {x.error_code for x in r.results},
        {TOPIC_DENIED},
        {NONE},
    ),
    Row(
        "DescribeConfigs (broker)",
        32,
        1,
        lambda: {
            "resources": [
                {"resource_type": BROKER_RESOURCE, "resource_name": "0", "configuration_keys": None}
            ],
            "include_synonyms": False,
        },
        ((C, "kafka-cluster", Op.DESCRIBE_CONFIGS),),
        lambda r: {x.error_code for x in r.results},
        {CLUSTER_DENIED},
        {NONE},
    ),
    Row(
        "AlterConfigs (topic)",
        33,
        1,
        lambda: {
            "resources": [{"resource_type": TOPIC_RESOURCE, "resource_name": TOPIC, "configs": []}],
            "validate_only": True,
        },
        ((T, TOPIC, Op.ALTER_CONFIGS),),
        lambda r: {x.error_code for x in r.responses},
        {TOPIC_DENIED},
        {NONE},
    ),
    Row(
        "AlterConfigs (broker)",
        33,
        1,
        lambda: {
            "resources": [{"resource_type": BROKER_RESOURCE, "resource_name": "0", "configs": []}],
            "validate_only": True,
        },
        ((C, "kafka-cluster", Op.ALTER_CONFIGS),),
        lambda r: {x.error_code for x in r.responses},
        {CLUSTER_DENIED},
        {NONE},
    ),
    Row(
        "DescribeLogDirs",
        35,
        3,
        lambda: {"topics": None},
        ((C, "kafka-cluster", Op.DESCRIBE),),
        _top,
        {CLUSTER_DENIED},
        {NONE},
    ),
    Row(
        "CreatePartitions",
        37,
        1,
        lambda: {
            "topics": [{"name": TOPIC, "count": 2, "assignments": None}],
            "timeout": 10_000,
            "validate_only": True,
        },
        ((T, TOPIC, Op.ALTER),),
        lambda r: {x.error_code for x in r.results},
        {TOPIC_DENIED},
        {NONE},
    ),
    Row(
        "DeleteGroups",
        42,
        1,
        lambda: {"groups_names": ["never-made"]},
        ((G, "never-made", Op.DELETE),),
        lambda r: {x.error_code for x in r.results},
        {GROUP_DENIED},
        {GROUP_ID_NOT_FOUND},
    ),
    Row(
        "ElectLeaders",
        43,
        1,
        lambda: {
            "election_type": 0,
            "topic_partitions": [{"topic": TOPIC, "partitions": [0]}],
            "timeout": 10_000,
        },
        ((C, "kafka-cluster", Op.ALTER),),
        lambda r: (
            {r.error_code} | _partition_errors("replica_election_results", "partition_result")(r)
        ),
        {CLUSTER_DENIED},
        {NONE, ELECTION_NOT_NEEDED},
    ),
    Row(
        "IncrementalAlterConfigs (topic)",
        44,
        0,
        lambda: {
            "resources": [{"resource_type": TOPIC_RESOURCE, "resource_name": TOPIC, "configs": []}],
            "validate_only": True,
        },
        ((T, TOPIC, Op.ALTER_CONFIGS),),
        lambda r: {x.error_code for x in r.responses},
        {TOPIC_DENIED},
        {NONE},
    ),
    Row(
        "IncrementalAlterConfigs (broker)",
        44,
        0,
        lambda: {
            "resources": [{"resource_type": BROKER_RESOURCE, "resource_name": "0", "configs": []}],
            "validate_only": True,
        },
        ((C, "kafka-cluster", Op.ALTER_CONFIGS),),
        lambda r: {x.error_code for x in r.responses},
        {CLUSTER_DENIED},
        {NONE},
    ),
    Row(
        "AlterPartitionReassignments",
        45,
        0,
        lambda: {
            "timeout": 10_000,
            "topics": [{"name": TOPIC, "partitions": [{"partition_index": 0, "replicas": None}]}],
        },
        ((C, "kafka-cluster", Op.ALTER),),
        _top,
        {CLUSTER_DENIED},
        {NOT_CONTROLLER},
    ),
    Row(
        "ListPartitionReassignments",
        46,
        0,
        lambda: {"timeout": 10_000, "topics": None},
        ((C, "kafka-cluster", Op.DESCRIBE),),
        _top,
        {CLUSTER_DENIED},
        {NONE},
    ),
    Row(
        "OffsetDelete",
        47,
        0,
        lambda: {
            "group_id": GROUP,
            "topics": [{"name": TOPIC, "partitions": [{"partition_index": 0}]}],
        },
        ((G, GROUP, Op.DELETE), (T, TOPIC, Op.READ)),
        lambda r: {r.error_code} | _partition_errors()(r),
        {GROUP_DENIED},
        {NONE},
    ),
    Row(
        "DescribeClientQuotas",
        48,
        1,
        lambda: {"components": [], "strict": False},
        ((C, "kafka-cluster", Op.DESCRIBE_CONFIGS),),
        _top,
        {CLUSTER_DENIED},
        {NONE},
    ),
    Row(
        "AlterClientQuotas",
        49,
        1,
        lambda: {
            "entries": [
                {
                    "entity": [{"entity_type": "client-id", "entity_name": "authz"}],
                    "ops": [{"key": "producer_byte_rate", "value": 0.0, "remove": True}],
                }
            ],
            "validate_only": True,
        },
        ((C, "kafka-cluster", Op.ALTER_CONFIGS),),
        lambda r: {x.error_code for x in r.entries},
        {CLUSTER_DENIED},
        {NONE},
    ),
    Row(
        "DescribeUserScramCredentials",
        50,
        0,
        lambda: {"users": None},
        ((C, "kafka-cluster", Op.DESCRIBE),),
        _top,
        {CLUSTER_DENIED},
        {NONE},
    ),
    Row(
        "AlterUserScramCredentials",
        51,
        0,
        lambda: {"deletions": [{"name": "nobody-else", "mechanism": 1}], "upsertions": []},
        ((C, "kafka-cluster", Op.ALTER),),
        lambda r: {x.error_code for x in r.results},
        {CLUSTER_DENIED},
        {RESOURCE_NOT_FOUND},
    ),
    Row(
        "AlterPartition",
        56,
        2,
        lambda: {"broker_id": 0, "broker_epoch": -1, "topics": []},
        ((C, "kafka-cluster", Op.CLUSTER_ACTION),),
        _top,
        {CLUSTER_DENIED},
        {NOT_CONTROLLER},
    ),
    Row(
        "InitProducerId (transactional: WRITE on the transactional id)",
        22,
        4,
        lambda: {
            "transactional_id": TXN,
            "transaction_timeout": 60_000,
            "producer_id": -1,
            "producer_epoch": -1,
        },
        ((X, TXN, Op.WRITE),),
        _top,
        {TXN_DENIED},
        {NONE, 51} | COORDINATOR_MOVING,
    ),
    Row(
        "AddPartitionsToTxn",
        24,
        3,
        lambda: {
            "v3_and_below_transactional_id": TXN,
            "v3_and_below_producer_id": STRANGER,
            "v3_and_below_producer_epoch": 0,
            "v3_and_below_topics": [{"name": TOPIC, "partitions": [0]}],
        },
        ((X, TXN, Op.WRITE), (T, TOPIC, Op.WRITE)),
        lambda r: {
            p.partition_error_code
            for t in r.results_by_topic_v3_and_below
            for p in t.results_by_partition
        },
        {TXN_DENIED},
        NOT_THIS_PRODUCER | COORDINATOR_MOVING,
    ),
    Row(
        "AddOffsetsToTxn",
        25,
        3,
        lambda: {
            "transactional_id": TXN,
            "producer_id": STRANGER,
            "producer_epoch": 0,
            "group_id": TXN_GROUP,
        },
        ((X, TXN, Op.WRITE), (G, TXN_GROUP, Op.READ)),
        _top,
        {TXN_DENIED},
        NOT_THIS_PRODUCER | COORDINATOR_MOVING,
    ),
    Row(
        "EndTxn",
        26,
        3,
        lambda: {
            "transactional_id": TXN,
            "producer_id": STRANGER,
            "producer_epoch": 0,
            "committed": False,
        },
        ((X, TXN, Op.WRITE),),
        _top,
        {TXN_DENIED},
        NOT_THIS_PRODUCER | COORDINATOR_MOVING,
    ),
    Row(
        "WriteTxnMarkers",
        27,
        1,
        lambda: {
            "markers": [
                {
                    "producer_id": STRANGER,
                    "producer_epoch": 0,
                    "transaction_result": False,
                    "topics": [{"name": TOPIC, "partition_indexes": [0]}],
                    "coordinator_epoch": 0,
                }
            ]
        },
        ((C, "kafka-cluster", Op.CLUSTER_ACTION),),
        lambda r: {p.error_code for m in r.markers for t in m.topics for p in t.partitions},
        {CLUSTER_DENIED},
        {NONE},
    ),
    Row(
        "TxnOffsetCommit (the transactional id before the group)",
        28,
        3,
        lambda: {
            "transactional_id": TXN,
            "group_id": TXN_GROUP,
            "producer_id": STRANGER,
            "producer_epoch": 0,
            "generation_id": -1,
            "member_id": "",
            "group_instance_id": None,
            "topics": [
                {
                    "name": TOPIC,
                    "partitions": [
                        {
                            "partition_index": 0,
                            "committed_offset": 0,
                            "committed_leader_epoch": -1,
                            "committed_metadata": "",
                        }
                    ],
                }
            ],
        },
        ((X, TXN, Op.WRITE), (G, TXN_GROUP, Op.READ), (T, TOPIC, Op.READ)),
        _partition_errors(),
        {TXN_DENIED},
        NOT_THIS_PRODUCER | COORDINATOR_MOVING,
    ),
    Row(
        "DescribeProducers",
        61,
        0,
        lambda: {"topics": [{"name": TOPIC, "partition_indexes": [0]}]},
        ((T, TOPIC, Op.READ),),
        _partition_errors(),
        {TOPIC_DENIED},
        {NONE},
    ),
    Row(
        "DescribeTransactions",
        65,
        0,
        lambda: {"transactional_ids": [NO_TXN]},
        ((X, NO_TXN, Op.DESCRIBE),),
        lambda r: {s.error_code for s in r.transaction_states},
        {TXN_DENIED},
        {TRANSACTIONAL_ID_NOT_FOUND} | COORDINATOR_MOVING,
    ),
    Row(
        "ListTransactions (lists only what the principal may describe)",
        66,
        1,
        lambda: {"state_filters": [], "producer_id_filters": [], "duration_filter": -1},
        ((X, TXN, Op.DESCRIBE),),
        lambda r: {
            r.error_code,
            "seen" if any(s.transactional_id == TXN for s in r.transaction_states) else "hidden",
        },
        {NONE, "hidden"},
        {NONE, "seen"},
    ),
    Row(
        "DescribeCluster (cluster operations: 0 without DESCRIBE)",
        60,
        0,
        lambda: {"include_cluster_authorized_operations": True},
        ((C, "kafka-cluster", Op.DESCRIBE),),
        lambda r: {r.error_code, "some" if r.cluster_authorized_operations else "none"},
        {NONE, "none"},
        {NONE, "some"},
    ),
]


def _plain_jaas(users: list[str]) -> str:
    entries = " ".join(f'user_{u}="{u}-pw"' for u in users)
    return f"org.apache.kafka.common.security.plain.PlainLoginModule required {entries};"


class Env:
    def __init__(self, root: Path) -> None:
        self.port = free_port()
        users = ["admin", "nobody", "groupie", *(f"row{i}" for i in range(len(ROWS)))]
        self.broker = InProcessBroker(
            root,
            {
                "listeners": f"SASL_PLAINTEXT://127.0.0.1:{self.port}",
                "sasl.enabled.mechanisms": "PLAIN",
                "sasl.jaas.config": _plain_jaas(users),
                "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
                "allow.everyone.if.no.acl.found": "false",
                "super.users": "User:admin",
                "auto.create.topics.enable": "false",
            },
            port=self.port,
        )

    def admin_conf(self) -> dict[str, Any]:
        return {
            "bootstrap.servers": f"127.0.0.1:{self.port}",
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN",
            "sasl.username": "admin",
            "sasl.password": "admin-pw",
        }

    def client(self, user: str) -> Client:
        return Client(self.port, "PLAIN", user, f"{user}-pw")


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    env = Env(tmp_path_factory.mktemp("authz"))
    with env.broker:
        admin = AdminClient(env.admin_conf())
        for f in admin.create_topics([NewTopic(TOPIC, 1, 1), NewTopic(DOOMED, 1, 1)]).values():
            f.result(20)
        grants = [
            AclBinding(
                rtype,
                name,
                ResourcePatternType.LITERAL,
                f"User:row{i}",
                "*",
                op,
                AclPermissionType.ALLOW,
            )
            for i, row in enumerate(ROWS)
            for rtype, name, op in row.acls
        ]
        # groupie may describe group g, and no topic.
        grants.append(
            AclBinding(
                G,
                GROUP,
                ResourcePatternType.LITERAL,
                "User:groupie",
                "*",
                Op.DESCRIBE,
                AclPermissionType.ALLOW,
            )
        )
        for f in admin.create_acls(grants).values():
            f.result(20)
        # The transactional id exists (Empty) for the transaction rows to find and list.
        transactional = Producer({**env.admin_conf(), "transactional.id": TXN})
        transactional.init_transactions(30)
        transactional.flush(10)
        # Group g exists (Empty, with a committed offset) for the group rows to find.
        owner = env.client("admin")
        try:
            committed = owner.call(8, 8, ROWS[_index("OffsetCommit")].body())
            assert _partition_errors()(committed) == {NONE}
        finally:
            owner.close()
        yield env


def _index(name: str) -> int:
    return next(i for i, row in enumerate(ROWS) if row.name == name)


@pytest.mark.parametrize("row", ROWS, ids=[r.name for r in ROWS])
def test_a_principal_without_acls_gets_kafkas_error(env: Env, row: Row) -> None:
    client = env.client("nobody")
    try:
        assert row.errors(client.call(row.key, row.version, row.body())) == row.denied
    finally:
        client.close()


@pytest.mark.parametrize("row", ROWS, ids=[r.name for r in ROWS])
def test_the_acl_kafka_checks_lets_the_request_through(env: Env, row: Row) -> None:
    client = env.client(f"row{ROWS.index(row)}")
    try:
        got = row.errors(client.call(row.key, row.version, row.body()))
    finally:
        client.close()
    assert got <= row.allowed, got
    assert not got & AUTHORIZATION_ERRORS


def test_an_unauthorized_offset_commit_topic_is_refused_beside_an_authorized_one(
    env: Env,
) -> None:
    body = ROWS[_index("OffsetCommit")].body()
    body["topics"].append({**body["topics"][0], "name": DOOMED})
    client = env.client(f"row{_index('OffsetCommit')}")
    try:
        answer = client.call(8, 8, body)
    finally:
        client.close()
    by_topic = {t.name: {p.error_code for p in t.partitions} for t in answer.topics}
    assert by_topic == {TOPIC: {NONE}, DOOMED: {TOPIC_DENIED}}


def test_offset_fetch_leaves_out_topics_the_principal_may_not_describe(env: Env) -> None:
    """As Kafka: asked for every topic, the answer omits those; asked by name, they carry
    TOPIC_AUTHORIZATION_FAILED."""
    everything = {"group_id": GROUP, "topics": None, "require_stable": False}
    named = ROWS[_index("OffsetFetch")].body()
    with env.client("groupie") as client:
        all_topics = client.call(9, 7, everything)
        by_name = client.call(9, 7, named)
    with env.client("admin") as client:
        seen_by_admin = client.call(9, 7, everything)
    assert TOPIC in {t.name for t in seen_by_admin.topics}
    assert (all_topics.error_code, [t.name for t in all_topics.topics]) == (NONE, [])
    assert _partition_errors()(by_name) == {TOPIC_DENIED}


def test_the_table_covers_every_api_the_broker_serves() -> None:
    """A new API must come with its row (or be one Kafka does not authorize)."""
    unchecked = {17, 18, 36}  # SaslHandshake, ApiVersions, SaslAuthenticate: before any ACL
    served = {api.key for api in default_apis()}
    assert served - unchecked == {row.key for row in ROWS}
