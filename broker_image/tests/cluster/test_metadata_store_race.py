"""A topic that a controller names before this broker's watches have seen it.

The controller sends LeaderAndIsr as soon as its own watch sees a new topic; the leader's
watches can be later.  A log created then with the broker's defaults appended the first batch
of a ``compression.type=zstd`` topic uncompressed (seen once in a CI run of
tests/clients/test_compression_type.py).  The broker reads the topic from ZooKeeper instead,
as Kafka's ZooKeeper mode does when it creates a log.
"""

from __future__ import annotations

import uuid
from pathlib import Path

from samsa.local_cluster.zookeeper import ZooKeeperServer
from samsa.metadata.model import BrokerInfo
from samsa.metadata.zk_client import KafkaZkClient
from samsa.metadata.zk_metadata_store import ZkMetadataStore


async def test_a_topic_named_before_the_watches_saw_it_is_known_with_its_configs(
    tmp_path: Path,
) -> None:
    with ZooKeeperServer(tmp_path / "zk") as server:
        admin = KafkaZkClient(server.connect_string)
        broker = KafkaZkClient(server.connect_string)
        await admin.start()
        await broker.start()
        try:
            store = ZkMetadataStore(broker, BrokerInfo(0, "127.0.0.1", 9092), "c")
            await store.start()
            topic_id = uuid.uuid4()
            await admin.create_topic("zstd-topic", topic_id, {0: [0]}, {"compression.type": "zstd"})
            # No wait for the watches: the request that names the topic is handled now.
            await store.learn_topics({"zstd-topic", "never-created"})
            known = store.topics()["zstd-topic"]
            assert (known.topic_id, known.configs) == (topic_id, {"compression.type": "zstd"})
            assert known.assignment == {0: [0]}
            assert "never-created" not in store.topics()
            await store.close()
        finally:
            await broker.close()
            await admin.close()
