"""DeleteTopics (20): remove topics by name or id; their logs go with them."""

from __future__ import annotations

import uuid
from typing import Any

from samsa.handlers.authorization import topic_allowed
from samsa.handlers.context import BrokerServices, RequestContext
from samsa.handlers.topic_admin import duplicated
from samsa.metadata.names import is_internal
from samsa.protocol.errors import ErrorCode
from samsa.security.acl import AclOperation

KEY = 20
MIN_VERSION, MAX_VERSION = 1, 6
ZERO_UUID = uuid.UUID(int=0)


async def handle(services: BrokerServices, ctx: RequestContext, request: Any) -> dict[str, Any]:
    cache = services.cache
    wanted: list[tuple[str | None, uuid.UUID | None]] = []
    if ctx.version >= 6:
        wanted = [(t.name, t.topic_id if t.topic_id != ZERO_UUID else None) for t in request.topics]
    else:
        wanted = [(name, None) for name in request.topic_names]
    enabled = services.dynamic_config()["delete.topic.enable"]
    responses = []
    twice = duplicated(name for name, _ in wanted if name is not None)
    for name in sorted(twice):
        responses.append(
            {
                "name": name,
                "topic_id": ZERO_UUID,
                "error_code": ErrorCode.invalid_request,
                "error_message": "Duplicate topic in request.",
            }
        )
    for name, topic_id in wanted:
        if name in twice:
            continue
        by_id = False
        if name is None and topic_id is not None:
            by_id = True
            name = cache.topic_name(topic_id)
        topic = cache.topic(name) if name else None
        entry: dict[str, Any] = {
            "name": name,
            "topic_id": topic.topic_id if topic else (topic_id or ZERO_UUID),
            "error_code": ErrorCode.none,
            "error_message": None,
        }
        # As Kafka: DELETE on the topic is checked before it is looked up; a topic named by
        # an id the principal may not describe is not named back.
        if name is not None and not topic_allowed(services, ctx, AclOperation.DELETE, name):
            entry["error_code"] = ErrorCode.topic_authorization_failed
            if by_id and not topic_allowed(services, ctx, AclOperation.DESCRIBE, name):
                entry["name"] = None
        elif topic is None:
            entry["error_code"] = (
                ErrorCode.unknown_topic_id if name is None else ErrorCode.unknown_topic_or_partition
            )
        elif not enabled:
            entry["error_code"] = ErrorCode.topic_deletion_disabled
        elif is_internal(topic.name):
            entry["error_code"] = ErrorCode.topic_authorization_failed
            entry["error_message"] = f"Internal topic {topic.name} cannot be deleted"
        else:
            await services.store.delete_topic(topic.name)
        responses.append(entry)
    return {"throttle_time": 0, "responses": responses}
