"""FindCoordinator (10): the leader of a group's or a transactional id's coordinator partition.

A group's is its __consumer_offsets partition; a transactional id's (key type 1) its
__transaction_state partition, that topic being created on first use."""

from __future__ import annotations

from typing import Any

from samsa.coordinator import GROUP_METADATA_TOPIC_NAME
from samsa.coordinator.transaction import TRANSACTION_STATE_TOPIC_NAME
from samsa.handlers.authorization import group_allowed, transactional_id_allowed
from samsa.handlers.context import BrokerServices, RequestContext
from samsa.handlers.groups import coordinator
from samsa.handlers.topic_admin import ensure_offsets_topic, ensure_transaction_state_topic
from samsa.handlers.transactions import transaction_coordinator
from samsa.protocol.errors import ErrorCode, KafkaApiError
from samsa.security.acl import AclOperation

KEY = 10
MIN_VERSION, MAX_VERSION = 0, 6
GROUP_KEY_TYPE = 0
TRANSACTION_KEY_TYPE = 1
# v4 (KIP-699) batches keys; earlier versions ask for one.
FIRST_BATCHED = 4


def _leader_entry(
    services: BrokerServices, entry: dict[str, Any], topic: str, partition: int, listener: str
) -> dict[str, Any]:
    state = services.cache.partition_state(topic, partition)
    broker = services.cache.broker(state.leader, listener) if state is not None else None
    if broker is None:
        entry["error_code"] = ErrorCode.coordinator_not_available
        entry["error_message"] = f"{topic}-{partition} has no leader"
        return entry
    entry.update(node_id=broker.id, host=broker.host, port=broker.port)
    return entry


async def _transaction_lookup(
    services: BrokerServices, ctx: RequestContext, entry: dict[str, Any], key: str
) -> dict[str, Any]:
    if not transactional_id_allowed(services, ctx, AclOperation.DESCRIBE, key):
        entry["error_code"] = ErrorCode.transactional_id_authorization_failed
        return entry
    tc = transaction_coordinator(services)
    if tc is None:
        entry["error_code"] = ErrorCode.coordinator_not_available
        return entry
    if services.cache.topic(TRANSACTION_STATE_TOPIC_NAME) is None:
        try:
            await ensure_transaction_state_topic(services)
        except KafkaApiError as exc:
            entry["error_code"] = ErrorCode.coordinator_not_available
            entry["error_message"] = exc.message
            return entry
    return _leader_entry(
        services, entry, TRANSACTION_STATE_TOPIC_NAME, tc.partition_for(key), ctx.conn.listener
    )


async def _lookup(
    services: BrokerServices, ctx: RequestContext, key: str, key_type: int
) -> dict[str, Any]:
    listener = ctx.conn.listener
    entry: dict[str, Any] = {
        "key": key,
        "node_id": -1,
        "host": "",
        "port": -1,
        "error_code": ErrorCode.none,
        "error_message": None,
    }
    if key_type == TRANSACTION_KEY_TYPE:
        return await _transaction_lookup(services, ctx, entry, key)
    if key_type != GROUP_KEY_TYPE:
        entry["error_code"] = ErrorCode.invalid_request
        entry["error_message"] = f"Unknown coordinator key type {key_type}"
        return entry
    if not group_allowed(services, ctx, AclOperation.DESCRIBE, key):
        entry["error_code"] = ErrorCode.group_authorization_failed
        return entry
    group_coordinator = coordinator(services)
    if group_coordinator is None or not group_coordinator.is_active:
        entry["error_code"] = ErrorCode.coordinator_not_available
        return entry
    if services.cache.topic(GROUP_METADATA_TOPIC_NAME) is None:
        try:
            await ensure_offsets_topic(services)
        except KafkaApiError as exc:
            entry["error_code"] = ErrorCode.coordinator_not_available
            entry["error_message"] = exc.message
            return entry
    partition = group_coordinator.partition_for(key)
    return _leader_entry(services, entry, GROUP_METADATA_TOPIC_NAME, partition, listener)


async def handle(services: BrokerServices, ctx: RequestContext, request: Any) -> dict[str, Any]:
    key_type = getattr(request, "key_type", GROUP_KEY_TYPE)
    if ctx.version >= FIRST_BATCHED:
        return {
            "throttle_time": 0,
            "coordinators": [
                await _lookup(services, ctx, k, key_type) for k in request.coordinator_keys
            ],
        }
    entry = await _lookup(services, ctx, request.key, key_type)
    return {"throttle_time": 0, **entry}
