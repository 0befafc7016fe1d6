"""OffsetCommit (8): store a group's consumed positions in __consumer_offsets."""

from __future__ import annotations

from typing import Any

from samsa.coordinator import OffsetCommitPartition
from samsa.handlers.authorization import group_allowed, topic_allowed
from samsa.handlers.context import BrokerServices, RequestContext
from samsa.handlers.groups import NOT_AVAILABLE, coordinator
from samsa.metadata import TopicPartition
from samsa.protocol.errors import ErrorCode
from samsa.protocol.messages import ms
from samsa.security.acl import AclOperation

KEY = 8
# v10 names topics by id (KIP-848); clients fall back to v9.
MIN_VERSION, MAX_VERSION = 2, 9


async def _commit(
    services: BrokerServices, request: Any, offsets: list[OffsetCommitPartition]
) -> dict[TopicPartition, Any]:
    group_coordinator = coordinator(services)
    if group_coordinator is None:
        return {TopicPartition(o.topic, o.partition): NOT_AVAILABLE for o in offsets}
    retention = getattr(request, "retention_time", None)
    return await group_coordinator.commit_offsets(
        group_id=request.group_id,
        member_id=request.member_id,
        generation_id=request.generation_id_or_member_epoch,
        offsets=offsets,
        group_instance_id=getattr(request, "group_instance_id", None),
        retention_time_ms=-1 if retention is None else ms(retention),
    )


async def handle(services: BrokerServices, ctx: RequestContext, request: Any) -> dict[str, Any]:
    # Kafka: READ on the group, then READ on each topic; a refused topic is left out.
    group_ok = group_allowed(services, ctx, AclOperation.READ, request.group_id)
    refused: dict[TopicPartition, ErrorCode] = {
        TopicPartition(t.name, p.partition_index): (
            ErrorCode.topic_authorization_failed
            if group_ok
            else ErrorCode.group_authorization_failed
        )
        for t in request.topics
        if not group_ok or not topic_allowed(services, ctx, AclOperation.READ, t.name)
        for p in t.partitions
    }
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
        if TopicPartition(t.name, p.partition_index) not in refused
    ]
    errors: dict[TopicPartition, Any] = dict(refused)
    # As Kafka, with nothing authorized left the coordinator is not asked.
    if offsets or not refused:
        errors |= await _commit(services, request, offsets)
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
