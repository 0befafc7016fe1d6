"""AlterClientQuotas (49): set and remove the quotas of users, client ids and their defaults;
each entity is validated as Kafka validates it and answered on its own."""

from __future__ import annotations

from typing import Any

from samsa.handlers.authorization import cluster_allowed
from samsa.handlers.context import BrokerServices, RequestContext
from samsa.protocol.errors import ErrorCode
from samsa.quota.entities import QuotaEntity, QuotaError, altered, entity
from samsa.security.acl import AclOperation

KEY = 49
MIN_VERSION, MAX_VERSION = 0, 1


def _result(e: QuotaEntity, code: ErrorCode, message: str | None = None) -> dict[str, Any]:
    return {
        "error_code": code,
        "error_message": message,
        "entity": [{"entity_type": t, "entity_name": n} for t, n in e],
    }


async def handle(services: BrokerServices, ctx: RequestContext, request: Any) -> dict[str, Any]:
    entities = [
        entity((p.entity_type, p.entity_name) for p in entry.entity) for entry in request.entries
    ]
    if not cluster_allowed(services, ctx, AclOperation.ALTER_CONFIGS):
        return {
            "throttle_time": 0,
            "entries": [_result(e, ErrorCode.cluster_authorization_failed) for e in entities],
        }
    store = services.quota_store
    assert store is not None
    current = await store.quotas()
    # Kafka answers per entity (a map): an entity named twice gets one answer, an error.
    results: dict[QuotaEntity, dict[str, Any]] = {}
    changes: dict[QuotaEntity, dict[str, float]] = {}
    for e, entry in zip(entities, request.entries, strict=True):
        if e in results:
            results[e] = _result(e, ErrorCode.invalid_request, f"Ignoring duplicate entity {e}")
            changes.pop(e, None)
            continue
        try:
            ops = ((op.key, op.value, op.remove) for op in entry.ops)
            new = altered(current.get(e, {}), e, ops)
        except QuotaError as exc:
            results[e] = _result(e, ErrorCode.invalid_request, exc.message)
            continue
        results[e] = _result(e, ErrorCode.none)
        if new != current.get(e, {}):
            changes[e] = new
    if not request.validate_only and changes:
        for e, values in changes.items():
            await store.set_quotas(e, values)
        current.update(changes)
        # Applied here at once; the other brokers hear of it through the store.
        services.quotas.update({e: v for e, v in current.items() if v})
    return {"throttle_time": 0, "entries": list(results.values())}
