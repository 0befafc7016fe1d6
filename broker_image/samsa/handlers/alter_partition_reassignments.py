"""AlterPartitionReassignments (45): start or cancel moving partitions to other brokers."""

from __future__ import annotations

from typing import Any

from samsa.handlers.authorization import cluster_allowed
from samsa.handlers.context import BrokerServices, RequestContext
from samsa.metadata import TopicPartition
from samsa.protocol.errors import ErrorCode
from samsa.security.acl import AclOperation

KEY = 45
MIN_VERSION, MAX_VERSION = 0, 1


async def handle(services: BrokerServices, ctx: RequestContext, request: Any) -> dict[str, Any]:
    controller = services.controller
    targets = {
        TopicPartition(t.name, p.partition_index): None if p.replicas is None else tuple(p.replicas)
        for t in request.topics
        for p in t.partitions
    }
    allow_rf_change = getattr(request, "allow_replication_factor_change", True)
    top_error, top_message = ErrorCode.none, None
    results: dict[TopicPartition, tuple[ErrorCode, str | None]] = {}
    if not cluster_allowed(services, ctx, AclOperation.ALTER):
        top_error = ErrorCode.cluster_authorization_failed
    elif controller is None or not controller.active:
        top_error = ErrorCode.not_controller
        top_message = "This broker is not the controller"
    else:
        if not allow_rf_change:
            for tp, target in list(targets.items()):
                current = services.cache.partition_state(tp.topic, tp.partition)
                if (
                    target is not None
                    and current is not None
                    and len(target) != len(current.replicas)
                ):
                    results[tp] = (
                        ErrorCode.invalid_replication_factor,
                        "The replication factor would change",
                    )
                    del targets[tp]
        results.update(await controller.alter_reassignments(targets))
    return {
        "throttle_time": 0,
        "allow_replication_factor_change": allow_rf_change,
        "error_code": top_error,
        "error_message": top_message,
        "responses": [
            {
                "name": t.name,
                "partitions": [
                    {
                        "partition_index": p.partition_index,
                        "error_code": results.get(
                            TopicPartition(t.name, p.partition_index), (top_error, None)
                        )[0],
                        "error_message": results.get(
                            TopicPartition(t.name, p.partition_index), (top_error, top_message)
                        )[1],
                    }
                    for p in t.partitions
                ],
            }
            for t in request.topics
        ],
    }
