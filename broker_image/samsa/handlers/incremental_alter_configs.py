"""IncrementalAlterConfigs (44): set, delete, append to or subtract from single keys."""

from __future__ import annotations

from typing import Any

from samsa.config import TOPIC_CONFIG
from samsa.config.kafka import BROKER_CONFIG
from samsa.handlers import configs
from samsa.handlers.context import BrokerServices, RequestContext
from samsa.handlers.topic_admin import duplicated
from samsa.protocol.errors import ErrorCode, KafkaApiError
from samsa.security.acl import AclOperation

KEY = 44
MIN_VERSION, MAX_VERSION = 0, 1
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


def _apply(current: dict[str, str], resource_type: int, ops: list[Any]) -> dict[str, str]:
    result = dict(current)
    names = [op.name for op in ops]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise KafkaApiError(
            ErrorCode.invalid_request, f"Error due to duplicate config keys: {', '.join(dupes)}"
        )
    definitions = TOPIC_CONFIG if resource_type == configs.TOPIC else BROKER_CONFIG
    for op in ops:
        kind = op.config_operation
        if kind == SET:
            result[op.name] = op.value
        elif kind == DELETE:
            result.pop(op.name, None)
        elif kind in (APPEND, SUBTRACT):
            key = definitions.keys.get(op.name)
            if key is None or key.type != "list":
                raise KafkaApiError(
                    ErrorCode.invalid_config,
                    f"Config value append/subtract is not allowed for config '{op.name}' as it "
                    "is not a list",
                )
            base = result.get(op.name)
            items = base.split(",") if base else [str(v) for v in key.default or []]
            given = [v.strip() for v in (op.value or "").split(",") if v.strip()]
            if kind == APPEND:
                items += [v for v in given if v not in items]
            else:
                items = [v for v in items if v not in given]
            result[op.name] = ",".join(items)
        else:
            raise KafkaApiError(ErrorCode.invalid_request, f"Unknown operation {kind}")
    return result


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
            current = await configs.current_overrides(
                services, resource.resource_type, resource.resource_name
            )
            wanted = _apply(current, resource.resource_type, list(resource.configs))
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
