"""DescribeClientQuotas (48): the quotas of the entities a filter matches, read from the store
of record, so that what one broker altered any broker describes at once."""

from __future__ import annotations

from typing import Any

from samsa.handlers.authorization import cluster_allowed
from samsa.handlers.context import BrokerServices, RequestContext
from samsa.protocol.errors import ErrorCode
from samsa.quota.entities import QuotaError, describe_filter
from samsa.security.acl import AclOperation

KEY = 48
MIN_VERSION, MAX_VERSION = 0, 1


def _error(code: ErrorCode, message: str | None) -> dict[str, Any]:
    return {"throttle_time": 0, "error_code": code, "error_message": message, "entries": None}


async def handle(services: BrokerServices, ctx: RequestContext, request: Any) -> dict[str, Any]:
    if not cluster_allowed(services, ctx, AclOperation.DESCRIBE_CONFIGS):
        return _error(ErrorCode.cluster_authorization_failed, None)
    try:
        wanted = describe_filter(
            ((c.entity_type, c.match_type, c.match) for c in request.components), request.strict
        )
    except QuotaError as exc:
        code = ErrorCode.unsupported_version if exc.unsupported else ErrorCode.invalid_request
        return _error(code, exc.message)
    assert services.quota_store is not None
    entries = [
        {
            "entity": [{"entity_type": t, "entity_name": n} for t, n in e],
            "values": [{"key": k, "value": v} for k, v in sorted(values.items())],
        }
        for e, values in sorted((await services.quota_store.quotas()).items(), key=_order)
        if values and wanted.matches(e)
    ]
    # An empty message, not null, on success: what Kafka answers.
    return {
        "throttle_time": 0,
        "error_code": ErrorCode.none,
        "error_message": "",
        "entries": entries,
    }


def _order(item: tuple[Any, Any]) -> list[tuple[str, str]]:
    return [(t, n or "") for t, n in item[0]]
