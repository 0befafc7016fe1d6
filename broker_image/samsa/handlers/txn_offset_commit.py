"""TxnOffsetCommit (28): a group's offsets in a transaction, visible once it commits.

KIP-98, and KIP-447's member and generation (v3+)."""

from __future__ import annotations

from typing import Any

from samsa.coordinator import GROUP_METADATA_TOPIC_NAME, OffsetCommitPartition
from samsa.coordinator.group_store import offset_commit_error
from samsa.handlers.authorization import group_allowed, topic_allowed, transactional_id_allowed
from samsa.handlers.context import BrokerServices, RequestContext
from samsa.handlers.groups import NOT_AVAILABLE, coordinator
from samsa.handlers.produce import VERIFICATION_ENABLE
from samsa.handlers.transactions import fenced_for
from samsa.handlers.txn_verification import needs_verification
from samsa.metadata import TopicPartition
from samsa.protocol.errors import ErrorCode
from samsa.security.acl import AclOperation

KEY = 28
# v4 only adds TRANSACTION_ABORTABLE; v5 is KIP-890's implicit AddOffsetsToTxn (not served).
MIN_VERSION, MAX_VERSION = 0, 4
# Kafka sends PRODUCER_FENCED here from v3 (KIP-447's version), INVALID_PRODUCER_EPOCH before.
FIRST_PRODUCER_FENCED = 3
FIRST_ABORTABLE = 4


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
        refused = (
            await _unverified(services, request, group_coordinator.partition_for(request.group_id))
            if offsets and group_coordinator is not None
            else None
        )
        if offsets and group_coordinator is None:
            errors.update({TopicPartition(o.topic, o.partition): NOT_AVAILABLE for o in offsets})
        elif refused is not None:
            if refused is ErrorCode.transaction_abortable and ctx.version < FIRST_ABORTABLE:
                refused = ErrorCode.invalid_txn_state
            code = fenced_for(ctx.version, FIRST_PRODUCER_FENCED, offset_commit_error(refused))
            errors.update({TopicPartition(o.topic, o.partition): code for o in offsets})
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


async def _unverified(services: BrokerServices, request: Any, partition: int) -> ErrorCode | None:
    """KIP-890 part 1 for offsets, as Kafka's GroupCoordinator.handleTxnCommitOffsets: the
    transaction's first write to the group's __consumer_offsets partition waits for the
    transaction coordinator to say that partition was added (AddOffsetsToTxn). Without it
    any client could leave a transaction there that no marker ever ends (a producer id and
    epoch of its choosing), holding the partition's stable offset back and its offsets
    pending for good. The coordinator's refusal, or None when verified or not needed."""
    if services.verify_transaction is None or not services.dynamic_config()[VERIFICATION_ENABLE]:
        return None
    tp = TopicPartition(GROUP_METADATA_TOPIC_NAME, partition)
    producer_id, producer_epoch = request.producer_id, request.producer_epoch
    if not needs_verification(services.replica_manager, tp, producer_id, producer_epoch):
        return None
    answers = await services.verify_transaction(
        request.transactional_id, producer_id, producer_epoch, [tp]
    )
    code = answers.get(tp, ErrorCode.none)
    return None if code is ErrorCode.none else code
