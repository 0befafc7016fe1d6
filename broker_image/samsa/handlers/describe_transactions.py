"""DescribeTransactions (65): the state of transactional ids this broker coordinates."""

from __future__ import annotations

from typing import Any

from samsa.handlers.authorization import transactional_id_allowed
from samsa.handlers.context import BrokerServices, RequestContext
from samsa.handlers.transactions import transaction_coordinator
from samsa.protocol.errors import ErrorCode
from samsa.security.acl import AclOperation

KEY = 65
MIN_VERSION, MAX_VERSION = 0, 0


def _entry(txn_id: str, error: ErrorCode) -> dict[str, Any]:
    # Kafka's defaults for the fields an error leaves unset.
    return {
        "error_code": error,
        "transactional_id": txn_id,
        "transaction_state": "",
        "transaction_timeout": 0,
        "transaction_start_time": 0,
        "producer_id": 0,
        "producer_epoch": 0,
        "topics": [],
    }


async def handle(services: BrokerServices, ctx: RequestContext, request: Any) -> dict[str, Any]:
    tc = transaction_coordinator(services)
    states = []
    for txn_id in request.transactional_ids:
        if not transactional_id_allowed(services, ctx, AclOperation.DESCRIBE, txn_id):
            states.append(_entry(txn_id, ErrorCode.transactional_id_authorization_failed))
            continue
        if tc is None:
            states.append(_entry(txn_id, ErrorCode.coordinator_not_available))
            continue
        d = tc.describe(txn_id)
        if d.error is not ErrorCode.none:
            states.append(_entry(txn_id, d.error))
            continue
        by_topic: dict[str, list[int]] = {}
        for tp in d.partitions:
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        states.append(
            {
                "error_code": ErrorCode.none,
                "transactional_id": txn_id,
                "transaction_state": d.state,
                "transaction_timeout": d.timeout_ms,
                "transaction_start_time": d.start_time_ms,
                "producer_id": d.producer_id,
                "producer_epoch": d.producer_epoch,
                "topics": [{"topic": t, "partitions": ps} for t, ps in by_topic.items()],
            }
        )
    return {"throttle_time": 0, "transaction_states": states}
