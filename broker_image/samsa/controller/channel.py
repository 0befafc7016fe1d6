"""ControllerChannelManager: the controller's requests to brokers, in order, per broker.

Each live broker has a queue and a sender task: LeaderAndIsr, UpdateMetadata and StopReplica
go out in the order the controller made them, each retried until the broker answers or leaves
the cluster.  ``RequestBatch`` collects one controller decision's requests per broker (Kafka's
ControllerBrokerRequestBatch) and sends LeaderAndIsr before UpdateMetadata.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from kio.static.primitive import i16, i32

from samsa.client import ConnectionPool
from samsa.metadata.model import BrokerInfo, Endpoint, PartitionState, TopicPartition
from samsa.metadata.zk_data import LEADER_DURING_DELETE
from samsa.protocol import controller_apis as apis

log = logging.getLogger(__name__)

RETRY_BACKOFF_S = 0.2


@dataclass
class _Queued:
    api_key: int
    version: int
    body: Any
    on_response: Callable[[Any], None] | None = None


class ControllerChannelManager:
    def __init__(self, pool: ConnectionPool, request_timeout_s: float = 30.0) -> None:
        self.pool = pool
        self.request_timeout_s = request_timeout_s
        self._queues: dict[int, asyncio.Queue[_Queued | None]] = {}
        self._tasks: dict[int, asyncio.Task[None]] = {}

    def add_broker(self, broker_id: int) -> None:
        if broker_id in self._queues:
            return
        queue: asyncio.Queue[_Queued | None] = asyncio.Queue()
        self._queues[broker_id] = queue
        self._tasks[broker_id] = asyncio.get_running_loop().create_task(
            self._send_loop(broker_id, queue), name=f"controller-channel-{broker_id}"
        )

    def remove_broker(self, broker_id: int) -> None:
        queue = self._queues.pop(broker_id, None)
        if queue is not None:
            queue.put_nowait(None)  # wakes the sender, which sees it is no longer wanted
        task = self._tasks.pop(broker_id, None)
        if task is not None:
            task.cancel()
        self.pool.drop(broker_id)

    def send(
        self,
        broker_id: int,
        api_key: int,
        version: int,
        body: Any,
        on_response: Callable[[Any], None] | None = None,
    ) -> None:
        queue = self._queues.get(broker_id)
        if queue is None:
            log.debug("not sending API %d to broker %d: it is not live", api_key, broker_id)
            return
        queue.put_nowait(_Queued(api_key, version, body, on_response))

    async def _send_loop(self, broker_id: int, queue: asyncio.Queue[_Queued | None]) -> None:
        while self._queues.get(broker_id) is queue:
            item = await queue.get()
            if item is None:
                return
            while self._queues.get(broker_id) is queue:
                try:
                    response = await self.pool.request(
                        broker_id, item.api_key, item.version, item.body, self.request_timeout_s
                    )
                except asyncio.CancelledError:
                    raise
                except Exception as exc:
                    log.info(
                        "controller request %d to broker %d failed: %s",
                        item.api_key,
                        broker_id,
                        exc,
                    )
                    self.pool.drop(broker_id)
                    await asyncio.sleep(RETRY_BACKOFF_S)
                    continue
                if item.on_response is not None:
                    try:
                        item.on_response(response)
                    except Exception:
                        log.exception("handling the response of broker %d failed", broker_id)
                break

    async def shutdown(self) -> None:
        tasks = list(self._tasks.values())
        for broker_id in list(self._queues):
            self.remove_broker(broker_id)
        if tasks:
            await asyncio.wait(tasks, timeout=5)


@dataclass
class RequestBatch:
    """One controller decision's requests, per broker."""

    controller_id: int
    controller_epoch: int
    leader_and_isr: dict[int, dict[TopicPartition, tuple[PartitionState, uuid.UUID, bool]]] = field(
        default_factory=dict
    )
    update_metadata: dict[int, dict[TopicPartition, tuple[PartitionState, uuid.UUID]]] = field(
        default_factory=dict
    )
    stop_replica: dict[int, dict[TopicPartition, tuple[int, bool]]] = field(default_factory=dict)
    metadata_brokers: set[int] = field(default_factory=set)

    def add_leader_and_isr(
        self,
        brokers: Iterable[int],
        state: PartitionState,
        topic_id: uuid.UUID,
        is_new: bool = False,
    ) -> None:
        tp = TopicPartition(state.topic, state.partition)
        for b in brokers:
            self.leader_and_isr.setdefault(b, {})[tp] = (state, topic_id, is_new)

    def add_update_metadata(
        self, brokers: Iterable[int], states: Iterable[tuple[PartitionState, uuid.UUID]]
    ) -> None:
        states = list(states)
        for b in brokers:
            self.metadata_brokers.add(b)
            target = self.update_metadata.setdefault(b, {})
            for state, topic_id in states:
                target[TopicPartition(state.topic, state.partition)] = (state, topic_id)

    def add_stop_replica(
        self, brokers: Iterable[int], tp: TopicPartition, leader_epoch: int, delete: bool
    ) -> None:
        for b in brokers:
            self.stop_replica.setdefault(b, {})[tp] = (leader_epoch, delete)

    def send(
        self,
        channel: ControllerChannelManager,
        live: list[BrokerInfo],
        leaders: dict[int, BrokerInfo],
        on_leader_and_isr: Callable[[int, Any], None] | None = None,
    ) -> None:
        for broker_id, parts in self.leader_and_isr.items():
            leader_and_isr = _leader_and_isr(
                self.controller_id, self.controller_epoch, parts, leaders
            )
            callback = None
            if on_leader_and_isr is not None:
                callback = _bind(on_leader_and_isr, broker_id)
            channel.send(
                broker_id,
                apis.LEADER_AND_ISR,
                apis.LEADER_AND_ISR_VERSION,
                leader_and_isr,
                callback,
            )
        for broker_id in sorted(self.metadata_brokers):
            um_parts = self.update_metadata.get(broker_id, {})
            update_metadata = _update_metadata(
                self.controller_id, self.controller_epoch, um_parts, live
            )
            channel.send(
                broker_id, apis.UPDATE_METADATA, apis.UPDATE_METADATA_VERSION, update_metadata
            )
        for broker_id, sr_parts in self.stop_replica.items():
            stop_replica = _stop_replica(self.controller_id, self.controller_epoch, sr_parts)
            channel.send(broker_id, apis.STOP_REPLICA, apis.STOP_REPLICA_VERSION, stop_replica)


