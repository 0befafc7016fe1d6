"""StandaloneController: a standalone broker is its own controller.

It turns the metadata store's topics into leadership on this broker (leader epoch from the
store, ISR of one) and keeps the MetadataCache and the ReplicaManager in step with every
change, whoever made it.  The ZooKeeper controller plays the same part for a cluster.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from samsa.config import LogConfig
from samsa.metadata import MetadataCache, MetadataStore, TopicPartition
from samsa.replica import ReplicaManager

log = logging.getLogger(__name__)


class StandaloneController:
    def __init__(
        self,
        store: MetadataStore,
        cache: MetadataCache,
        replica_manager: ReplicaManager,
        log_config_for: Callable[[str], LogConfig],
        on_topic_deleted: Callable[[str, list[int]], None] = lambda name, partitions: None,
    ) -> None:
        self.store = store
        self.cache = cache
        self.replica_manager = replica_manager
        self.log_config_for = log_config_for
        self.on_topic_deleted = on_topic_deleted

    async def start(self) -> None:
        self.cache.update_brokers(self.store.brokers(), self.store.controller_id())
        await self._adopt_orphans()
        self.store.add_listener(self.on_change)
        self.on_change(set(self.store.topics()))

    def on_change(self, names: set[str]) -> None:
        topics = self.store.topics()
        if not names:  # broker-level change: every topic's defaults may differ
            names = set(topics)
        for name in sorted(names):
            topic = topics.get(name)
            if topic is None:
                self._remove(name)
                continue
            states = self.store.partition_states(name)
            self.cache.update_topic(topic, states)
            self.replica_manager.update_log_config(name, self.log_config_for(name))
            for state in states.values():
                self.replica_manager.become_leader(state, topic.topic_id)

    def _remove(self, name: str) -> None:
        topic = self.cache.topic(name)
        self.cache.remove_topic(name)
        if topic is None:
            return
        for p in topic.assignment:
            self.replica_manager.stop_replica(TopicPartition(name, p), delete=True)
        self.on_topic_deleted(name, sorted(topic.assignment))
        log.info("deleted topic %s", name)

    async def _adopt_orphans(self) -> None:
        """Logs on disk that the metadata does not know become topics again, never garbage.

        A standalone broker is the only writer of its metadata, so such logs mean the metadata
        file was lost or damaged; keeping the data is the only safe answer.
        """
        known = self.store.topics()
        found: dict[str, set[int]] = {}
        for plog in self.replica_manager.log_manager.all_logs():
            topic = known.get(plog.topic)
            if topic is None or plog.partition not in topic.assignment:
                found.setdefault(plog.topic, set()).add(plog.partition)
        me = self.cache.broker_id
        for name, partitions in sorted(found.items()):
            topic = known.get(name)
            count = max(max(partitions) + 1, topic.partition_count if topic else 0)
            log.warning(
                "the metadata does not know the logs of topic %s (partitions %s); "
                "recreating it with %d partitions and default configs",
                name,
                sorted(partitions),
                count,
            )
            if topic is None:
                await self.store.create_topic(name, {p: [me] for p in range(count)}, {})
            else:
                missing = {p: [me] for p in range(topic.partition_count, count)}
                await self.store.create_partitions(name, missing)
