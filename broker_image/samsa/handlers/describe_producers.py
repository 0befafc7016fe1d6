"""DescribeProducers (61): the active producers of partitions this broker leads: epoch, last
sequence and timestamp, coordinator epoch, and the start of any open transaction (what
kafka-transactions.sh find-hanging looks for)."""

from __future__ import annotations

from typing import Any

from samsa.handlers.authorization import topic_allowed
from samsa.handlers.context import BrokerServices, RequestContext
from samsa.metadata import TopicPartition
from samsa.protocol.errors import ErrorCode, KafkaApiError
from samsa.security.acl import AclOperation

KEY = 61
MIN_VERSION, MAX_VERSION = 0, 0


def _partition(services: BrokerServices, tp: TopicPartition) -> dict[str, Any]:
    try:
        producers = services.replica_manager.active_producers(tp)
    except KafkaApiError as exc:
        return {"partition_index": tp.partition, "error_code": exc.code, "active_producers": ()}
    return {
        "partition_index": tp.partition,
        "error_code": ErrorCode.none,
        "active_producers": [
            {
                "producer_id": e.producer_id,
                "producer_epoch": e.producer_epoch,
                "last_sequence": e.last_seq,
                "last_timestamp": e.last_timestamp,
                "coordinator_epoch": e.coordinator_epoch,
                "current_txn_start_offset": e.current_txn_first_offset,
            }
            for e in producers
        ],
    }


def handle(services: BrokerServices, ctx: RequestContext, request: Any) -> dict[str, Any]:
    topics = []
    for topic in request.topics:
        if topic_allowed(services, ctx, AclOperation.READ, topic.name):
            partitions = [
                _partition(services, TopicPartition(topic.name, p)) for p in topic.partition_indexes
            ]
        else:
            partitions = [
                {
                    "partition_index": p,
                    "error_code": ErrorCode.topic_authorization_failed,
                    "active_producers": (),
                }
                for p in topic.partition_indexes
            ]
        topics.append({"name": topic.name, "partitions": partitions})
    return {"throttle_time": 0, "topics": topics}
