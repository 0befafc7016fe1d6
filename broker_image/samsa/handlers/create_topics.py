"""CreateTopics (19): validate, assign replicas (or take the given assignment), record.

As Kafka, the answer waits until this broker knows a leader for every new partition."""

from __future__ import annotations

import uuid
from typing import Any

from samsa.handlers.authorization import cluster_allowed, topic_allowed
from samsa.handlers.context import BrokerServices, RequestContext
from samsa.handlers.topic_admin import (
    answer_when_led,
    create_topic,
    duplicated,
    plan_topic,
    topic_config_entries,
)
from samsa.metadata import TopicMetadata
from samsa.protocol.errors import ErrorCode, KafkaApiError
from samsa.security.acl import AclOperation

ZERO_UUID = uuid.UUID(int=0)
KEY = 19
MIN_VERSION, MAX_VERSION = 2, 7


def _result(name: str, code: ErrorCode, message: str | None = None) -> dict[str, Any]:
    return {
        "name": name,
        "error_code": code,
        "error_message": message,
        "num_partitions": -1,
        "replication_factor": -1,
        "configs": None,
        "topic_config_error_code": ErrorCode.none,
        "topic_id": ZERO_UUID,
    }


async def handle(services: BrokerServices, ctx: RequestContext, request: Any) -> dict[str, Any]:
    results = []
    created_partitions: dict[str, range] = {}
    twice = duplicated(t.name for t in request.topics)
    answered: set[str] = set()
    for topic in request.topics:
        name = topic.name
        if name in twice:
            # One answer per name, as Kafka's response is keyed by topic.
            if name in answered:
                continue
            answered.add(name)
            results.append(
                _result(
                    name,
                    ErrorCode.invalid_request,
                    f"Create topics request from client contains duplicate topic name '{name}'.",
                )
            )
            continue
        if not (
            cluster_allowed(services, ctx, AclOperation.CREATE)
            or topic_allowed(services, ctx, AclOperation.CREATE, name)
        ):
            refused = _result(name, ErrorCode.topic_authorization_failed, "Authorization failed.")
            if not topic_allowed(services, ctx, AclOperation.DESCRIBE_CONFIGS, name):
                refused["topic_config_error_code"] = ErrorCode.topic_authorization_failed
            results.append(refused)
            continue
        assignments = {a.partition_index: list(a.broker_ids) for a in topic.assignments}
        configs = {c.name: c.value for c in topic.configs}
        try:
            plan, clean = plan_topic(
                services,
                name,
                topic.num_partitions,
                topic.replication_factor,
                assignments,
                configs,
            )
            if request.validate_only:
                created = TopicMetadata(name, ZERO_UUID, plan, clean)
            else:
                created = await create_topic(services, name, plan, clean)
                created_partitions[name] = range(created.partition_count)
        except KafkaApiError as exc:
            results.append(_result(name, exc.code, exc.message))
            continue
        entry = _result(name, ErrorCode.none)
        if not topic_allowed(services, ctx, AclOperation.DESCRIBE_CONFIGS, name):
            # As Kafka: created, but its configs are not shown without DESCRIBE_CONFIGS.
            entry["topic_config_error_code"] = ErrorCode.topic_authorization_failed
            entry["topic_id"] = created.topic_id
            results.append(entry)
            continue
        entry.update(
            topic_id=created.topic_id,
            num_partitions=created.partition_count,
            replication_factor=created.replication_factor,
            configs=[
                {
                    k: v
                    for k, v in c.items()
                    if k in ("name", "value", "read_only", "config_source", "is_sensitive")
                }
                for c in topic_config_entries(services, created)
            ],
        )
        results.append(entry)
    await answer_when_led(services, results, created_partitions, request.timeout)
    return {"throttle_time": 0, "topics": results}
