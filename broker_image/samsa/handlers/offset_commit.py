"""OffsetCommit (8): store a group's consumed positions in __consumer_offsets."""

from __future__ import annotations

from typing import Any

from samsa.coordinator import OffsetCommitPartition
from samsa.handlers.context import BrokerServices, RequestContext
from samsa.handlers.groups import NOT_AVAILABLE, coordinator
from samsa.metadata import TopicPartition
from samsa.protocol.messages import ms

KEY = 8
# v10 names topics by id (KIP-848); clients fall back to v9.
MIN_VERSION, MAX_VERSION = 2, 9


async def handle(services: BrokerServices, ctx: RequestContext, request: Any) -> dict[str, Any]:
    offsets = [
        OffsetCommitPartition(
            topic=t.name,
            partition=p.partition_index,
            offset=p.committed_offset,
            leader_epoch=getattr(p, "committed_leader_epoch", -1),
            metadata=p.committed_metadata,
        )
        for t in request.topics
        for p in t.partitions
    ]
    group_coordinator = coordinator(services)
    if group_coordinator is None:
        errors = {TopicPartition(o.topic, o.partition): NOT_AVAILABLE for o in offsets}
    else:
        retention = getattr(request, "retention_time", None)
        errors = await group_coordinator.commit_offsets(
            group_id=request.group_id,
            member_id=request.member_id,
            generation_id=request.generation_id_or_member_epoch,
            offsets=offsets,
            group_instance_id=getattr(request, "group_instance_id", None),
            retention_time_ms=-1 if retention is None else ms(retention),
        )
    return {
        "throttle_time": 0,
        "topics": [
            {
                "name": t.name,
                "partitions": [
                    {
                        "partition_index": p.partition_index,
                        "error_code": errors[TopicPartition(t.name, p.partition_index)],
                    }
                    for p in t.partitions
                ],
            }
            for t in request.topics
        ],
    }
