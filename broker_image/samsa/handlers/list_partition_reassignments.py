"""ListPartitionReassignments (46): the reassignments in progress."""

from __future__ import annotations

from typing import Any

from samsa.handlers.authorization import cluster_allowed
from samsa.handlers.context import BrokerServices, RequestContext
from samsa.metadata import TopicPartition
from samsa.protocol.errors import ErrorCode
from samsa.security.acl import AclOperation

KEY = 46
MIN_VERSION, MAX_VERSION = 0, 0


def handle(services: BrokerServices, ctx: RequestContext, request: Any) -> dict[str, Any]:
    controller = services.controller
    if not cluster_allowed(services, ctx, AclOperation.DESCRIBE):
        return {
            "throttle_time": 0,
            "error_code": ErrorCode.cluster_authorization_failed,
            "error_message": None,
            "topics": [],
        }
    if controller is not None and not controller.active:
        return {
            "throttle_time": 0,
            "error_code": ErrorCode.not_controller,
            "error_message": "This broker is not the controller",
            "topics": [],
        }
    wanted = (
        None
        if request.topics is None
        else [TopicPartition(t.name, p) for t in request.topics for p in t.partition_indexes]
    )
    found = controller.list_reassignments(wanted) if controller is not None else {}
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for tp, (replicas, adding, removing) in sorted(found.items()):
        by_topic.setdefault(tp.topic, []).append(
            {
                "partition_index": tp.partition,
                "replicas": replicas,
                "adding_replicas": adding,
                "removing_replicas": removing,
            }
        )
    return {
        "throttle_time": 0,
        "error_code": ErrorCode.none,
        "error_message": None,
        "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()],
    }
