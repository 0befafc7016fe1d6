"""CreatePartitions (37): grow a topic's partition count; partitions never shrink.

As Kafka, the answer waits until this broker knows a leader for every new partition."""

from __future__ import annotations

from typing import Any

from samsa.handlers.authorization import topic_allowed
from samsa.handlers.context import BrokerServices, RequestContext
from samsa.handlers.topic_admin import answer_when_led, duplicated
from samsa.metadata.assignment import assign_replicas
from samsa.protocol.errors import ErrorCode
from samsa.security.acl import AclOperation

KEY = 37
MIN_VERSION, MAX_VERSION = 0, 3


async def handle(services: BrokerServices, ctx: RequestContext, request: Any) -> dict[str, Any]:
    results = []
    added: dict[str, list[int]] = {}
    live = {b.id for b in services.cache.brokers()}
    twice = duplicated(item.name for item in request.topics)
    for name in sorted(twice):
        results.append(
            {
                "name": name,
                "error_code": ErrorCode.invalid_request,
                "error_message": "Duplicate topic in request.",
            }
        )
    for item in request.topics:
        name = item.name
        if name in twice:
            continue
        topic = services.cache.topic(name)
        code, message = ErrorCode.none, None
        if not topic_allowed(services, ctx, AclOperation.ALTER, name):
            code = ErrorCode.topic_authorization_failed
            message = "The topic authorization is failed."
        elif topic is None:
            code = ErrorCode.unknown_topic_or_partition
        elif item.count <= topic.partition_count:
            code = ErrorCode.invalid_partitions
            message = (
                f"Topic currently has {topic.partition_count} partitions, which is higher than "
                f"the requested {item.count}."
                if item.count < topic.partition_count
                else f"Topic already has {topic.partition_count} partitions."
            )
        else:
            new_count = item.count - topic.partition_count
            rf = topic.replication_factor
            if item.assignments:
                plan = {
                    topic.partition_count + i: list(a.broker_ids)
                    for i, a in enumerate(item.assignments)
                }
                if len(plan) != new_count:
                    code = ErrorCode.invalid_replica_assignment
                    message = (
                        f"Increasing the number of partitions by {new_count} but "
                        f"{len(plan)} assignments provided."
                    )
                elif any(len(r) != rf or len(set(r)) != rf for r in plan.values()):
                    code = ErrorCode.invalid_replica_assignment
                    message = f"Each new partition needs {rf} distinct replicas"
                elif any(b not in live for r in plan.values() for b in r):
                    code = ErrorCode.invalid_replica_assignment
                    message = "Unknown broker in the replica assignment"
            else:
                try:
                    plan = assign_replicas(
                        services.cache.brokers(),
                        new_count,
                        rf,
                        first_partition=topic.partition_count,
                    )
                except ValueError as exc:
                    code, message = ErrorCode.invalid_replication_factor, str(exc)
            if code == ErrorCode.none and not request.validate_only:
                await services.store.create_partitions(name, plan)
                added[name] = sorted(plan)
        results.append({"name": name, "error_code": code, "error_message": message})
    await answer_when_led(services, results, added, request.timeout)
    return {"throttle_time": 0, "results": results}
