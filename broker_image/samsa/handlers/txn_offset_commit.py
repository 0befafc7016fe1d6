"""TxnOffsetCommit (28): a group's offsets in a transaction, visible once it commits.

KIP-98, and KIP-447's member and generation (v3+)."""

from __future__ import annotations

from typing import Any

from samsa.coordinator import OffsetCommitPartition
from samsa.handlers.authorization import group_allowed, topic_allowed, transactional_id_allowed
from samsa.handlers.context import BrokerServices, RequestContext
from samsa.handlers.groups import NOT_AVAILABLE, coordinator
from samsa.handlers.transactions import fenced_for
from samsa.metadata import TopicPartition
from samsa.protocol.errors import ErrorCode
from samsa.security.acl import AclOperation

KEY = 28
# v4 only adds TRANSACTION_ABORTABLE; v5 is KIP-890's implicit AddOffsetsToTxn (not served).
MIN_VERSION, MAX_VERSION = 0, 4
# Kafka sends PRODUCER_FENCED here from v3 (KIP-447's version), INVALID_PRODUCER_EPOCH before.
FIRST_PRODUCER_FENCED = 3


async def handle(services: BrokerServices, ctx: RequestContext, request: Any) -> dict[str, Any]:
    tps = [TopicPartition(t.name, p.partition_index) for t in request.topics for p in t.partitions]
    errors: dict[TopicPartition, ErrorCode] = {}
    if not transactional_id_allowed(services, ctx, AclOperation.WRITE, request.transactional_id):
        errors = dict.fromkeys(tps, ErrorCode.transactional_id_authorization_failed)
    elif not group_allowed(services, ctx, AclOperation.READ, request.group_id):
        errors = dict.fromkeys(tps, ErrorCode.group_authorization_failed)
    else:
        offsets = []
        for t in request.topics:
            allowed = topic_allowed(services, ctx, AclOperation.READ, t.name)
            for p in t.partitions:
                if not allowed:
                    errors[TopicPartition(t.name, p.partition_index)] = (
                        ErrorCode.topic_authorization_failed
                    )
                    continue
                offsets.append(
                    OffsetCommitPartition(
                        topic=t.name,
                        partition=p.partition_index,
                        offset=p.committed_offset,
                        leader_epoch=getattr(p, "committed_leader_epoch", -1),
                        metadata=p.committed_metadata,
                    )
                )
        group_coordinator = coordinator(services)
        if offsets and group_coordinator is None:
            errors.update({TopicPartition(o.topic, o.partition): NOT_AVAILABLE for o in offsets})
        elif offsets and group_coordinator is not None:
            committed = await group_coordinator.commit_transactional_offsets(
                request.group_id,
                request.producer_id,
                request.producer_epoch,
                offsets,
                member_id=getattr(request, "member_id", ""),
                generation_id=getattr(request, "generation_id", -1),
                group_instance_id=getattr(request, "group_instance_id", None),
            )
            errors.update(
                {
                    tp: fenced_for(ctx.version, FIRST_PRODUCER_FENCED, e)
                    for tp, e in committed.items()
                }
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
