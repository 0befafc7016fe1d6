"""Produce (0): append each partition's batches as leader; answers with hand-encoded bytes.

A transaction's first batch on a partition waits for the coordinator's verification
(handlers/txn_verification.py) before anything of the request is appended; the request then
holds its connection, so the batches behind it keep their order."""

from __future__ import annotations

from time import perf_counter
from typing import Any

from samsa.handlers import throttling
from samsa.handlers.authorization import allowed, topic_allowed
from samsa.handlers.context import BrokerServices, RequestContext
from samsa.handlers.txn_verification import (
    NOT_ADDED,
    needs_verification,
    refusals,
    transactional_producer,
)
from samsa.metadata import TopicPartition
from samsa.protocol.errors import CloseConnection, ErrorCode
from samsa.protocol.messages import ms
from samsa.protocol.pipelining import Deferred
from samsa.protocol.produce_fetch_responses import (
    ProducePartitionResult,
    ProduceTopicResult,
    encode_produce_response,
)
from samsa.protocol.produce_request import parse_produce_request
from samsa.protocol.record_batch import ATTRIBUTES_OFFSET, TRANSACTIONAL_MASK
from samsa.replica import ProducePartitionResponse
from samsa.security.acl import AclOperation, ResourceType

KEY = 0
# v0-v2 carry message format v0/v1, which this broker does not store: they are advertised only
# because librdkafka before 2.11.1 turns compression off for a broker whose Produce range does
# not start at 0 (Kafka 4 advertises them for the same reason), and, as in Kafka 4, such a
# request closes the connection.
MIN_VERSION, MAX_VERSION = 0, 12
FIRST_RECORD_BATCH_VERSION = 3
VERIFICATION_ENABLE = "transaction.partition.verification.enable"
decode = parse_produce_request


def handle(services: BrokerServices, ctx: RequestContext, request: Any) -> Any:
    if ctx.version < FIRST_RECORD_BATCH_VERSION:
        raise CloseConnection
    txn_id = request.transactional_id
    if (
        txn_id is not None
        and services.verify_transaction is not None
        and request.acks in (-1, 0, 1)
        # Kafka authorizes before it verifies: a refused request asks nobody.
        and allowed(services, ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, txn_id)
    ):
        unverified = _unverified(services, ctx, request)
        if unverified is not None and services.dynamic_config()[VERIFICATION_ENABLE]:
            _keep_records(request)
            return _verified(services, ctx, request, txn_id, *unverified)
    return _append(services, ctx, request, {})


def _keep_records(request: Any) -> None:
    """Copy the records out of the connection's receive buffer, which the frames arriving
    while the coordinator is asked overwrite. Here, not in the coroutine: the connection
    reads on before a coroutine's first step runs (one transaction's first batches only)."""
    for topic_data in request.topic_data:
        for pdata in topic_data.partition_data:
            if pdata.records is not None:
                pdata.records = memoryview(bytes(pdata.records))


def _unverified(
    services: BrokerServices, ctx: RequestContext, request: Any
) -> tuple[int, int, list[TopicPartition]] | None:
    """(producer id, epoch, partitions) of the transactional batches that begin the
    producer's transaction on a partition led here, or None if there are none."""
    producer: tuple[int, int] | None = None
    tps: list[TopicPartition] = []
    for topic_data in request.topic_data:
        if not topic_allowed(services, ctx, AclOperation.WRITE, topic_data.name):
            continue
        for pdata in topic_data.partition_data:
            found = transactional_producer(pdata.records)
            if found is None:
                continue
            tp = TopicPartition(topic_data.name, pdata.index)
            if needs_verification(services.replica_manager, tp, *found):
                producer = producer or found
                tps.append(tp)
    if producer is None:
        return None
    return producer[0], producer[1], tps


async def _verified(
    services: BrokerServices,
    ctx: RequestContext,
    request: Any,
    txn_id: str,
    producer_id: int,
    producer_epoch: int,
    tps: list[TopicPartition],
) -> Any:
    assert services.verify_transaction is not None
    guards = {}
    for tp in tps:
        partition = services.replica_manager.get_partition(tp)
        if partition is not None:
            state = partition.log.producer_state
            guard = state.verification_guards[producer_id] = object()
            guards[tp] = (state, guard)
    answers = await services.verify_transaction(txn_id, producer_id, producer_epoch, tps)
    refused = refusals(answers, ctx.version)
    for tp, (state, guard) in guards.items():
        # Kafka's VerificationGuard: something of this producer (its transaction's marker)
        # was appended while the coordinator was asked, so the answer may be stale.
        if state.verification_guards.get(producer_id) is guard:
            del state.verification_guards[producer_id]
        elif tp not in refused:
            refused[tp] = (ErrorCode.invalid_txn_state, NOT_ADDED)
    result = _append(services, ctx, request, refused)
    if isinstance(result, Deferred):
        return await result.awaitable
    return result


