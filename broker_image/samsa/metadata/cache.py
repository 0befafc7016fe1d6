"""MetadataCache: this broker's view of brokers, topics and partition leadership.

Fed by the metadata store (standalone) or by the controller's updates (cluster); read by the
handlers on every Metadata, Produce and Fetch request, so lookups are plain dict reads. A
handler that must answer only once this broker knows something (CreateTopics, as Kafka's
DelayedCreatePartitions) waits for it with ``wait_for``.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable

from samsa.metadata.model import BrokerInfo, PartitionState, TopicMetadata


class MetadataCache:
    def __init__(self, broker_id: int, cluster_id: str) -> None:
        self.broker_id = broker_id
        self.cluster_id = cluster_id
        self.controller_id = -1
        # When the live brokers were last set (by a controller's UpdateMetadata, in a cluster).
        self.brokers_updated_at = 0.0
        self._brokers: dict[int, BrokerInfo] = {}
        self._topics: dict[str, TopicMetadata] = {}
        self._ids: dict[uuid.UUID, str] = {}
        self._states: dict[str, dict[int, PartitionState]] = {}
        self._waiters: list[asyncio.Future[None]] = []

    def _changed(self) -> None:
        waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)

    async def wait_for(self, predicate: Callable[[], bool]) -> None:
        """Return once ``predicate()`` holds, checked now and after each change to the
        topics; the caller bounds the wait (asyncio.timeout)."""
        loop = asyncio.get_running_loop()
        while not predicate():
            waiter: asyncio.Future[None] = loop.create_future()
            self._waiters.append(waiter)
            await waiter

    def update_brokers(self, brokers: list[BrokerInfo], controller_id: int) -> None:
        self._brokers = {b.id: b for b in brokers}
        self.controller_id = controller_id
        self.brokers_updated_at = time.monotonic()

    def update_topic(self, topic: TopicMetadata, states: dict[int, PartitionState]) -> None:
        old = self._topics.get(topic.name)
        if old is not None and old.topic_id != topic.topic_id:
            self._ids.pop(old.topic_id, None)
        self._topics[topic.name] = topic
        self._ids[topic.topic_id] = topic.name
        self._states[topic.name] = states
        self._changed()

    def apply_partition_states(
        self,
        name: str,
        topic_id: uuid.UUID,
        states: list[PartitionState],
        configs: dict[str, str],
        internal: bool,
    ) -> None:
        """Merge a controller's UpdateMetadata for one topic into what we know of it."""
        merged = dict(self._states.get(name, {}))
        old = self._topics.get(name)
        if old is not None and old.topic_id != topic_id:
            merged = {}  # the same name, a new topic: nothing of the old one applies
        for state in states:
            merged[state.partition] = state
        assignment = {p: list(s.replicas) for p, s in sorted(merged.items())}
        self.update_topic(TopicMetadata(name, topic_id, assignment, configs, internal), merged)

    def update_configs(self, name: str, configs: dict[str, str]) -> None:
        topic = self._topics.get(name)
        if topic is not None and topic.configs != configs:
            self._topics[name] = TopicMetadata(
                name, topic.topic_id, topic.assignment, dict(configs), topic.internal
            )

    def remove_topic(self, name: str) -> None:
        topic = self._topics.pop(name, None)
        if topic is not None:
            self._ids.pop(topic.topic_id, None)
        self._states.pop(name, None)
        self._changed()

    def brokers(self, listener: str | None = None) -> list[BrokerInfo]:
        """Live brokers; through ``listener``, only those that have it, at its addresses."""
        out = []
        for b in sorted(self._brokers.values(), key=lambda b: b.id):
            seen = b.for_listener(listener)
            if seen is not None:
                out.append(seen)
        return out

    def broker(self, broker_id: int, listener: str | None = None) -> BrokerInfo | None:
        b = self._brokers.get(broker_id)
        return b.for_listener(listener) if b is not None else None

    def topic(self, name: str) -> TopicMetadata | None:
        return self._topics.get(name)

    def topic_name(self, topic_id: uuid.UUID) -> str | None:
        return self._ids.get(topic_id)

    def topic_names(self) -> list[str]:
        return sorted(self._topics)

    def topics(self) -> list[TopicMetadata]:
        return [self._topics[n] for n in sorted(self._topics)]

    def partition_state(self, topic: str, partition: int) -> PartitionState | None:
        states = self._states.get(topic)
        return states.get(partition) if states else None

    def partition_states(self, topic: str) -> dict[int, PartitionState]:
        return self._states.get(topic, {})
