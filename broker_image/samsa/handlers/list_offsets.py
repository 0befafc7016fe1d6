"""ListOffsets (2): earliest, latest, max timestamp, and the first offset at a timestamp."""

from __future__ import annotations

from typing import Any

from samsa.handlers.authorization import topic_allowed
from samsa.handlers.context import BrokerServices, RequestContext
from samsa.metadata import TopicPartition
from samsa.protocol.errors import ErrorCode, KafkaApiError
from samsa.security.acl import AclOperation

KEY = 2
MIN_VERSION, MAX_VERSION = 1, 11
# The first version that may ask for each sentinel timestamp; other negatives are unsupported.
SENTINEL_SINCE = {-1: 0, -2: 0, -3: 7, -4: 8, -5: 9, -6: 11}


def handle(services: BrokerServices, ctx: RequestContext, request: Any) -> dict[str, Any]:
    manager = services.replica_manager
    isolation = getattr(request, "isolation_level", 0)
    topics = []
    seen: set[TopicPartition] = set()
    for topic in request.topics:
        describable = topic_allowed(services, ctx, AclOperation.DESCRIBE, topic.name)
        partitions = []
        for p in topic.partitions:
            tp = TopicPartition(topic.name, p.partition_index)
            entry: dict[str, Any] = {
                "partition_index": p.partition_index,
                "error_code": ErrorCode.none,
                "timestamp": -1,
                "offset": -1,
                "leader_epoch": -1,
            }
            if not describable:
                entry["error_code"] = ErrorCode.topic_authorization_failed
            elif tp in seen:
                entry["error_code"] = ErrorCode.invalid_request
            elif p.timestamp < 0 and ctx.version < SENTINEL_SINCE.get(p.timestamp, 1 << 15):
                entry["error_code"] = ErrorCode.unsupported_version
            else:
                seen.add(tp)
                try:
                    ts, offset, epoch = manager.offset_for_timestamp(
                        tp, p.timestamp, isolation, getattr(p, "current_leader_epoch", -1)
                    )
                    entry.update(timestamp=ts, offset=offset, leader_epoch=epoch)
                except KafkaApiError as exc:
                    entry["error_code"] = exc.code
            partitions.append(entry)
        topics.append({"name": topic.name, "partitions": partitions})
    return {"throttle_time": 0, "topics": topics}
