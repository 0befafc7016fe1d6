"""The group coordinator's settings (Kafka's GroupConfig and OffsetConfig), by Kafka name."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

GROUP_METADATA_TOPIC_NAME = "__consumer_offsets"


@dataclass(frozen=True)
class GroupCoordinatorConfig:
    """Defaults are Kafka 3.x's."""

    offsets_topic_num_partitions: int = 50
    group_min_session_timeout_ms: int = 6_000
    group_max_session_timeout_ms: int = 1_800_000
    group_max_size: int = 2**31 - 1
    group_initial_rebalance_delay_ms: int = 3_000
    offset_metadata_max_bytes: int = 4_096
    offsets_retention_ms: int = 10_080 * 60_000
    offsets_retention_check_interval_ms: int = 600_000
    # The largest record batch __consumer_offsets takes (the broker's message.max.bytes, as
    # the topic sets no max.message.bytes of its own): a group's metadata must fit in one.
    max_message_bytes: int = 1_048_588

    @classmethod
    def from_properties(cls, props: Mapping[str, Any]) -> GroupCoordinatorConfig:
        """Build from broker properties (``KafkaConfig`` or a plain dict) by Kafka name."""
        d = cls()

        def get(name: str, default: int) -> int:
            value = props.get(name)
            return default if value is None else int(value)

        return cls(
            offsets_topic_num_partitions=get(
                "offsets.topic.num.partitions", d.offsets_topic_num_partitions
            ),
            group_min_session_timeout_ms=get(
                "group.min.session.timeout.ms", d.group_min_session_timeout_ms
            ),
            group_max_session_timeout_ms=get(
                "group.max.session.timeout.ms", d.group_max_session_timeout_ms
            ),
            group_max_size=get("group.max.size", d.group_max_size),
            group_initial_rebalance_delay_ms=get(
                "group.initial.rebalance.delay.ms", d.group_initial_rebalance_delay_ms
            ),
            offset_metadata_max_bytes=get("offset.metadata.max.bytes", d.offset_metadata_max_bytes),
            offsets_retention_ms=get("offsets.retention.minutes", d.offsets_retention_ms // 60_000)
            * 60_000,
            offsets_retention_check_interval_ms=get(
                "offsets.retention.check.interval.ms", d.offsets_retention_check_interval_ms
            ),
            max_message_bytes=get("message.max.bytes", d.max_message_bytes),
        )
