"""EndTxn (26): commit or abort; answered once the decision is durable, the markers follow.

The decision is PrepareCommit/PrepareAbort in __transaction_state; the coordinator then
writes the markers and CompleteCommit/CompleteAbort."""

from __future__ import annotations

from typing import Any

from samsa.handlers.authorization import transactional_id_allowed
from samsa.handlers.context import BrokerServices, RequestContext
from samsa.handlers.transactions import fenced_for, transaction_coordinator
from samsa.protocol.errors import ErrorCode
from samsa.security.acl import AclOperation

KEY = 26
# v4 only adds TRANSACTION_ABORTABLE; v5 is KIP-890's epoch bump on every end (not served).
MIN_VERSION, MAX_VERSION = 0, 4
FIRST_PRODUCER_FENCED = 2


async def handle(services: BrokerServices, ctx: RequestContext, request: Any) -> dict[str, Any]:
    def answer(error: ErrorCode) -> dict[str, Any]:
        return {"throttle_time": 0, "error_code": error}

    txn_id = request.transactional_id
    if not transactional_id_allowed(services, ctx, AclOperation.WRITE, txn_id):
        return answer(ErrorCode.transactional_id_authorization_failed)
    tc = transaction_coordinator(services)
    if tc is None:
        return answer(ErrorCode.coordinator_not_available)
    error = await tc.end_transaction(
        txn_id, request.producer_id, request.producer_epoch, bool(request.committed)
    )
    return answer(fenced_for(ctx.version, FIRST_PRODUCER_FENCED, error))
