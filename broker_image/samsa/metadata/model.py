"""Plain values describing brokers, topics and partitions."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import NamedTuple


class TopicPartition(NamedTuple):
    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


@dataclass(frozen=True)
class Endpoint:
    """One listener of a broker: its name and the address clients use for it."""

    listener: str
    host: str
    port: int


@dataclass(frozen=True)
class BrokerInfo:
    """A broker; ``host`` and ``port`` are its inter-broker listener's, and ``endpoints``
    every listener it has (empty: that one only)."""

    id: int
    host: str
    port: int
    rack: str | None = None
    endpoints: tuple[Endpoint, ...] = ()

    def for_listener(self, name: str | None) -> BrokerInfo | None:
        """This broker as seen through one listener; None if it has no such listener."""
        if name is None or not self.endpoints:
            return self
        for e in self.endpoints:
            if e.listener == name:
                return BrokerInfo(self.id, e.host, e.port, self.rack, self.endpoints)
        return None


@dataclass(frozen=True)
class TopicMetadata:
    """A topic as the metadata store records it: id, replica assignment and config overrides."""

    name: str
    topic_id: uuid.UUID
    assignment: dict[int, list[int]]  # partition -> replicas, preferred leader first
    configs: dict[str, str] = field(default_factory=dict)
    internal: bool = False

    @property
    def partition_count(self) -> int:
        return len(self.assignment)

    @property
    def replication_factor(self) -> int:
        # The lowest partition's, not partition 0's: an UpdateMetadata (which Kafka, too,
        # takes from any client when no authorizer asks for CLUSTER_ACTION) may name others only.
        return len(self.assignment[min(self.assignment)]) if self.assignment else 0


@dataclass(frozen=True)
class PartitionState:
    """Leadership of one partition (Kafka's LeaderAndIsr plus the replica list)."""

    topic: str
    partition: int
    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    offline_replicas: tuple[int, ...] = ()
    partition_epoch: int = 0
    # A reassignment in progress: replicas being added and removed (KIP-455).
    adding: tuple[int, ...] = ()
    removing: tuple[int, ...] = ()
