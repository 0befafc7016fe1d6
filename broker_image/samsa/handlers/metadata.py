"""Metadata (3): brokers, controller, topics with ids, partitions with leaders and ISRs."""

from __future__ import annotations

import logging
import uuid
from typing import Any

from samsa.handlers.authorization import (
    NOT_PROVIDED,
    cluster_allowed,
    cluster_operations,
    operations,
    topic_allowed,
)
from samsa.handlers.context import BrokerServices, RequestContext
from samsa.handlers.topic_admin import auto_create_topic
from samsa.metadata import TopicMetadata, validate_topic_name
from samsa.protocol.errors import CloseConnection, ErrorCode, KafkaApiError
from samsa.security.acl import AclOperation, ResourceType

KEY = 3
MIN_VERSION, MAX_VERSION = 0, 13
ZERO_UUID = uuid.UUID(int=0)
# Topics asked for by id (KIP-516); v10 and v11 carry the field but may not use it.
FIRST_BY_ID = 12
log = logging.getLogger(__name__)


def _partitions(
    services: BrokerServices, topic: TopicMetadata, listener: str
) -> list[dict[str, Any]]:
    states = services.cache.partition_states(topic.name)
    # A leader without the client's listener is one the client cannot reach.
    live = {b.id for b in services.cache.brokers(listener)}
    out = []
    for p in sorted(topic.assignment):
        replicas = topic.assignment[p]
        state = states.get(p)
        leader = state.leader if state else -1
        error = ErrorCode.none if leader in live else ErrorCode.leader_not_available
        out.append(
            {
                "error_code": error,
                "partition_index": p,
                "leader_id": leader,
                "leader_epoch": state.leader_epoch if state else -1,
                "replica_nodes": list(state.replicas if state else replicas),
                "isr_nodes": list(state.isr) if state else [],
                "offline_replicas": [r for r in replicas if r not in live],
            }
        )
    return out


def _topic_entry(
    services: BrokerServices, topic: TopicMetadata, listener: str, ops: int = NOT_PROVIDED
) -> dict[str, Any]:
    return {
        "error_code": ErrorCode.none,
        "name": topic.name,
        "topic_id": topic.topic_id,
        "is_internal": topic.internal,
        "partitions": _partitions(services, topic, listener),
        "topic_authorized_operations": ops,
    }


def _error_entry(name: str | None, topic_id: uuid.UUID | None, code: ErrorCode) -> dict[str, Any]:
    return {
        "error_code": code,
        "name": name,
        "topic_id": topic_id or ZERO_UUID,
        "is_internal": False,
        "partitions": [],
    }


def _response(
    services: BrokerServices,
    topics: list[dict[str, Any]],
    listener: str,
    cluster_ops: int = NOT_PROVIDED,
) -> dict[str, Any]:
    cache = services.cache
    return {
        "throttle_time": 0,
        "brokers": [
            {"node_id": b.id, "host": b.host, "port": b.port, "rack": b.rack}
            for b in cache.brokers(listener)
        ],
        "cluster_id": cache.cluster_id,
        "controller_id": cache.controller_id,
        "topics": topics,
        "cluster_authorized_operations": cluster_ops,
        "error_code": ErrorCode.none,
    }


def handle(services: BrokerServices, ctx: RequestContext, request: Any) -> Any:
    result = _handle(services, ctx, request)
    if isinstance(result, dict):
        return _with_operations(services, ctx, request, result)

    async def finish() -> dict[str, Any]:
        return _with_operations(services, ctx, request, await result)

    return finish()


def _with_operations(
    services: BrokerServices, ctx: RequestContext, request: Any, response: dict[str, Any]
) -> dict[str, Any]:
    """KIP-430's fields, as Kafka fills them: on every topic entry the principal may describe,
    errors included (a topic just auto-created among them), and on the cluster."""
    if getattr(request, "include_topic_authorized_operations", False):
        for topic in response["topics"]:
            if topic["name"] and topic["error_code"] != ErrorCode.topic_authorization_failed:
                topic["topic_authorized_operations"] = operations(
                    services, ctx, ResourceType.TOPIC, topic["name"]
                )
    if getattr(request, "include_cluster_authorized_operations", False):
        response["cluster_authorized_operations"] = cluster_operations(
            services, ctx, True, denied=NOT_PROVIDED
        )
    return response


