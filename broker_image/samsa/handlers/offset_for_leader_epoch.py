"""OffsetForLeaderEpoch (23): where a leader epoch ends in this leader's log (KIP-101/279)."""

from __future__ import annotations

from typing import Any

from samsa.handlers.authorization import cluster_allowed, topic_allowed
from samsa.handlers.context import BrokerServices, RequestContext
from samsa.metadata import TopicPartition
from samsa.protocol.errors import ErrorCode
from samsa.security.acl import AclOperation

KEY = 23
MIN_VERSION, MAX_VERSION = 2, 4
# replica_id -2 (v3+): a debugging client that may ask a follower.
DEBUGGING_REPLICA = -2


def _answer(
    services: BrokerServices, tp: TopicPartition, current: int, epoch: int, replica_id: int
) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "error_code": ErrorCode.none,
        "partition": tp.partition,
        "leader_epoch": -1,
        "end_offset": -1,
    }
    partition = services.replica_manager.get_partition(tp)
    if partition is None:
        entry["error_code"] = ErrorCode.unknown_topic_or_partition
        return entry
    if not partition.is_leader and replica_id != DEBUGGING_REPLICA:
        entry["error_code"] = ErrorCode.not_leader_or_follower
        return entry
    if current >= 0 and current != partition.leader_epoch:
        entry["error_code"] = (
            ErrorCode.fenced_leader_epoch
            if current < partition.leader_epoch
            else ErrorCode.unknown_leader_epoch
        )
        return entry
    found_epoch, end_offset = partition.log.end_offset_for_epoch(epoch)
    entry.update(leader_epoch=found_epoch, end_offset=end_offset)
    return entry


def handle(services: BrokerServices, ctx: RequestContext, request: Any) -> dict[str, Any]:
    replica_id = getattr(request, "replica_id", DEBUGGING_REPLICA)
    # As Kafka: CLUSTER_ACTION (a follower) or DESCRIBE on the topic (a consumer, KIP-320).
    replica = cluster_allowed(services, ctx, AclOperation.CLUSTER_ACTION)
    topics = []
    for topic in request.topics:
        if not replica and not topic_allowed(services, ctx, AclOperation.DESCRIBE, topic.topic):
            denied = {
                "error_code": ErrorCode.topic_authorization_failed,
                "leader_epoch": -1,
                "end_offset": -1,
            }
            refused = [{"partition": p.partition, **denied} for p in topic.partitions]
            topics.append({"topic": topic.topic, "partitions": refused})
            continue
        partitions = [
            _answer(
                services,
                TopicPartition(topic.topic, p.partition),
                p.current_leader_epoch,
                p.leader_epoch,
                replica_id,
            )
            for p in topic.partitions
        ]
        topics.append({"topic": topic.topic, "partitions": partitions})
    return {"throttle_time": 0, "topics": topics}
