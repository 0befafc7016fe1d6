"""ApiVersions (18): what this broker speaks, exactly the handler table."""

from __future__ import annotations

import io
import struct
from typing import Any

from samsa.handlers.context import BrokerServices, RequestContext
from samsa.protocol.errors import ErrorCode

KEY = 18
MIN_VERSION, MAX_VERSION = 0, 4


def _api_keys(table: dict[int, Any]) -> list[dict[str, int]]:
    return [
        {"api_key": api.key, "min_version": api.min_version, "max_version": api.max_version}
        for api in sorted(table.values(), key=lambda a: a.key)
    ]


def handle(services: BrokerServices, ctx: RequestContext, request: Any) -> dict[str, Any]:
    return {
        "error_code": ErrorCode.none,
        "api_keys": _api_keys(services.api_table),
        "throttle_time": 0,
        "supported_features": [],
        "finalized_features_epoch": -1,
        "finalized_features": [],
        "zk_migration_ready": False,
    }


def unsupported_version_response(correlation_id: int, table: dict[int, Any]) -> bytes:
    """A v0 ApiVersions response with UNSUPPORTED_VERSION, as Kafka sends to newer clients:
    only ApiVersions' own range, which is all a client needs to ask again."""
    keys = _api_keys({KEY: table[KEY]})
    out = io.BytesIO()
    out.write(struct.pack(">ii", 0, correlation_id))
    out.write(struct.pack(">hi", ErrorCode.unsupported_version.value, len(keys)))
    for entry in keys:
        out.write(struct.pack(">hhh", entry["api_key"], entry["min_version"], entry["max_version"]))
    data = bytearray(out.getvalue())
    struct.pack_into(">i", data, 0, len(data) - 4)
    return bytes(data)
