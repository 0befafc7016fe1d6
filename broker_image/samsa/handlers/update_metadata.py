"""UpdateMetadata (6): the controller's view of brokers and partitions, for every broker."""

from __future__ import annotations

from typing import Any

from samsa.handlers.authorization import cluster_allowed, from_the_controller
from samsa.handlers.context import BrokerServices, RequestContext
from samsa.metadata import BrokerInfo, Endpoint, PartitionState
from samsa.metadata.names import is_internal
from samsa.protocol import controller_apis as apis
from samsa.protocol.errors import ErrorCode
from samsa.security.acl import AclOperation

KEY = apis.UPDATE_METADATA
MIN_VERSION = MAX_VERSION = apis.UPDATE_METADATA_VERSION


def handle(services: BrokerServices, ctx: RequestContext, request: Any) -> Any:
    if not cluster_allowed(services, ctx, AclOperation.CLUSTER_ACTION):
        return apis.UpdateMetadataResponse(error_code=ErrorCode.cluster_authorization_failed)
    if not from_the_controller(services, request.controller_epoch):
        return apis.UpdateMetadataResponse(error_code=ErrorCode.stale_controller_epoch)
    cache = services.cache
    inter = services.inter_broker_listener
    brokers = []
    for b in request.live_brokers:
        endpoints = tuple(Endpoint(e.listener, e.host, e.port) for e in b.endpoints)
        chosen = next((e for e in endpoints if e.listener == inter), None)
        chosen = chosen or (endpoints[0] if endpoints else None)
        if chosen is not None:
            brokers.append(BrokerInfo(b.id, chosen.host, chosen.port, b.rack, endpoints))
    cache.update_brokers(brokers, request.controller_id)
    # UpdateMetadata comes from a ZooKeeper controller only: its client is loaded by then
    from samsa.metadata.zk_data import LEADER_DURING_DELETE

    known = services.store.topics()
    for topic in request.topic_states:
        name = topic.topic_name
        if any(p.leader == LEADER_DURING_DELETE for p in topic.partition_states):
            existing = cache.topic(name)
            if existing is not None:
                cache.remove_topic(name)
                services.on_topic_deleted(name, sorted(existing.assignment))
            continue
        states = [
            PartitionState(
                topic=name,
                partition=p.partition_index,
                leader=p.leader,
                leader_epoch=p.leader_epoch,
                replicas=tuple(p.replicas),
                isr=tuple(p.isr),
                offline_replicas=tuple(p.offline_replicas),
                partition_epoch=p.partition_epoch,
            )
            for p in topic.partition_states
        ]
        meta = known.get(name)
        cache.apply_partition_states(
            name, topic.topic_id, states, dict(meta.configs) if meta else {}, is_internal(name)
        )
    return apis.UpdateMetadataResponse(error_code=ErrorCode.none)
