"""StopReplica (5): stop leading or following partitions, deleting their logs if asked."""

from __future__ import annotations

from typing import Any

from kio.static.primitive import i32

from samsa.handlers.authorization import cluster_allowed, from_the_controller
from samsa.handlers.context import BrokerServices, RequestContext
from samsa.metadata import TopicPartition
from samsa.protocol import controller_apis as apis
from samsa.protocol.errors import ErrorCode
from samsa.security.acl import AclOperation

KEY = apis.STOP_REPLICA
MIN_VERSION = MAX_VERSION = apis.STOP_REPLICA_VERSION


def handle(services: BrokerServices, ctx: RequestContext, request: Any) -> Any:
    if not cluster_allowed(services, ctx, AclOperation.CLUSTER_ACTION):
        return apis.StopReplicaResponse(
            error_code=ErrorCode.cluster_authorization_failed, partition_errors=()
        )
    manager = services.replica_manager
    if not from_the_controller(services, request.controller_epoch):
        return apis.StopReplicaResponse(
            error_code=ErrorCode.stale_controller_epoch, partition_errors=()
        )
    items = [
        (TopicPartition(t.topic_name, p.partition_index), p.leader_epoch, p.delete_partition)
        for t in request.topic_states
        for p in t.partition_states
    ]
    errors = manager.stop_replicas(request.controller_epoch, items)
    return apis.StopReplicaResponse(
        error_code=ErrorCode.none,
        partition_errors=tuple(
            apis.StopReplicaPartitionError(
                topic_name=tp.topic, partition_index=i32(tp.partition), error_code=code
            )
            for tp, code in errors.items()
        ),
    )
