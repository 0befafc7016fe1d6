"""ControllerContext: what the active controller knows of the cluster, as plain values.

Loaded from ZooKeeper when a broker becomes controller and kept in step by the controller's
own writes and its watches; every decision reads it, nothing here does I/O.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from samsa.metadata.model import BrokerInfo, PartitionState, TopicPartition
from samsa.metadata.zk_data import LeaderIsrAndEpoch, RegisteredBroker, TopicZnode


@dataclass
class ControllerContext:
    epoch: int = 0
    epoch_zk_version: int = -1
    live_brokers: dict[int, RegisteredBroker] = field(default_factory=dict)
    shutting_down: set[int] = field(default_factory=set)
    # Brokers found dead by the probes while still registered, with that registration: out of
    # live_brokers until they answer again or register anew.
    fenced: dict[int, RegisteredBroker] = field(default_factory=dict)
    topics: dict[str, TopicZnode] = field(default_factory=dict)
    states: dict[TopicPartition, LeaderIsrAndEpoch] = field(default_factory=dict)
    topics_to_delete: set[str] = field(default_factory=set)
    # Reassignments in progress: partition -> target replicas.
    reassigning: dict[TopicPartition, tuple[int, ...]] = field(default_factory=dict)

    @property
    def live_ids(self) -> set[int]:
        return set(self.live_brokers)

    @property
    def live_serving(self) -> set[int]:
        """Live brokers not shutting down: the ones that may lead or join an ISR."""
        return self.live_ids - self.shutting_down

    def broker_infos(self) -> list[BrokerInfo]:
        return [b.info for _, b in sorted(self.live_brokers.items())]

    def replicas(self, tp: TopicPartition) -> list[int]:
        topic = self.topics.get(tp.topic)
        if topic is None:
            return []
        return list(topic.assignment.get(tp.partition, []))

    def partitions(self, topic: str | None = None) -> Iterator[TopicPartition]:
        names = [topic] if topic is not None else sorted(self.topics)
        for name in names:
            t = self.topics.get(name)
            if t is None:
                continue
            for p in sorted(t.assignment):
                yield TopicPartition(name, p)

    def partitions_on(self, broker_id: int) -> list[TopicPartition]:
        return [tp for tp in self.partitions() if broker_id in self.replicas(tp)]

    def partition_state(self, tp: TopicPartition) -> PartitionState | None:
        """The state in the form brokers receive it (LeaderAndIsr / UpdateMetadata)."""
        s = self.states.get(tp)
        if s is None:
            return None
        topic = self.topics[tp.topic]
        replicas = tuple(topic.assignment.get(tp.partition, ()))
        return PartitionState(
            topic=tp.topic,
            partition=tp.partition,
            leader=s.leader,
            leader_epoch=s.leader_epoch,
            replicas=replicas,
            isr=s.isr,
            offline_replicas=tuple(r for r in replicas if r not in self.live_brokers),
            partition_epoch=s.zk_version,
            adding=tuple(topic.adding.get(tp.partition, ())),
            removing=tuple(topic.removing.get(tp.partition, ())),
        )
