"""ControlledShutdown (7): a stopping broker asks the controller to move its leaderships away."""

from __future__ import annotations

from typing import Any

from kio.static.primitive import i32

from samsa.handlers.authorization import cluster_allowed
from samsa.handlers.context import BrokerServices, RequestContext
from samsa.protocol import controller_apis as apis
from samsa.protocol.errors import ErrorCode
from samsa.security.acl import AclOperation

KEY = apis.CONTROLLED_SHUTDOWN
MIN_VERSION = MAX_VERSION = apis.CONTROLLED_SHUTDOWN_VERSION


async def handle(services: BrokerServices, ctx: RequestContext, request: Any) -> Any:
    if not cluster_allowed(services, ctx, AclOperation.CLUSTER_ACTION):
        return apis.ControlledShutdownResponse(
            error_code=ErrorCode.cluster_authorization_failed, remaining_partitions=()
        )
    controller = services.controller
    if controller is None or not controller.active:
        return apis.ControlledShutdownResponse(
            error_code=ErrorCode.not_controller, remaining_partitions=()
        )
    error, remaining = await controller.controlled_shutdown(request.broker_id, request.broker_epoch)
    return apis.ControlledShutdownResponse(
        error_code=error,
        remaining_partitions=tuple(
            apis.RemainingPartition(topic_name=tp.topic, partition_index=i32(tp.partition))
            for tp in remaining
        ),
    )
