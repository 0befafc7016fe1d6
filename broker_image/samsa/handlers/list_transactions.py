"""ListTransactions (66): the transactional ids this broker coordinates, filtered.

An admin client asks every broker. Filters: state, producer id and (v1) how long they have
been running. Only ids the principal may DESCRIBE are listed."""

from __future__ import annotations

from typing import Any

from samsa.handlers.authorization import transactional_id_allowed
from samsa.handlers.context import BrokerServices, RequestContext
from samsa.handlers.transactions import transaction_coordinator
from samsa.protocol.errors import ErrorCode
from samsa.security.acl import AclOperation

KEY = 66
# v2 filters by transactional id pattern (KIP-1152): not served.
MIN_VERSION, MAX_VERSION = 0, 1


async def handle(services: BrokerServices, ctx: RequestContext, request: Any) -> dict[str, Any]:
    tc = transaction_coordinator(services)
    if tc is None:
        return {
            "throttle_time": 0,
            "error_code": ErrorCode.coordinator_not_available,
            "unknown_state_filters": [],
            "transaction_states": [],
        }
    result = tc.list_transactions(
        request.state_filters,
        request.producer_id_filters,
        getattr(request, "duration_filter", -1),
    )
    return {
        "throttle_time": 0,
        "error_code": result.error,
        "unknown_state_filters": list(result.unknown_state_filters),
        "transaction_states": [
            {
                "transactional_id": t.transactional_id,
                "producer_id": t.producer_id,
                "transaction_state": t.state,
            }
            for t in result.transactions
            if transactional_id_allowed(services, ctx, AclOperation.DESCRIBE, t.transactional_id)
        ],
    }
