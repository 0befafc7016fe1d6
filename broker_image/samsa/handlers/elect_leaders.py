"""ElectLeaders (43): preferred or unclean leader elections, run by the controller."""

from __future__ import annotations

from typing import Any

from samsa.handlers.authorization import cluster_allowed
from samsa.handlers.context import BrokerServices, RequestContext
from samsa.metadata import TopicPartition
from samsa.protocol.errors import ErrorCode
from samsa.security.acl import AclOperation

KEY = 43
MIN_VERSION, MAX_VERSION = 0, 2
PREFERRED = 0


async def handle(services: BrokerServices, ctx: RequestContext, request: Any) -> dict[str, Any]:
    election_type = getattr(request, "election_type", PREFERRED)
    wanted = (
        None
        if request.topic_partitions is None
        else [TopicPartition(t.topic, p) for t in request.topic_partitions for p in t.partitions]
    )
    controller = services.controller
    top_error = ErrorCode.none
    results: dict[TopicPartition, tuple[ErrorCode, str | None]] = {}
    if not cluster_allowed(services, ctx, AclOperation.ALTER):
        top_error = ErrorCode.cluster_authorization_failed
        results = dict.fromkeys(wanted or [], (top_error, None))
    elif controller is None:
        # Standalone: every partition has one replica, which leads it already.
        for tp in wanted or []:
            known = services.cache.partition_state(tp.topic, tp.partition) is not None
            results[tp] = (
                ErrorCode.election_not_needed if known else ErrorCode.unknown_topic_or_partition,
                None,
            )
    elif not controller.active:
        top_error = ErrorCode.not_controller
    else:
        results = await controller.elect_leaders(election_type, wanted)
        if wanted is None:
            # "All partitions" answers only for those that changed, as Kafka does.
            results = {tp: r for tp, r in results.items() if r[0] == ErrorCode.none}
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for tp, (code, message) in results.items():
        by_topic.setdefault(tp.topic, []).append(
            {"partition_id": tp.partition, "error_code": code, "error_message": message}
        )
    return {
        "throttle_time": 0,
        "error_code": top_error,
        "replica_election_results": [
            {"topic": t, "partition_result": ps} for t, ps in by_topic.items()
        ],
    }
