"""DescribeConfigs (32): topic and broker configs with their sources."""

from __future__ import annotations

from typing import Any

from samsa.handlers import configs
from samsa.handlers.context import BrokerServices, RequestContext
from samsa.handlers.topic_admin import DYNAMIC_TOPIC_CONFIG
from samsa.protocol.errors import ErrorCode, KafkaApiError
from samsa.security.acl import AclOperation

KEY = 32
MIN_VERSION, MAX_VERSION = 1, 4


async def handle(services: BrokerServices, ctx: RequestContext, request: Any) -> dict[str, Any]:
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
            configs.authorize(
                services,
                ctx,
                resource.resource_type,
                resource.resource_name,
                AclOperation.DESCRIBE_CONFIGS,
            )
            entries = await configs.describe(
                services, resource.resource_type, resource.resource_name
            )
        except KafkaApiError as exc:
            entry.update(configs.resource_error(exc))
            results.append(entry)
            continue
        keys = resource.configuration_keys
        if keys is not None:
            wanted = set(keys)
            entries = [e for e in entries if e["name"] in wanted]
        with_synonyms = getattr(request, "include_synonyms", False)
        for e in entries:
            e["synonyms"] = []
            if with_synonyms:
                own = []
                if e["config_source"] == DYNAMIC_TOPIC_CONFIG:
                    own = [
                        {
                            "name": e["name"],
                            "value": e["value"],
                            "source": DYNAMIC_TOPIC_CONFIG,
                        }
                    ]
                e["synonyms"] = own + configs.synonyms(services, resource.resource_type, e["name"])
            if not getattr(request, "include_documentation", False):
                e["documentation"] = None
        entry["configs"] = entries
        results.append(entry)
    return {"throttle_time": 0, "results": results}
