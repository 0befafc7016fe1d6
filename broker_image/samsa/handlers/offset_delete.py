"""OffsetDelete (47): drop a group's committed offsets for partitions it no longer consumes."""

from __future__ import annotations

from typing import Any

from samsa.coordinator import OffsetDeleteResult
from samsa.handlers.authorization import group_allowed, topic_allowed
from samsa.handlers.context import BrokerServices, RequestContext
from samsa.handlers.groups import NOT_AVAILABLE, coordinator
from samsa.metadata import TopicPartition
from samsa.protocol.errors import ErrorCode
from samsa.security.acl import AclOperation

KEY = 47
MIN_VERSION, MAX_VERSION = 0, 0


async def handle(services: BrokerServices, ctx: RequestContext, request: Any) -> dict[str, Any]:
    # As Kafka: DELETE on the group, else GROUP_AUTHORIZATION_FAILED; READ on each topic, else
    # TOPIC_AUTHORIZATION_FAILED for its partitions.
    if not group_allowed(services, ctx, AclOperation.DELETE, request.group_id):
        return {
            "error_code": ErrorCode.group_authorization_failed,
            "throttle_time": 0,
            "topics": [],
        }
    readable = {
        t.name for t in request.topics if topic_allowed(services, ctx, AclOperation.READ, t.name)
    }
    tps = [
        TopicPartition(t.name, p.partition_index)
        for t in request.topics
        if t.name in readable
        for p in t.partitions
    ]
    group_coordinator = coordinator(services)
    if group_coordinator is None:
        result = OffsetDeleteResult(NOT_AVAILABLE)
    elif tps or len(readable) == len(request.topics):
        result = await group_coordinator.delete_offsets(request.group_id, tps)
    else:
        result = OffsetDeleteResult(ErrorCode.none)
    denied = {
        TopicPartition(t.name, p.partition_index): ErrorCode.topic_authorization_failed
        for t in request.topics
        if t.name not in readable
        for p in t.partitions
    }
    if denied and result.error == ErrorCode.none:
        result = OffsetDeleteResult(result.error, {**result.partitions, **denied})
    return {
        "error_code": result.error,
        "throttle_time": 0,
        "topics": [
            {
                "name": t.name,
                "partitions": [
                    {
                        "partition_index": p.partition_index,
                        "error_code": result.partitions.get(
                            TopicPartition(t.name, p.partition_index), 0
                        ),
                    }
                    for p in t.partitions
                ],
            }
            for t in request.topics
        ]
        if result.partitions
        else [],
    }
