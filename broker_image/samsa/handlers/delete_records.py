"""DeleteRecords (21): move log start offsets up as leader; answered once the followers follow.

The leader moves its log start offset (-1 means its high watermark; beyond it is
OFFSET_OUT_OF_RANGE), then answers once every live replica's log start offset (reported in its
fetches) reached it, or with REQUEST_TIMED_OUT when the request's timeout runs out first.
Segments wholly below the new start go at the next retention run.
"""

from __future__ import annotations

from typing import Any

from samsa.handlers.authorization import topic_allowed
from samsa.handlers.context import BrokerServices, RequestContext
from samsa.metadata import TopicPartition
from samsa.protocol.errors import ErrorCode
from samsa.protocol.messages import ms
from samsa.security.acl import AclOperation

KEY = 21
MIN_VERSION, MAX_VERSION = 0, 2


async def handle(services: BrokerServices, ctx: RequestContext, request: Any) -> dict[str, Any]:
    results: dict[TopicPartition, tuple[ErrorCode, int]] = {}
    offsets: dict[TopicPartition, int] = {}
    for topic in request.topics:
        deletable = topic_allowed(services, ctx, AclOperation.DELETE, topic.name)
        for p in topic.partitions:
            tp = TopicPartition(topic.name, p.partition_index)
            if not deletable:
                results[tp] = (ErrorCode.topic_authorization_failed, -1)
            elif services.cache.partition_state(tp.topic, tp.partition) is None:
                results[tp] = (ErrorCode.unknown_topic_or_partition, -1)
            else:
                offsets[tp] = p.offset
    if offsets:
        timeout_s = ms(request.timeout) / 1000
        results.update(await services.replica_manager.delete_records(offsets, timeout_s))
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for tp, (code, low_watermark) in results.items():
        by_topic.setdefault(tp.topic, []).append(
            {"partition_index": tp.partition, "low_watermark": low_watermark, "error_code": code}
        )
    return {
        "throttle_time": 0,
        "topics": [{"name": name, "partitions": ps} for name, ps in by_topic.items()],
    }
