"""LeaderAndIsr (4): the controller makes this broker leader or follower of partitions."""

from __future__ import annotations

from typing import Any

from kio.static.primitive import i32

from samsa.handlers.authorization import cluster_allowed, from_the_controller
from samsa.handlers.context import BrokerServices, RequestContext
from samsa.metadata import PartitionState
from samsa.protocol import controller_apis as apis
from samsa.protocol.errors import ErrorCode
from samsa.replica import LeaderAndIsrPartition
from samsa.security.acl import AclOperation

KEY = apis.LEADER_AND_ISR
MIN_VERSION = MAX_VERSION = apis.LEADER_AND_ISR_VERSION


async def handle(services: BrokerServices, ctx: RequestContext, request: Any) -> Any:
    if not cluster_allowed(services, ctx, AclOperation.CLUSTER_ACTION):
        return apis.LeaderAndIsrResponse(
            error_code=ErrorCode.cluster_authorization_failed, topics=()
        )
    manager = services.replica_manager
    for leader in request.live_leaders:
        manager.known_brokers[leader.broker_id] = (leader.host_name, leader.port)
    items = []
    ids = {}
    for topic in request.topic_states:
        ids[topic.topic_name] = topic.topic_id
        for p in topic.partition_states:
            items.append(
                LeaderAndIsrPartition(
                    PartitionState(
                        topic=topic.topic_name,
                        partition=p.partition_index,
                        leader=p.leader,
                        leader_epoch=p.leader_epoch,
                        replicas=tuple(p.replicas),
                        isr=tuple(p.isr),
                        partition_epoch=p.partition_epoch,
                        adding=tuple(p.adding_replicas),
                        removing=tuple(p.removing_replicas),
                    ),
                    topic.topic_id,
                    p.is_new,
                )
            )
    if not from_the_controller(services, request.controller_epoch):
        return apis.LeaderAndIsrResponse(error_code=ErrorCode.stale_controller_epoch, topics=())
    await services.store.learn_topics(set(ids))
    errors = manager.become_leader_or_follower(request.controller_epoch, items)
    by_topic: dict[str, list[apis.LeaderAndIsrPartitionError]] = {}
    for tp, code in errors.items():
        by_topic.setdefault(tp.topic, []).append(
            apis.LeaderAndIsrPartitionError(partition_index=i32(tp.partition), error_code=code)
        )
    return apis.LeaderAndIsrResponse(
        error_code=ErrorCode.none,
        topics=tuple(
            apis.LeaderAndIsrTopicError(topic_id=ids[name], partition_errors=tuple(parts))
            for name, parts in by_topic.items()
        ),
    )
