"""DescribeConfigs (32): topic and broker configs with their sources."""

from __future__ import annotations

from typing import Any

from samsa.handlers import configs
from samsa.handlers.context import BrokerServices, RequestContext
from samsa.protocol.errors import ErrorCode, KafkaApiError

KEY = 32
MIN_VERSION, MAX_VERSION = 1, 4


def handle(services: BrokerServices, ctx: RequestContext, request: Any) -> dict[str, Any]:
    results = []
    for resource in request.resources:
        entry: dict[str, Any] = {
            "error_code": ErrorCode.none,
            "error_message": None,
            "resource_type": resource.resource_type,
            "resource_name": resource.resource_name,
            "configs": [],
        }
        try:
            entries = configs.describe(services, resource.resource_type, resource.resource_name)
        except KafkaApiError as exc:
            entry.update(configs.resource_error(exc))
            results.append(entry)
            continue
        keys = resource.configuration_keys
        if keys is not None:
            wanted = set(keys)
            entries = [e for e in entries if e["name"] in wanted]
        for e in entries:
            e["synonyms"] = []
            if not request.include_documentation:
                e["documentation"] = None
        entry["configs"] = entries
        results.append(entry)
    return {"throttle_time": 0, "results": results}
