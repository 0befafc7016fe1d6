"""AlterPartition (56): a leader's ISR change, committed by the controller."""

from __future__ import annotations

from typing import Any

from samsa.handlers.authorization import cluster_allowed
from samsa.handlers.context import BrokerServices, RequestContext
from samsa.metadata import TopicPartition
from samsa.protocol.errors import ErrorCode
from samsa.security.acl import AclOperation

KEY = 56
MIN_VERSION, MAX_VERSION = 2, 2


async def handle(services: BrokerServices, ctx: RequestContext, request: Any) -> dict[str, Any]:
    if not cluster_allowed(services, ctx, AclOperation.CLUSTER_ACTION):
        return {
            "throttle_time": 0,
            "error_code": ErrorCode.cluster_authorization_failed,
            "topics": [],
        }
    controller = services.controller
    if controller is None or not controller.active:
        return {"throttle_time": 0, "error_code": ErrorCode.not_controller, "topics": []}
    names = {}
    items = []
    for topic in request.topics:
        name = services.cache.topic_name(topic.topic_id)
        for p in topic.partitions:
            if name is None:
                continue
            names[name] = topic.topic_id
            items.append(
                (
                    TopicPartition(name, p.partition_index),
                    p.leader_epoch,
                    p.partition_epoch,
                    tuple(p.new_isr),
                )
            )
    error, results = await controller.alter_partition(
        request.broker_id, request.broker_epoch, items
    )
    by_topic: dict[Any, list[dict[str, Any]]] = {}
    for topic in request.topics:
        name = services.cache.topic_name(topic.topic_id)
        for p in topic.partitions:
            found = results.get(TopicPartition(name, p.partition_index)) if name else None
            code, state = found if found is not None else (ErrorCode.unknown_topic_id, None)
            by_topic.setdefault(topic.topic_id, []).append(
                {
                    "partition_index": p.partition_index,
                    "error_code": code,
                    "leader_id": state.leader if state else -1,
                    "leader_epoch": state.leader_epoch if state else -1,
                    "isr": list(state.isr) if state else [],
                    "leader_recovery_state": 0,
                    "partition_epoch": state.zk_version if state else -1,
                }
            )
    return {
        "throttle_time": 0,
        "error_code": error,
        "topics": [{"topic_id": t, "partitions": ps} for t, ps in by_topic.items()],
    }