def _handle(services: BrokerServices, ctx: RequestContext, request: Any) -> Any:
    cache = services.cache
    listener = ctx.conn.listener
    requested = request.topics
    if ctx.version < FIRST_BY_ID and requested:
        _refuse_ids_before_v12(ctx, requested)

    def entry(topic: TopicMetadata) -> dict[str, Any]:
        return _topic_entry(services, topic, listener)

    def describable(name: str) -> bool:
        return topic_allowed(services, ctx, AclOperation.DESCRIBE, name)

    if requested is None or (ctx.version == 0 and not requested):
        # Only the topics this principal may describe.
        topics = [entry(t) for t in cache.topics() if describable(t.name)]
        return _response(services, topics, listener)
    allow_auto = getattr(request, "allow_auto_topic_creation", True)
    auto = allow_auto and services.dynamic_config()["auto.create.topics.enable"]
    entries: list[dict[str, Any] | None] = []
    to_create: list[tuple[int, str]] = []
    for item in requested:
        name = item.name
        topic_id = getattr(item, "topic_id", None)
        # Asked by id, the name is null (or, from Kafka 4's Java client, empty).
        if not name and topic_id not in (None, ZERO_UUID):
            name = cache.topic_name(topic_id)
            if name is None:
                entries.append(_error_entry(None, topic_id, ErrorCode.unknown_topic_id))
                continue
        if name and not describable(name):
            entries.append(_error_entry(name, None, ErrorCode.topic_authorization_failed))
            continue
        topic = cache.topic(name) if name else None
        if topic is not None:
            entries.append(entry(topic))
            continue
        if name and validate_topic_name(name) is not None:
            entries.append(_error_entry(name, None, ErrorCode.invalid_topic_exception))
        elif name and auto and not _may_create(services, ctx, name):
            entries.append(_error_entry(name, None, ErrorCode.topic_authorization_failed))
        elif name and auto:
            to_create.append((len(entries), name))
            entries.append(None)
        else:
            entries.append(_error_entry(name, None, ErrorCode.unknown_topic_or_partition))
    if not to_create:
        return _response(services, [e for e in entries if e is not None], listener)
    return _auto_create(services, entries, to_create, listener)


def _refuse_ids_before_v12(ctx: RequestContext, requested: Any) -> None:
    """As Kafka's KafkaApis: a null name or a topic id before v12 is an invalid request.
    Its answer could not even be written (the response's names cannot be null before v12),
    so the connection is closed, as for any malformed request."""
    for item in requested:
        topic_id = getattr(item, "topic_id", None)
        if item.name is None or topic_id not in (None, ZERO_UUID):
            log.info(
                "closing connection from %s: Metadata v%d names a topic by id (v%d and later)",
                ctx.conn.peer,
                ctx.version,
                FIRST_BY_ID,
            )
            raise CloseConnection


def _may_create(services: BrokerServices, ctx: RequestContext, name: str) -> bool:
    return cluster_allowed(services, ctx, AclOperation.CREATE) or topic_allowed(
        services, ctx, AclOperation.CREATE, name
    )


async def _auto_create(
    services: BrokerServices,
    entries: list[dict[str, Any] | None],
    to_create: list[tuple[int, str]],
    listener: str,
) -> dict[str, Any]:
    for index, name in to_create:
        try:
            await auto_create_topic(services, name)
        except KafkaApiError as exc:
            entries[index] = _error_entry(name, None, exc.code)
            continue
        # Kafka answers LEADER_NOT_AVAILABLE for a topic it just created; clients retry.
        topic = services.cache.topic(name)
        if topic is None:
            entries[index] = _error_entry(name, None, ErrorCode.leader_not_available)
        else:
            entries[index] = _topic_entry(services, topic, listener)
    return _response(services, [e for e in entries if e is not None], listener)
