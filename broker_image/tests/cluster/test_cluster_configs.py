"""Topic configs across brokers: what one broker altered, every broker describes at once, as
Kafka's ZooKeeper-mode brokers read a topic's config from ZooKeeper. Admin clients send a
describe to whichever broker is least loaded, often not the one that altered it."""

from __future__ import annotations

from cluster_support import create_topic
from kafka_support import Wire
from kio.schema.describe_configs.v4 import request as describe
from kio.schema.incremental_alter_configs.v1 import request as alter
from kio.static.primitive import i8

from samsa.local_cluster.cluster import LocalCluster

TOPIC_RESOURCE, SET, DELETE = i8(2), i8(0), i8(1)


def _alter(wire: Wire, topic: str, name: str, value: str | None) -> int:
    op = SET if value is not None else DELETE
    body = alter.IncrementalAlterConfigsRequest(
        resources=(
            alter.AlterConfigsResource(
                resource_type=TOPIC_RESOURCE,
                resource_name=topic,
                configs=(alter.AlterableConfig(name=name, config_operation=op, value=value),),
            ),
        ),
        validate_only=False,
    )
    (result,) = wire.request(44, 1, body).responses
    return int(result.error_code.value)


def _described(wire: Wire, topic: str, name: str) -> tuple[str | None, int]:
    body = describe.DescribeConfigsRequest(
        resources=(
            describe.DescribeConfigsResource(
                resource_type=TOPIC_RESOURCE, resource_name=topic, configuration_keys=(name,)
            ),
        ),
        include_synonyms=False,
        include_documentation=False,
    )
    (result,) = wire.request(32, 4, body).results
    assert int(result.error_code.value) == 0, result
    (entry,) = result.configs
    return entry.value, int(entry.config_source)


def test_an_alteration_on_one_broker_is_described_and_built_on_by_every_other(
    cluster: LocalCluster,
) -> None:
    create_topic(cluster, "configs", partitions=1, rf=3)
    ports = [b.port for b in cluster.state.brokers]  # type: ignore[union-attr]
    wires = [Wire(port) for port in ports]
    try:
        for round_ in range(30):
            writer = wires[round_ % 3]
            value = str(1_000_000 + round_)
            assert _alter(writer, "configs", "max.message.bytes", value) == 0
            for reader in wires:
                assert _described(reader, "configs", "max.message.bytes") == (value, 1), round_
            # An incremental alteration on the next broker builds on this one, not on what
            # that broker's watch has seen so far: deleting one key keeps the other.
            assert _alter(writer, "configs", "retention.ms", str(3_600_000 + round_)) == 0
            following = wires[(round_ + 1) % 3]
            assert _alter(following, "configs", "max.message.bytes", None) == 0
            for reader in wires:
                assert _described(reader, "configs", "max.message.bytes") == ("1048588", 5)
                assert _described(reader, "configs", "retention.ms") == (
                    str(3_600_000 + round_),
                    1,
                ), round_
    finally:
        for wire in wires:
            wire.close()
