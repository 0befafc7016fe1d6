"""The metadata store interface: where topics, assignments and configs are recorded.

Two implementations: the local store of a standalone broker (its own disk), and ZooKeeper for a
cluster.  Handlers change metadata only through this interface; the broker learns of changes
through listeners, whichever broker or tool made them.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from typing import Protocol

from samsa.metadata.model import BrokerInfo, PartitionState, TopicMetadata

# Called with the names of topics whose metadata changed (created, grown, reconfigured, deleted).
MetadataListener = Callable[[set[str]], None]


class MetadataStore(Protocol):
    cluster_id: str

    async def start(self) -> None: ...

    async def close(self) -> None: ...

    def add_listener(self, listener: MetadataListener) -> None: ...

    def topics(self) -> Mapping[str, TopicMetadata]: ...

    def brokers(self) -> list[BrokerInfo]: ...

    def controller_id(self) -> int: ...

    def partition_states(self, topic: str) -> dict[int, PartitionState]: ...

    async def create_topic(
        self,
        name: str,
        assignment: dict[int, list[int]],
        configs: Mapping[str, str],
        topic_id: uuid.UUID | None = None,
    ) -> TopicMetadata: ...

    async def learn_topics(self, names: set[str]) -> None:
        """Know these topics and their configs now, if the store has not seen them yet: a
        controller names a topic before this broker's watches may have."""
        ...

    async def delete_topic(self, name: str) -> None: ...

    async def create_partitions(self, name: str, new_assignment: dict[int, list[int]]) -> None: ...

    async def set_topic_configs(self, name: str, configs: Mapping[str, str]) -> None: ...

    async def topic_configs(self, name: str) -> dict[str, str]:
        """A topic's overrides as the store of record holds them now, not as this broker's
        watches last saw them: what one broker altered, any broker describes at once."""
        ...

    def broker_configs(self) -> dict[str, str]: ...

    def broker_config_layers(self) -> tuple[dict[str, str], dict[str, str]]:
        """The dynamic broker configs in their two layers: the cluster-wide default, and this
        broker's own (which wins); ``broker_configs`` is the two merged."""
        ...

    async def set_broker_configs(
        self, configs: Mapping[str, str], cluster_default: bool = False
    ) -> None: ...
