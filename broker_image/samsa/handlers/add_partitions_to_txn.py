"""AddPartitionsToTxn (24): a producer's transaction begins, or grows by partitions.

v0-v3 come from producers, one transaction each; v4 (KIP-890) is the batched form brokers
send, where ``verify_only`` asks whether partitions are already in the transaction. Any
partition refused (no WRITE on its topic, or an unknown one) fails the whole request, the
others getting OPERATION_NOT_ATTEMPTED, as Kafka answers.
"""

from __future__ import annotations

from typing import Any

from samsa.handlers.authorization import (
    cluster_allowed,
    topic_allowed,
    transactional_id_allowed,
)
from samsa.handlers.context import BrokerServices, RequestContext
from samsa.handlers.transactions import fenced_for, transaction_coordinator
from samsa.metadata import TopicPartition
from samsa.protocol.errors import ErrorCode
from samsa.security.acl import AclOperation

KEY = 24
MIN_VERSION, MAX_VERSION = 0, 4
FIRST_PRODUCER_FENCED = 2
FIRST_BATCHED = 4


def _topics_result(codes: dict[TopicPartition, ErrorCode]) -> list[dict[str, Any]]:
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for tp, code in codes.items():
        by_topic.setdefault(tp.topic, []).append(
            {"partition_index": tp.partition, "partition_error_code": code}
        )
    return [{"name": name, "results_by_partition": ps} for name, ps in by_topic.items()]


async def _add(
    services: BrokerServices,
    ctx: RequestContext,
    txn_id: str,
    producer_id: int,
    producer_epoch: int,
    topics: Any,
    verify_only: bool = False,
) -> dict[TopicPartition, ErrorCode]:
    tps = list(dict.fromkeys(TopicPartition(t.name, p) for t in topics for p in t.partitions))
    if not transactional_id_allowed(services, ctx, AclOperation.WRITE, txn_id):
        return dict.fromkeys(tps, ErrorCode.transactional_id_authorization_failed)
    refused: dict[TopicPartition, ErrorCode] = {}
    for tp in tps:
        meta = services.cache.topic(tp.topic)
        if not topic_allowed(services, ctx, AclOperation.WRITE, tp.topic):
            refused[tp] = ErrorCode.topic_authorization_failed
        elif meta is None or tp.partition not in meta.assignment:
            refused[tp] = ErrorCode.unknown_topic_or_partition
    if refused:
        return {tp: refused.get(tp, ErrorCode.operation_not_attempted) for tp in tps}
    tc = transaction_coordinator(services)
    if tc is None:
        return dict.fromkeys(tps, ErrorCode.coordinator_not_available)
    if verify_only:
        return tc.verify_partitions(txn_id, producer_id, producer_epoch, tps)
    error = await tc.add_partitions(txn_id, producer_id, producer_epoch, tps)
    return dict.fromkeys(tps, fenced_for(ctx.version, FIRST_PRODUCER_FENCED, error))


async def handle(services: BrokerServices, ctx: RequestContext, request: Any) -> dict[str, Any]:
    if ctx.version < FIRST_BATCHED:
        codes = await _add(
            services,
            ctx,
            request.v3_and_below_transactional_id,
            request.v3_and_below_producer_id,
            request.v3_and_below_producer_epoch,
            request.v3_and_below_topics,
        )
        return {"throttle_time": 0, "results_by_topic_v3_and_below": _topics_result(codes)}
    if not cluster_allowed(services, ctx, AclOperation.CLUSTER_ACTION):
        return {
            "throttle_time": 0,
            "error_code": ErrorCode.cluster_authorization_failed,
            "results_by_transaction": [],
        }
    results = []
    for t in request.transactions:
        codes = await _add(
            services,
            ctx,
            t.transactional_id,
            t.producer_id,
            t.producer_epoch,
            t.topics,
            verify_only=t.verify_only,
        )
        results.append(
            {"transactional_id": t.transactional_id, "topic_results": _topics_result(codes)}
        )
    return {"throttle_time": 0, "error_code": ErrorCode.none, "results_by_transaction": results}
