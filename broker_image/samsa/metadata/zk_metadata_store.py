"""ZkMetadataStore: the metadata store of a cluster member, kept in ZooKeeper.

Topics (assignment and id), topic configs and dynamic broker configs are read from their
znodes and kept current through watches; admin changes are written there, and the controller
(which watches the same znodes) acts on them.  Leadership is not here: brokers learn it from
the controller's LeaderAndIsr and UpdateMetadata requests.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Mapping
from typing import Any

from kazoo.recipe.watchers import ChildrenWatch, DataWatch

from samsa.metadata.metadata_store import MetadataListener
from samsa.metadata.model import BrokerInfo, PartitionState, TopicMetadata
from samsa.metadata.names import is_internal
from samsa.metadata.zk_client import KafkaZkClient
from samsa.metadata.zk_data import (
    CONFIG_BROKERS,
    CONFIG_TOPICS,
    TOPICS,
    parse_config,
    parse_topic,
    topic_path,
)

log = logging.getLogger(__name__)

DEFAULT_ENTITY = "<default>"


class ZkMetadataStore:
    def __init__(self, zk: KafkaZkClient, broker: BrokerInfo, cluster_id: str) -> None:
        self.zk = zk
        self.broker = broker
        self.cluster_id = cluster_id
        self._topics: dict[str, TopicMetadata] = {}
        self._configs: dict[str, dict[str, str]] = {}
        self._assignments: dict[str, tuple[uuid.UUID, dict[int, list[int]]]] = {}
        self._broker_configs: dict[str, dict[str, str]] = {DEFAULT_ENTITY: {}, str(broker.id): {}}
        self._listeners: list[MetadataListener] = []
        self._watched: set[str] = set()
        self._watches: list[Any] = []

    async def start(self) -> None:
        for name in await self.zk.topic_names():
            await self._watch(name)
        for entity in self._broker_configs:
            self._watches.append(
                await asyncio.to_thread(
                    DataWatch,
                    self.zk.zk,
                    f"{CONFIG_BROKERS}/{entity}",
                    self.zk.on_loop(self._broker_config_changed(entity)),
                )
            )
        self._watches.append(
            await asyncio.to_thread(
                ChildrenWatch, self.zk.zk, TOPICS, self.zk.on_loop(self._topics_changed)
            )
        )

    async def close(self) -> None:
        self._listeners.clear()

    def add_listener(self, listener: MetadataListener) -> None:
        self._listeners.append(listener)

    def _changed(self, names: set[str]) -> None:
        for listener in list(self._listeners):
            listener(names)

    # ------------------------------------------------------------------ watches

    def _topics_changed(self, children: list[str]) -> None:
        for name in children:
            if name not in self._watched:
                asyncio.get_running_loop().create_task(self._watch(name))

    async def _watch(self, name: str) -> None:
        if name in self._watched:
            return
        self._watched.add(name)
        self._watches.append(
            await asyncio.to_thread(
                DataWatch, self.zk.zk, topic_path(name), self.zk.on_loop(self._topic_changed(name))
            )
        )
        self._watches.append(
            await asyncio.to_thread(
                DataWatch,
                self.zk.zk,
                f"{CONFIG_TOPICS}/{name}",
                self.zk.on_loop(self._config_changed(name)),
            )
        )

    def _topic_changed(self, name: str) -> Any:
        def changed(data: bytes | None, stat: Any, *_: Any) -> None:
            if data is None or stat is None:
                if self._assignments.pop(name, None) is not None:
                    self._rebuild(name)
                return
            try:
                znode = parse_topic(name, data, stat)
            except (ValueError, KeyError, TypeError) as exc:
                log.error("cannot read the znode of topic %s: %s", name, exc)
                return
            self._assignments[name] = (znode.topic_id, znode.assignment)
            self._rebuild(name)

        return changed

    def _config_changed(self, name: str) -> Any:
        def changed(data: bytes | None, stat: Any, *_: Any) -> None:
            self._configs[name] = parse_config(data)
            self._rebuild(name)

        return changed

    def _broker_config_changed(self, entity: str) -> Any:
        def changed(data: bytes | None, stat: Any, *_: Any) -> None:
            configs = parse_config(data)
            if configs != self._broker_configs.get(entity):
                self._broker_configs[entity] = configs
                self._changed(set())

        return changed

    def _rebuild(self, name: str) -> None:
        found = self._assignments.get(name)
        if found is None:
            if self._topics.pop(name, None) is not None:
                self._changed({name})
            return
        topic_id, assignment = found
        topic = TopicMetadata(
            name, topic_id, assignment, dict(self._configs.get(name, {})), is_internal(name)
        )
        if self._topics.get(name) != topic:
            self._topics[name] = topic
            self._changed({name})

    # ------------------------------------------------------------------ reads

    def topics(self) -> Mapping[str, TopicMetadata]:
        return self._topics

    def brokers(self) -> list[BrokerInfo]:
        return [self.broker]

    def controller_id(self) -> int:
        return -1

    def partition_states(self, topic: str) -> dict[int, PartitionState]:
        return {}

    def broker_configs(self) -> dict[str, str]:
        return {**self._broker_configs[DEFAULT_ENTITY], **self._broker_configs[str(self.broker.id)]}

    def broker_config_layers(self) -> tuple[dict[str, str], dict[str, str]]:
        return (
            dict(self._broker_configs[DEFAULT_ENTITY]),
            dict(self._broker_configs[str(self.broker.id)]),
        )

    # ------------------------------------------------------------------ writes

    async def create_topic(
        self,
        name: str,
        assignment: dict[int, list[int]],
        configs: Mapping[str, str],
        topic_id: uuid.UUID | None = None,
    ) -> TopicMetadata:
        topic = TopicMetadata(
            name, topic_id or uuid.uuid4(), dict(assignment), dict(configs), is_internal(name)
        )
        await self.zk.create_topic(name, topic.topic_id, topic.assignment, topic.configs)
        # Known at once here, so that describing it right after creating it works.
        self._assignments[name] = (topic.topic_id, topic.assignment)
        self._configs[name] = dict(configs)
        await self._watch(name)
        self._rebuild(name)
        return topic

    async def learn_topics(self, names: set[str]) -> None:
        # A controller's LeaderAndIsr can come before this broker's watches have seen the
        # topic it names; as Kafka's ZooKeeper mode, read the topic and its configs here, so
        # that its log is created with its overrides and no batch is appended with defaults.
        for name in names - self._topics.keys():
            znode = await self.zk.topic(name)
            configs = await self.zk.topic_config(name)
            if znode is None:
                continue
            self._assignments.setdefault(name, (znode.topic_id, znode.assignment))
            self._configs.setdefault(name, configs)
            await self._watch(name)
            self._rebuild(name)

    async def delete_topic(self, name: str) -> None:
        await self.zk.mark_topic_for_deletion(name)

    async def create_partitions(self, name: str, new_assignment: dict[int, list[int]]) -> None:
        znode = await self.zk.topic(name)
        if znode is None:
            raise KeyError(name)
        merged = {**znode.assignment, **new_assignment}
        await self.zk.set_topic_assignment(znode, merged, znode.adding, znode.removing)
        self._assignments[name] = (znode.topic_id, merged)
        self._rebuild(name)

    async def set_topic_configs(self, name: str, configs: Mapping[str, str]) -> None:
        await self.zk.set_topic_config(name, dict(configs))
        self._configs[name] = dict(configs)
        self._rebuild(name)

    async def topic_configs(self, name: str) -> dict[str, str]:
        # As Kafka's ZooKeeper-mode brokers: read from ZooKeeper, where a watch may lag.
        return await self.zk.topic_config(name)

    async def set_broker_configs(
        self, configs: Mapping[str, str], cluster_default: bool = False
    ) -> None:
        # As Kafka: the cluster-wide default in /config/brokers/<default>, which every broker
        # watches; a broker's own in /config/brokers/<id>.
        entity = DEFAULT_ENTITY if cluster_default else str(self.broker.id)
        await self.zk.set_broker_config(entity, dict(configs))
        self._broker_configs[entity] = dict(configs)
        self._changed(set())