def _append(
    services: BrokerServices,
    ctx: RequestContext,
    request: Any,
    refused: dict[TopicPartition, tuple[ErrorCode, str | None]],
) -> Any:
    acks = request.acks
    cache = services.cache
    replica_manager = services.replica_manager
    topics: list[ProduceTopicResult] = []
    # acks=all partitions whose records the ISR does not have yet.
    waiting: list[tuple[TopicPartition, ProducePartitionResponse, ProducePartitionResult]] = []
    failed = False
    bad_acks = acks not in (-1, 0, 1)
    # Kafka's rule: transactional batches need WRITE on the request's transactional id,
    # or every partition is refused.
    txn_denied = _has_transactional_records(request) and not (
        request.transactional_id is not None
        and allowed(
            services,
            ctx,
            AclOperation.WRITE,
            ResourceType.TRANSACTIONAL_ID,
            request.transactional_id,
        )
    )
    for topic_data in request.topic_data:
        name = topic_data.name
        writable = topic_allowed(services, ctx, AclOperation.WRITE, name)
        results = []
        for pdata in topic_data.partition_data:
            if bad_acks:
                result = ProducePartitionResult(
                    pdata.index, ErrorCode.invalid_required_acks.value, -1
                )
            elif txn_denied:
                result = ProducePartitionResult(
                    pdata.index, ErrorCode.transactional_id_authorization_failed.value, -1
                )
            elif not writable:
                result = ProducePartitionResult(
                    pdata.index, ErrorCode.topic_authorization_failed.value, -1
                )
            elif cache.topic(name) is None:
                result = ProducePartitionResult(
                    pdata.index, ErrorCode.unknown_topic_or_partition.value, -1
                )
            elif (name, pdata.index) in refused:
                code, message = refused[TopicPartition(name, pdata.index)]
                result = ProducePartitionResult(pdata.index, code.value, -1, error_message=message)
            else:
                tp = TopicPartition(name, pdata.index)
                r = replica_manager.append_records(tp, pdata.records, acks, 0)
                result = ProducePartitionResult(
                    pdata.index,
                    r.error_code,
                    r.base_offset,
                    r.log_append_time_ms,
                    r.log_start_offset,
                    r.error_message,
                    r.record_errors,
                )
                if r.required_offset >= 0:
                    waiting.append((tp, r, result))
            failed = failed or result.error_code != 0
            results.append(result)
        topics.append(ProduceTopicResult(name, results))
    appended = perf_counter()
    stages = replica_manager.stages
    stages.observe("produce_append", appended - ctx.started)
    throttle = throttling.produce(services, ctx, acks) if services.quotas.active else 0
    if waiting:
        # The records are appended: later requests on this connection need not wait for the ISR.
        return Deferred(
            _await_acks(services, ctx, topics, waiting, ms(request.timeout), appended, throttle)
        )
    if acks == 0:
        # The producer reads no answer, so closing the connection is how it learns of an error
        # (Kafka does the same) and refreshes its metadata.
        if failed:
            raise CloseConnection
        return None
    return [encode_produce_response(ctx.version, ctx.header.correlation_id, topics, throttle)]


def _has_transactional_records(request: Any) -> bool:
    """Whether a partition's first batch is transactional (Kafka's hasTransactionalRecords)."""
    for topic_data in request.topic_data:
        for pdata in topic_data.partition_data:
            records = pdata.records
            if (
                records is not None
                and len(records) > ATTRIBUTES_OFFSET + 1
                and records[ATTRIBUTES_OFFSET + 1] & TRANSACTIONAL_MASK
            ):
                return True
    return False


async def _await_acks(
    services: BrokerServices,
    ctx: RequestContext,
    topics: list[ProduceTopicResult],
    waiting: list[tuple[TopicPartition, ProducePartitionResponse, ProducePartitionResult]],
    timeout_ms: int,
    appended: float,
    throttle_ms: int,
) -> Any:
    """acks=all: answer once every partition's records are on its whole ISR, or time out."""
    manager = services.replica_manager
    await manager.wait_for_all_acks([(tp, r) for tp, r, _ in waiting], timeout_ms / 1000)
    for _, r, result in waiting:
        result.error_code = r.error_code
        if r.error_code:
            result.base_offset = -1
    answer = [encode_produce_response(ctx.version, ctx.header.correlation_id, topics, throttle_ms)]
    manager.stages.since("ack_wait", appended)
    return answer
