"""Topic-level configuration (Kafka's LogConfig): keys, defaults from the broker, validation."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from samsa.config.defs import INT_MAX, LONG_MAX, ConfigDef, ConfigError, ConfigKey

CLEANUP_POLICIES = ("delete", "compact")
TIMESTAMP_TYPES = ("CreateTime", "LogAppendTime")
# Kafka's BrokerCompressionType, in its order: "producer" keeps the codec each batch was sent
# with, any other value is the codec batches are stored with (recompressed if need be).
COMPRESSION_TYPES = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")
# KIP-390's levels, with Kafka's defaults and ranges: gzip 1 to 9, or -1 for zlib's default;
# lz4 1 to 17 (9, the default, is lz4's fast mode, the others its high-compression mode);
# zstd's own range.
GZIP_LEVEL = ConfigKey("compression.gzip.level", "int", -1, minimum=1, maximum=9, also=(-1,))
LZ4_LEVEL = ConfigKey("compression.lz4.level", "int", 9, minimum=1, maximum=17)
ZSTD_LEVEL = ConfigKey("compression.zstd.level", "int", 3, minimum=-131072, maximum=22)
# KIP-937's bounds on a CreateTime record's distance from the broker's clock, with Kafka 4.3's
# defaults: a record may be any age (Long.MAX_VALUE), and at most an hour ahead (KIP-1030's
# default since Kafka 4.0, which also removed message.timestamp.difference.max.ms).
TIMESTAMP_BEFORE_MAX_MS = ConfigKey("message.timestamp.before.max.ms", "long", LONG_MAX, minimum=0)
TIMESTAMP_AFTER_MAX_MS = ConfigKey("message.timestamp.after.max.ms", "long", 3_600_000, minimum=0)

# Topic key -> the broker key that supplies its default (Kafka's "synonyms").
BROKER_SYNONYMS: dict[str, str] = {
    "cleanup.policy": "log.cleanup.policy",
    "compression.type": "compression.type",
    "compression.gzip.level": "compression.gzip.level",
    "compression.lz4.level": "compression.lz4.level",
    "compression.zstd.level": "compression.zstd.level",
    "delete.retention.ms": "log.cleaner.delete.retention.ms",
    "file.delete.delay.ms": "log.segment.delete.delay.ms",
    "flush.messages": "log.flush.interval.messages",
    "flush.ms": "log.flush.interval.ms",
    "index.interval.bytes": "log.index.interval.bytes",
    "max.message.bytes": "message.max.bytes",
    "message.timestamp.after.max.ms": "log.message.timestamp.after.max.ms",
    "message.timestamp.before.max.ms": "log.message.timestamp.before.max.ms",
    "message.timestamp.type": "log.message.timestamp.type",
    "min.cleanable.dirty.ratio": "log.cleaner.min.cleanable.ratio",
    "min.compaction.lag.ms": "log.cleaner.min.compaction.lag.ms",
    "max.compaction.lag.ms": "log.cleaner.max.compaction.lag.ms",
    "min.insync.replicas": "min.insync.replicas",
    "preallocate": "log.preallocate",
    "retention.bytes": "log.retention.bytes",
    "retention.ms": "log.retention.ms",
    "segment.bytes": "log.segment.bytes",
    "segment.index.bytes": "log.index.size.max.bytes",
    "segment.jitter.ms": "log.roll.jitter.ms",
    "segment.ms": "log.roll.ms",
    "unclean.leader.election.enable": "unclean.leader.election.enable",
}

TOPIC_CONFIG = ConfigDef(
    [
        ConfigKey("cleanup.policy", "list", ["delete"], choices=CLEANUP_POLICIES),
        ConfigKey("compression.type", "string", "producer", choices=COMPRESSION_TYPES),
        GZIP_LEVEL,
        LZ4_LEVEL,
        ZSTD_LEVEL,
        ConfigKey("delete.retention.ms", "long", 86_400_000, minimum=0),
        ConfigKey("file.delete.delay.ms", "long", 60_000, minimum=0),
        ConfigKey("flush.messages", "long", LONG_MAX, minimum=1),
        ConfigKey("flush.ms", "long", LONG_MAX, minimum=0),
        ConfigKey("index.interval.bytes", "int", 4096, minimum=0),
        ConfigKey("max.message.bytes", "int", 1_048_588, minimum=0),
        TIMESTAMP_AFTER_MAX_MS,
        TIMESTAMP_BEFORE_MAX_MS,
        ConfigKey("message.timestamp.type", "string", "CreateTime", choices=TIMESTAMP_TYPES),
        ConfigKey("min.cleanable.dirty.ratio", "double", 0.5, minimum=0, maximum=1),
        ConfigKey("min.compaction.lag.ms", "long", 0, minimum=0),
        ConfigKey("max.compaction.lag.ms", "long", LONG_MAX, minimum=1),
        ConfigKey("min.insync.replicas", "int", 1, minimum=1),
        ConfigKey("preallocate", "boolean", False),
        ConfigKey("retention.bytes", "long", -1),
        ConfigKey("retention.ms", "long", 604_800_000, minimum=-1),
        ConfigKey("segment.bytes", "int", 1_073_741_824, minimum=14),
        ConfigKey("segment.index.bytes", "int", 10_485_760, minimum=4),
        ConfigKey("segment.jitter.ms", "long", 0, minimum=0),
        ConfigKey("segment.ms", "long", 604_800_000, minimum=1),
        ConfigKey("unclean.leader.election.enable", "boolean", False),
    ]
)


@dataclass(frozen=True)
class LogConfig:
    """The effective settings of one partition's log (topic overrides over broker defaults)."""

    segment_bytes: int = 1_073_741_824
    segment_ms: int = 604_800_000
    segment_jitter_ms: int = 0
    segment_index_bytes: int = 10_485_760
    index_interval_bytes: int = 4096
    retention_bytes: int = -1
    retention_ms: int = 604_800_000
    max_message_bytes: int = 1_048_588
    message_timestamp_type: str = "CreateTime"
    message_timestamp_before_max_ms: int = LONG_MAX
    message_timestamp_after_max_ms: int = 3_600_000
    cleanup_policy: tuple[str, ...] = ("delete",)
    delete_retention_ms: int = 86_400_000
    file_delete_delay_ms: int = 60_000
    flush_messages: int = LONG_MAX
    flush_ms: int = LONG_MAX
    min_insync_replicas: int = 1
    min_cleanable_dirty_ratio: float = 0.5
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int = LONG_MAX
    unclean_leader_election_enable: bool = False
    preallocate: bool = False
    compression_type: str = "producer"
    compression_gzip_level: int = -1
    compression_lz4_level: int = 9
    compression_zstd_level: int = 3
    overrides: Mapping[str, Any] = field(default_factory=dict, compare=False)

    @property
    def compact(self) -> bool:
        return "compact" in self.cleanup_policy

    @property
    def delete(self) -> bool:
        return "delete" in self.cleanup_policy

    @property
    def compression_level(self) -> int | None:
        """The level of the topic's codec (KIP-390), None for codecs without levels."""
        return {
            "gzip": self.compression_gzip_level,
            "lz4": self.compression_lz4_level,
            "zstd": self.compression_zstd_level,
        }.get(self.compression_type)

    @classmethod
    def from_props(
        cls, overrides: Mapping[str, Any], defaults: Mapping[str, Any] | None = None
    ) -> LogConfig:
        """Build from topic overrides (raw strings allowed) over topic-key defaults."""
        merged: dict[str, Any] = dict(TOPIC_CONFIG.defaults())
        if defaults:
            merged.update(defaults)
        parsed = TOPIC_CONFIG.parse(overrides)
        merged.update(parsed)
        values: dict[str, Any] = {}
        names = {f.name for f in fields(cls)}
        for key, value in merged.items():
            attr = key.replace(".", "_")
            if attr in names:
                values[attr] = tuple(value) if isinstance(value, list) else value
        config = cls(**values, overrides=dict(parsed))
        if config.segment_ms > INT_MAX * 1000:
            raise ConfigError("segment.ms", "value too large")
        return config

    def to_props(self) -> dict[str, Any]:
        """Every topic key with its effective value."""
        out: dict[str, Any] = {}
        for key in TOPIC_CONFIG.keys:
            value = getattr(self, key.replace(".", "_"))
            out[key] = list(value) if isinstance(value, tuple) else value
        return out
