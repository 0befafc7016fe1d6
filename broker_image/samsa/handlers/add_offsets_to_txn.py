"""AddOffsetsToTxn (25): the group's __consumer_offsets partition joins the transaction.

The transaction will commit the group's offsets (TxnOffsetCommit), so that partition gets
the transaction's marker too."""

from __future__ import annotations

from typing import Any

from samsa.coordinator import GROUP_METADATA_TOPIC_NAME
from samsa.handlers.authorization import group_allowed, transactional_id_allowed
from samsa.handlers.context import BrokerServices, RequestContext
from samsa.handlers.groups import coordinator
from samsa.handlers.transactions import fenced_for, transaction_coordinator
from samsa.metadata import TopicPartition
from samsa.protocol.errors import ErrorCode
from samsa.security.acl import AclOperation

KEY = 25
# v4 only adds TRANSACTION_ABORTABLE, which this coordinator never answers.
MIN_VERSION, MAX_VERSION = 0, 4
FIRST_PRODUCER_FENCED = 2


async def handle(services: BrokerServices, ctx: RequestContext, request: Any) -> dict[str, Any]:
    def answer(error: ErrorCode) -> dict[str, Any]:
        return {"throttle_time": 0, "error_code": error}

    txn_id = request.transactional_id
    if not transactional_id_allowed(services, ctx, AclOperation.WRITE, txn_id):
        return answer(ErrorCode.transactional_id_authorization_failed)
    if not group_allowed(services, ctx, AclOperation.READ, request.group_id):
        return answer(ErrorCode.group_authorization_failed)
    tc = transaction_coordinator(services)
    groups = coordinator(services)
    if tc is None or groups is None:
        return answer(ErrorCode.coordinator_not_available)
    offsets_tp = TopicPartition(GROUP_METADATA_TOPIC_NAME, groups.partition_for(request.group_id))
    error = await tc.add_partitions(
        txn_id, request.producer_id, request.producer_epoch, [offsets_tp]
    )
    return answer(fenced_for(ctx.version, FIRST_PRODUCER_FENCED, error))
