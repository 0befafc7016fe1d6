"""DescribeCluster (60): cluster id, controller and brokers."""

from __future__ import annotations

from typing import Any

from samsa.handlers import authorized_operations
from samsa.handlers.authorization import cluster_operations
from samsa.handlers.context import BrokerServices, RequestContext
from samsa.protocol.errors import ErrorCode

KEY = 60
MIN_VERSION, MAX_VERSION = 0, 2
BROKERS_ENDPOINT = 1


def handle(services: BrokerServices, ctx: RequestContext, request: Any) -> dict[str, Any]:
    endpoint_type = getattr(request, "endpoint_type", BROKERS_ENDPOINT)
    if endpoint_type != BROKERS_ENDPOINT:
        return {
            "throttle_time": 0,
            "error_code": ErrorCode.unsupported_endpoint_type,
            "error_message": "Only the brokers endpoint type is supported",
            "endpoint_type": endpoint_type,
            "cluster_id": services.cache.cluster_id,
            "controller_id": -1,
            "brokers": [],
            "cluster_authorized_operations": authorized_operations.NOT_REQUESTED,
        }
    cache = services.cache
    return {
        "throttle_time": 0,
        "error_code": ErrorCode.none,
        "error_message": None,
        "endpoint_type": endpoint_type,
        "cluster_id": cache.cluster_id,
        "controller_id": cache.controller_id,
        "brokers": [
            {"broker_id": b.id, "host": b.host, "port": b.port, "rack": b.rack, "is_fenced": False}
            for b in cache.brokers(ctx.conn.listener)
        ],
        "cluster_authorized_operations": cluster_operations(
            services, ctx, request.include_cluster_authorized_operations
        ),
    }
