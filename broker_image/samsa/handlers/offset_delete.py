"""OffsetDelete (47): drop a group's committed offsets for partitions it no longer consumes."""

from __future__ import annotations

from typing import Any

from samsa.coordinator import OffsetDeleteResult
from samsa.handlers.context import BrokerServices, RequestContext
from samsa.handlers.groups import NOT_AVAILABLE, coordinator
from samsa.metadata import TopicPartition

KEY = 47
MIN_VERSION, MAX_VERSION = 0, 0


async def handle(services: BrokerServices, ctx: RequestContext, request: Any) -> dict[str, Any]:
    tps = [TopicPartition(t.name, p.partition_index) for t in request.topics for p in t.partitions]
    group_coordinator = coordinator(services)
    if group_coordinator is None:
        result = OffsetDeleteResult(NOT_AVAILABLE)
    else:
        result = await group_coordinator.delete_offsets(request.group_id, tps)
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
