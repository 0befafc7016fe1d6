"""OffsetFetch (9): a group's committed offsets; one group (v1-v7) or several (v8+)."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import replace
from typing import Any

from samsa.coordinator import OffsetFetchPartition, OffsetFetchResult
from samsa.handlers.authorization import group_allowed, topic_allowed
from samsa.handlers.context import BrokerServices, RequestContext
from samsa.handlers.groups import NOT_AVAILABLE, coordinator
from samsa.metadata import TopicPartition
from samsa.protocol.errors import ErrorCode
from samsa.security.acl import AclOperation

KEY = 9
# v10 names topics by id (KIP-848); clients fall back to v9.
MIN_VERSION, MAX_VERSION = 1, 9
FIRST_MULTI_GROUP = 8
FIRST_TOP_LEVEL_ERROR = 2


def _partitions(topics: Any) -> list[TopicPartition] | None:
    if topics is None:
        return None
    return [TopicPartition(t.name, p) for t in topics for p in t.partition_indexes]


async def _fetch(
    services: BrokerServices, ctx: RequestContext, group_id: str, topics: Any, stable: bool
) -> OffsetFetchResult:
    """As Kafka: DESCRIBE on the group, else GROUP_AUTHORIZATION_FAILED; offsets only of
    topics the principal may describe (TOPIC_AUTHORIZATION_FAILED for those asked for by name,
    left out of an all-topics answer)."""
    if not group_allowed(services, ctx, AclOperation.DESCRIBE, group_id):
        return OffsetFetchResult(ErrorCode.group_authorization_failed)
    group_coordinator = coordinator(services)
    if group_coordinator is None:
        return OffsetFetchResult(NOT_AVAILABLE)
    wanted = _partitions(topics)

    def describable(topic: str) -> bool:
        return topic_allowed(services, ctx, AclOperation.DESCRIBE, topic)

    refused = [tp for tp in wanted or () if not describable(tp.topic)]
    if wanted is not None:
        wanted = [tp for tp in wanted if tp not in refused]
    if wanted == [] and refused:
        result = OffsetFetchResult(ErrorCode.none)
    else:
        result = await group_coordinator.fetch_offsets(group_id, wanted, stable)
    if result.error != ErrorCode.none:
        return result
    denied = ErrorCode.topic_authorization_failed
    kept = [p for p in result.partitions if describable(p.topic)]
    kept += [OffsetFetchPartition(tp.topic, tp.partition, error=denied) for tp in refused]
    return replace(result, partitions=tuple(kept))


def _topics(
    result: OffsetFetchResult, requested: list[TopicPartition] | None, version: int
) -> list[dict[str, Any]]:
    by_topic: dict[str, list[dict[str, Any]]] = defaultdict(list)
    if result.error != ErrorCode.none and version < FIRST_TOP_LEVEL_ERROR:
        # v1 has no top-level error: every partition asked for carries it.
        for tp in requested or ():
            by_topic[tp.topic].append(
                {
                    "partition_index": tp.partition,
                    "committed_offset": -1,
                    "committed_leader_epoch": -1,
                    "metadata": "",
                    "error_code": result.error,
                }
            )
    for p in result.partitions:
        by_topic[p.topic].append(
            {
                "partition_index": p.partition,
                "committed_offset": p.offset,
                "committed_leader_epoch": p.leader_epoch,
                "metadata": p.metadata,
                "error_code": p.error,
            }
        )
    return [{"name": name, "partitions": parts} for name, parts in by_topic.items()]


async def handle(services: BrokerServices, ctx: RequestContext, request: Any) -> dict[str, Any]:
    require_stable = getattr(request, "require_stable", False)
    if ctx.version >= FIRST_MULTI_GROUP:
        groups = []
        for g in request.groups:
            result = await _fetch(services, ctx, g.group_id, g.topics, require_stable)
            groups.append(
                {
                    "group_id": g.group_id,
                    "topics": _topics(result, _partitions(g.topics), ctx.version),
                    "error_code": result.error,
                }
            )
        return {"throttle_time": 0, "groups": groups}
    result = await _fetch(services, ctx, request.group_id, request.topics, require_stable)
    return {
        "throttle_time": 0,
        "topics": _topics(result, _partitions(request.topics), ctx.version),
        "error_code": result.error,
    }
