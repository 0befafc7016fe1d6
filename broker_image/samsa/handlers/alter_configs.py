"""AlterConfigs (33): replace a resource's overrides with the given set (the legacy API)."""

from __future__ import annotations

from typing import Any

from samsa.handlers import configs
from samsa.handlers.context import BrokerServices, RequestContext
from samsa.handlers.topic_admin import duplicated
from samsa.protocol.errors import ErrorCode, KafkaApiError
from samsa.security.acl import AclOperation

KEY = 33
MIN_VERSION, MAX_VERSION = 0, 2


async def handle(services: BrokerServices, ctx: RequestContext, request: Any) -> dict[str, Any]:
    responses = []
    twice = duplicated((r.resource_type, r.resource_name) for r in request.resources)
    for resource in request.resources:
        entry: dict[str, Any] = {
            "error_code": ErrorCode.none,
            "error_message": None,
            "resource_type": resource.resource_type,
            "resource_name": resource.resource_name,
        }
        if (resource.resource_type, resource.resource_name) in twice:
            entry["error_code"] = ErrorCode.invalid_request
            entry["error_message"] = "Duplicate resource in request."
            responses.append(entry)
            continue
        try:
            configs.authorize(
                services,
                ctx,
                resource.resource_type,
                resource.resource_name,
                AclOperation.ALTER_CONFIGS,
            )
            wanted = {c.name: c.value for c in resource.configs}
            await configs.replace(
                services,
                resource.resource_type,
                resource.resource_name,
                wanted,
                request.validate_only,
            )
        except KafkaApiError as exc:
            entry.update(configs.resource_error(exc))
        responses.append(entry)
    return {"throttle_time": 0, "responses": responses}
