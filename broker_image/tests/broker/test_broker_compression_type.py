"""compression.type as the broker's default, set at run time, and a topic's own over it: the
codec the next batches are stored with, and what DescribeConfigs says of it."""

from __future__ import annotations

from confluent_kafka import Producer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewTopic,
)
from kafka_support import wait_until

from samsa.protocol.record_batch import COMPRESSION_NAMES, scan_batches
from samsa.testing import InProcessBroker


def codecs(broker: InProcessBroker, topic: str) -> list[str]:
    """The codec of each batch in the topic's segments, in order."""
    found = []
    for log in sorted(broker.data_dir.glob(f"**/{topic}-0/*.log")):
        found += [COMPRESSION_NAMES[h.compression] for _, h in scan_batches(log.read_bytes())]
    return found


def send(broker: InProcessBroker, topic: str, codec: str) -> None:
    p = Producer({"bootstrap.servers": broker.bootstrap_servers, "compression.type": codec})
    for i in range(20):
        p.produce(topic, key=b"k%d" % i, value=b"value " * 20, partition=0)
    assert p.flush(20) == 0


def set_compression_type(
    admin: AdminClient, kind: ConfigResource.Type, name: str, value: str, source: ConfigSource
) -> None:
    """Set compression.type on the broker or topic resource, until the topic "plain" is
    described with that value from that source."""
    entry = ConfigEntry("compression.type", value, incremental_operation=AlterConfigOpType.SET)
    resource = ConfigResource(kind, name, incremental_configs=[entry])
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(10)
    topic = ConfigResource(ConfigResource.Type.TOPIC, "plain")

    def described() -> tuple[str, ConfigSource]:
        entry = admin.describe_configs([topic])[topic].result(10)["compression.type"]
        return entry.value, ConfigSource(entry.source)

    wait_until(lambda: described() == (value, source), what=f"compression.type={value} described")


def test_the_broker_default_applies_at_once_and_a_topic_override_wins(
    samsa_broker: InProcessBroker,
) -> None:
    admin = AdminClient({"bootstrap.servers": samsa_broker.bootstrap_servers})
    admin.create_topics([NewTopic("plain", 1, 1)])["plain"].result(10)
    send(samsa_broker, "plain", "lz4")
    assert codecs(samsa_broker, "plain") == ["lz4"]  # producer: stored as sent

    broker = ConfigResource.Type.BROKER
    set_compression_type(admin, broker, "0", "zstd", ConfigSource.DYNAMIC_BROKER_CONFIG)
    send(samsa_broker, "plain", "lz4")
    send(samsa_broker, "plain", "none")
    assert codecs(samsa_broker, "plain") == ["lz4", "zstd", "zstd"]

    topic = ConfigResource.Type.TOPIC
    set_compression_type(admin, topic, "plain", "producer", ConfigSource.DYNAMIC_TOPIC_CONFIG)
    send(samsa_broker, "plain", "gzip")
    assert codecs(samsa_broker, "plain") == ["lz4", "zstd", "zstd", "gzip"]
