"""The standalone metadata store: one broker, its metadata in a JSON file on its own disk."""

from __future__ import annotations

import json
import logging
import os
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from samsa.metadata.metadata_store import MetadataListener
from samsa.metadata.model import BrokerInfo, PartitionState, TopicMetadata

log = logging.getLogger(__name__)

METADATA_FILE = "samsa-metadata.json"
META_PROPERTIES = "meta.properties"


def atomic_write(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def read_meta_properties(data_dir: Path) -> dict[str, str]:
    path = data_dir / META_PROPERTIES
    props: dict[str, str] = {}
    if path.exists():
        for line in path.read_text().splitlines():
            line = line.strip()
            if line and not line.startswith("#") and "=" in line:
                key, _, value = line.partition("=")
                props[key.strip()] = value.strip()
    return props


def ensure_meta_properties(data_dir: Path, broker_id: int, cluster_id: str | None) -> str:
    """The cluster id recorded in meta.properties, written on first start (as Kafka does)."""
    props = read_meta_properties(data_dir)
    if props.get("broker.id") not in (None, str(broker_id)):
        raise ValueError(
            f"{data_dir / META_PROPERTIES} belongs to broker.id {props['broker.id']}, "
            f"not {broker_id}"
        )
    existing = props.get("cluster.id")
    if existing and cluster_id and existing != cluster_id:
        raise ValueError(
            f"{data_dir / META_PROPERTIES} has cluster.id {existing}, not {cluster_id}"
        )
    chosen = existing or cluster_id or new_cluster_id()
    if not existing or "broker.id" not in props:
        text = f"version=0\nbroker.id={broker_id}\ncluster.id={chosen}\n"
        atomic_write(data_dir / META_PROPERTIES, text)
    return chosen


def new_cluster_id() -> str:
    """A base64url uuid like Kafka's cluster ids."""
    import base64

    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


class StandaloneMetadataStore:
    """Single-node metadata: this broker leads every partition (leader epoch 0)."""

    def __init__(self, data_dir: Path, broker: BrokerInfo, cluster_id: str) -> None:
        self.data_dir = data_dir
        self.broker = broker
        self.cluster_id = cluster_id
        self._path = data_dir / METADATA_FILE
        self._topics: dict[str, TopicMetadata] = {}
        self._broker_configs: dict[str, str] = {}
        self._broker_default_configs: dict[str, str] = {}
        self._listeners: list[MetadataListener] = []

    async def start(self) -> None:
        self._load()

    async def close(self) -> None:
        return None

    def _load(self) -> None:
        if not self._path.exists():
            return
        try:
            data = json.loads(self._path.read_text())
            for item in data.get("topics", []):
                topic = TopicMetadata(
                    name=item["name"],
                    topic_id=uuid.UUID(item["topic_id"]),
                    assignment={int(p): list(r) for p, r in item["assignment"].items()},
                    configs=dict(item.get("configs", {})),
                    internal=bool(item.get("internal", False)),
                )
                self._topics[topic.name] = topic
            self._broker_configs = dict(data.get("broker_configs", {}))
            self._broker_default_configs = dict(data.get("broker_default_configs", {}))
        except (OSError, ValueError, KeyError, TypeError) as exc:
            # The logs on disk are the data; without readable metadata we keep them and say so.
            log.error("cannot read %s (%s); starting with no topic metadata", self._path, exc)
            self._topics = {}

    def _save(self) -> None:
        data: dict[str, Any] = {
            "version": 1,
            "topics": [
                {
                    "name": t.name,
                    "topic_id": str(t.topic_id),
                    "assignment": {str(p): r for p, r in sorted(t.assignment.items())},
                    "configs": t.configs,
                    "internal": t.internal,
                }
                for t in self._topics.values()
            ],
            "broker_configs": self._broker_configs,
            "broker_default_configs": self._broker_default_configs,
        }
        atomic_write(self._path, json.dumps(data, indent=1, sort_keys=True))

    def _changed(self, names: set[str]) -> None:
        for listener in list(self._listeners):
            listener(names)

    def add_listener(self, listener: MetadataListener) -> None:
        self._listeners.append(listener)

    def topics(self) -> Mapping[str, TopicMetadata]:
        return self._topics

    def brokers(self) -> list[BrokerInfo]:
        return [self.broker]

    def controller_id(self) -> int:
        return self.broker.id

    def partition_states(self, topic: str) -> dict[int, PartitionState]:
        meta = self._topics.get(topic)
        if meta is None:
            return {}
        me = self.broker.id
        return {
            p: PartitionState(topic, p, me, 0, tuple(replicas), (me,))
            for p, replicas in meta.assignment.items()
        }

    async def create_topic(
        self,
        name: str,
        assignment: dict[int, list[int]],
        configs: Mapping[str, str],
        topic_id: uuid.UUID | None = None,
    ) -> TopicMetadata:
        from samsa.metadata.names import is_internal

        topic = TopicMetadata(
            name, topic_id or uuid.uuid4(), dict(assignment), dict(configs), is_internal(name)
        )
        self._topics[name] = topic
        self._save()
        self._changed({name})
        return topic

    async def delete_topic(self, name: str) -> None:
        if self._topics.pop(name, None) is not None:
            self._save()
            self._changed({name})

    async def learn_topics(self, names: set[str]) -> None:
        """This store is the record itself: it knows every topic already."""

    async def create_partitions(self, name: str, new_assignment: dict[int, list[int]]) -> None:
        topic = self._topics[name]
        merged = {**topic.assignment, **new_assignment}
        self._topics[name] = TopicMetadata(
            name, topic.topic_id, merged, topic.configs, topic.internal
        )
        self._save()
        self._changed({name})

    async def set_topic_configs(self, name: str, configs: Mapping[str, str]) -> None:
        topic = self._topics[name]
        self._topics[name] = TopicMetadata(
            name, topic.topic_id, topic.assignment, dict(configs), topic.internal
        )
        self._save()
        self._changed({name})

    async def topic_configs(self, name: str) -> dict[str, str]:
        return dict(self._topics[name].configs)

    def broker_configs(self) -> dict[str, str]:
        return {**self._broker_default_configs, **self._broker_configs}

    def broker_config_layers(self) -> tuple[dict[str, str], dict[str, str]]:
        return dict(self._broker_default_configs), dict(self._broker_configs)

    async def set_broker_configs(
        self, configs: Mapping[str, str], cluster_default: bool = False
    ) -> None:
        if cluster_default:
            self._broker_default_configs = dict(configs)
        else:
            self._broker_configs = dict(configs)
        self._save()
        self._changed(set())