def _bind(fn: Callable[[int, Any], None], broker_id: int) -> Callable[[Any], None]:
    return lambda response: fn(broker_id, response)


# The requests' fields are kio's nominal integer types (int subclasses that are only ever
# plain ints at run time): i32(x) checks x fits the field and returns x itself.
def _i32s(values: Iterable[int]) -> tuple[i32, ...]:
    return tuple(map(i32, values))


def _leader_and_isr(
    controller_id: int,
    epoch: int,
    parts: dict[TopicPartition, tuple[PartitionState, uuid.UUID, bool]],
    leaders: dict[int, BrokerInfo],
) -> apis.LeaderAndIsrRequest:
    by_topic: dict[str, tuple[uuid.UUID, list[apis.LeaderAndIsrPartitionState]]] = {}
    leader_ids = set()
    controller_epoch = i32(epoch)
    for tp, (s, topic_id, is_new) in sorted(parts.items()):
        leader_ids.add(s.leader)
        by_topic.setdefault(tp.topic, (topic_id, []))[1].append(
            apis.LeaderAndIsrPartitionState(
                partition_index=i32(s.partition),
                controller_epoch=controller_epoch,
                leader=i32(s.leader),
                leader_epoch=i32(s.leader_epoch),
                isr=_i32s(s.isr),
                partition_epoch=i32(s.partition_epoch),
                replicas=_i32s(s.replicas),
                adding_replicas=_i32s(s.adding),
                removing_replicas=_i32s(s.removing),
                is_new=is_new,
            )
        )
    return apis.LeaderAndIsrRequest(
        controller_id=i32(controller_id),
        controller_epoch=controller_epoch,
        topic_states=tuple(
            apis.LeaderAndIsrTopicState(
                topic_name=name, topic_id=topic_id, partition_states=tuple(states)
            )
            for name, (topic_id, states) in by_topic.items()
        ),
        live_leaders=tuple(
            apis.LeaderAndIsrLiveLeader(
                broker_id=i32(leaders[b].id),
                host_name=leaders[b].host,
                port=i32(leaders[b].port),
            )
            for b in sorted(leader_ids)
            if b in leaders
        ),
    )


def _update_metadata(
    controller_id: int,
    epoch: int,
    parts: dict[TopicPartition, tuple[PartitionState, uuid.UUID]],
    live: list[BrokerInfo],
) -> apis.UpdateMetadataRequest:
    by_topic: dict[str, tuple[uuid.UUID, list[apis.UpdateMetadataPartitionState]]] = {}
    controller_epoch = i32(epoch)
    for tp, (s, topic_id) in sorted(parts.items()):
        by_topic.setdefault(tp.topic, (topic_id, []))[1].append(
            apis.UpdateMetadataPartitionState(
                partition_index=i32(s.partition),
                controller_epoch=controller_epoch,
                leader=i32(s.leader),
                leader_epoch=i32(s.leader_epoch),
                isr=_i32s(s.isr),
                partition_epoch=i32(s.partition_epoch),
                replicas=_i32s(s.replicas),
                offline_replicas=_i32s(s.offline_replicas),
            )
        )
    return apis.UpdateMetadataRequest(
        controller_id=i32(controller_id),
        controller_epoch=controller_epoch,
        topic_states=tuple(
            apis.UpdateMetadataTopicState(
                topic_name=name, topic_id=topic_id, partition_states=tuple(states)
            )
            for name, (topic_id, states) in by_topic.items()
        ),
        live_brokers=tuple(
            apis.UpdateMetadataBroker(
                id=i32(b.id),
                endpoints=tuple(
                    apis.UpdateMetadataEndpoint(
                        port=i32(e.port),
                        host=e.host,
                        listener=e.listener,
                        security_protocol=i16(0),
                    )
                    for e in b.endpoints or (Endpoint("PLAINTEXT", b.host, b.port),)
                ),
                rack=b.rack,
            )
            for b in live
        ),
    )


def _stop_replica(
    controller_id: int, epoch: int, parts: dict[TopicPartition, tuple[int, bool]]
) -> apis.StopReplicaRequest:
    by_topic: dict[str, list[apis.StopReplicaPartitionState]] = {}
    for tp, (leader_epoch, delete) in sorted(parts.items()):
        by_topic.setdefault(tp.topic, []).append(
            apis.StopReplicaPartitionState(
                partition_index=i32(tp.partition),
                leader_epoch=i32(LEADER_DURING_DELETE if delete else leader_epoch),
                delete_partition=delete,
            )
        )
    return apis.StopReplicaRequest(
        controller_id=i32(controller_id),
        controller_epoch=i32(epoch),
        topic_states=tuple(
            apis.StopReplicaTopicState(topic_name=name, partition_states=tuple(states))
            for name, states in by_topic.items()
        ),
    )
