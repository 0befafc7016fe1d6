"""Broker configuration (Kafka's KafkaConfig): property names, defaults and validation."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from samsa.config.defs import LONG_MAX, ConfigDef, ConfigError, ConfigKey
from samsa.config.security import SECURITY_KEYS, is_listener_key, split_listener_key
from samsa.config.topic import (
    BROKER_SYNONYMS,
    CLEANUP_POLICIES,
    COMPRESSION_TYPES,
    GZIP_LEVEL,
    LZ4_LEVEL,
    TIMESTAMP_AFTER_MAX_MS,
    TIMESTAMP_BEFORE_MAX_MS,
    TIMESTAMP_TYPES,
    ZSTD_LEVEL,
    LogConfig,
)

BROKER_CONFIG = ConfigDef(
    [
        ConfigKey("broker.id", "int", 0, minimum=0),
        ConfigKey("broker.rack", "string", None, nullable=True),
        ConfigKey("log.dirs", "string", None, nullable=True),
        ConfigKey("log.dir", "string", None, nullable=True),
        ConfigKey("listeners", "string", "PLAINTEXT://127.0.0.1:9092"),
        ConfigKey("advertised.listeners", "string", None, nullable=True),
        ConfigKey("listener.security.protocol.map", "string", None, nullable=True),
        ConfigKey("inter.broker.listener.name", "string", None, nullable=True),
        ConfigKey(
            "http.listener",
            "string",
            None,
            nullable=True,
            doc="host:port of the side port serving /healthz, /readyz and /metrics",
        ),
        ConfigKey("zookeeper.connect", "string", None, nullable=True),
        ConfigKey("zookeeper.session.timeout.ms", "int", 18_000, minimum=1),
        ConfigKey("zookeeper.connection.timeout.ms", "int", None, nullable=True),
        ConfigKey(
            "broker.liveness.probe.interval.ms",
            "int",
            250,
            minimum=0,
            doc="Samsa's own: how often the controller probes each broker, and each broker the"
            " controller, for a process that no longer listens (0: only the ZooKeeper session"
            " tells a broker is gone)",
        ),
        ConfigKey(
            "broker.liveness.probe.failures",
            "int",
            3,
            minimum=1,
            doc="Samsa's own: probes in a row whose connection is refused or reset that make a"
            " broker dead; probes that are only slow never do",
        ),
        ConfigKey("num.partitions", "int", 1, minimum=1),
        ConfigKey("default.replication.factor", "int", 1, minimum=1),
        ConfigKey("auto.create.topics.enable", "boolean", True),
        ConfigKey("delete.topic.enable", "boolean", True),
        ConfigKey("message.max.bytes", "int", 1_048_588, minimum=0, read_only=False),
        ConfigKey("socket.request.max.bytes", "int", 104_857_600, minimum=1),
        ConfigKey("socket.send.buffer.bytes", "int", 102_400),
        ConfigKey("socket.receive.buffer.bytes", "int", 102_400),
        ConfigKey("connections.max.idle.ms", "long", 600_000, minimum=0),
        ConfigKey("log.segment.bytes", "int", 1_073_741_824, minimum=14, read_only=False),
        ConfigKey("log.roll.ms", "long", None, nullable=True, minimum=1, read_only=False),
        ConfigKey("log.roll.hours", "int", 168, minimum=1),
        ConfigKey("log.roll.jitter.ms", "long", None, nullable=True, minimum=0),
        ConfigKey("log.roll.jitter.hours", "int", 0, minimum=0),
        ConfigKey("log.retention.ms", "long", None, nullable=True, minimum=-1, read_only=False),
        ConfigKey("log.retention.minutes", "int", None, nullable=True),
        ConfigKey("log.retention.hours", "int", 168),
        ConfigKey("log.retention.bytes", "long", -1, read_only=False),
        ConfigKey("log.retention.check.interval.ms", "long", 300_000, minimum=1),
        ConfigKey("log.index.size.max.bytes", "int", 10_485_760, minimum=4, read_only=False),
        ConfigKey("log.index.interval.bytes", "int", 4096, minimum=0, read_only=False),
        ConfigKey("log.flush.interval.messages", "long", LONG_MAX, minimum=1, read_only=False),
        ConfigKey("log.flush.interval.ms", "long", None, nullable=True, read_only=False),
        ConfigKey("log.flush.scheduler.interval.ms", "long", LONG_MAX),
        ConfigKey("log.flush.offset.checkpoint.interval.ms", "int", 60_000, minimum=0),
        ConfigKey(
            "log.message.timestamp.type",
            "string",
            "CreateTime",
            choices=TIMESTAMP_TYPES,
            read_only=False,
        ),
        dataclasses.replace(
            TIMESTAMP_BEFORE_MAX_MS, name="log.message.timestamp.before.max.ms", read_only=False
        ),
        dataclasses.replace(
            TIMESTAMP_AFTER_MAX_MS, name="log.message.timestamp.after.max.ms", read_only=False
        ),
        ConfigKey(
            "log.cleanup.policy", "list", ["delete"], choices=CLEANUP_POLICIES, read_only=False
        ),
        ConfigKey("log.segment.delete.delay.ms", "long", 60_000, minimum=0, read_only=False),
        ConfigKey("log.preallocate", "boolean", False),
        ConfigKey("log.cleaner.enable", "boolean", True),
        ConfigKey(
            "log.cleaner.delete.retention.ms", "long", 86_400_000, minimum=0, read_only=False
        ),
        ConfigKey(
            "log.cleaner.min.cleanable.ratio", "double", 0.5, minimum=0, maximum=1, read_only=False
        ),
        ConfigKey("log.cleaner.min.compaction.lag.ms", "long", 0, minimum=0, read_only=False),
        ConfigKey(
            "log.cleaner.max.compaction.lag.ms", "long", LONG_MAX, minimum=1, read_only=False
        ),
        ConfigKey("log.cleaner.backoff.ms", "long", 15_000, minimum=0),
        ConfigKey(
            "log.cleaner.threads",
            "int",
            1,
            minimum=1,
            maximum=1,
            doc="one cleaner, run on the event loop in slices",
        ),
        ConfigKey("log.cleaner.dedupe.buffer.size", "long", 134_217_728, minimum=1),
        ConfigKey("log.cleaner.io.buffer.size", "int", 524_288, minimum=1),
        ConfigKey("log.cleaner.io.buffer.load.factor", "double", 0.9, minimum=0, maximum=1),
        ConfigKey(
            "log.cleaner.io.max.bytes.per.second", "double", 1.7976931348623157e308, minimum=0
        ),
        # The topics' defaults; as in Kafka, changed at run time for this broker or all.
        ConfigKey(
            "compression.type", "string", "producer", choices=COMPRESSION_TYPES, read_only=False
        ),
        dataclasses.replace(GZIP_LEVEL, read_only=False),
        dataclasses.replace(LZ4_LEVEL, read_only=False),
        dataclasses.replace(ZSTD_LEVEL, read_only=False),
        ConfigKey("min.insync.replicas", "int", 1, minimum=1, read_only=False),
        ConfigKey("unclean.leader.election.enable", "boolean", False, read_only=False),
        ConfigKey("replica.lag.time.max.ms", "long", 30_000, minimum=1),
        ConfigKey("replica.fetch.max.bytes", "int", 1_048_576, minimum=0),
        ConfigKey("replica.fetch.wait.max.ms", "int", 500, minimum=0),
        ConfigKey("replica.fetch.min.bytes", "int", 1, minimum=1),
        ConfigKey("replica.socket.timeout.ms", "int", 30_000),
        ConfigKey("replica.fetch.response.max.bytes", "int", 10_485_760, minimum=0),
        ConfigKey("replica.fetch.backoff.ms", "int", 1000, minimum=0),
        ConfigKey("replica.high.watermark.checkpoint.interval.ms", "long", 5000, minimum=1),
        ConfigKey("controller.socket.timeout.ms", "int", 30_000, minimum=1),
        ConfigKey("request.timeout.ms", "int", 30_000, minimum=1),
        # Client quotas (KIP-13): the rate is measured over quota.window.num windows.
        ConfigKey("quota.window.num", "int", 11, minimum=1),
        ConfigKey("quota.window.size.seconds", "int", 1, minimum=1),
        # Bytes per second for replicas being added by a reassignment (0: unthrottled).
        ConfigKey("follower.replication.throttled.rate", "long", 0, minimum=0, read_only=False),
        ConfigKey("controlled.shutdown.enable", "boolean", True),
        ConfigKey("controlled.shutdown.max.retries", "int", 3, minimum=0),
        ConfigKey("controlled.shutdown.retry.backoff.ms", "long", 5000, minimum=0),
        ConfigKey("auto.leader.rebalance.enable", "boolean", True),
        ConfigKey("leader.imbalance.per.broker.percentage", "int", 10, minimum=0),
        ConfigKey("leader.imbalance.check.interval.seconds", "long", 300, minimum=1),
        ConfigKey("offsets.topic.num.partitions", "int", 50, minimum=1),
        ConfigKey("offsets.topic.replication.factor", "short", 3, minimum=1),
        ConfigKey("offsets.topic.segment.bytes", "int", 104_857_600, minimum=1),
        ConfigKey("offsets.retention.minutes", "int", 10_080, minimum=1),
        ConfigKey("offset.metadata.max.bytes", "int", 4096, minimum=0),
        ConfigKey("offsets.retention.check.interval.ms", "long", 600_000, minimum=1),
        ConfigKey("group.initial.rebalance.delay.ms", "int", 3000, minimum=0),
        ConfigKey("group.min.session.timeout.ms", "int", 6000),
        ConfigKey("group.max.session.timeout.ms", "int", 1_800_000),
        ConfigKey("group.max.size", "int", 2**31 - 1, minimum=1),
        ConfigKey("transactional.id.expiration.ms", "int", 604_800_000, minimum=1),
        ConfigKey("transaction.state.log.num.partitions", "int", 50, minimum=1),
        ConfigKey("transaction.state.log.replication.factor", "short", 3, minimum=1),
        ConfigKey("transaction.state.log.min.isr", "int", 2, minimum=1),
        ConfigKey("transaction.state.log.segment.bytes", "int", 104_857_600, minimum=1),
        ConfigKey("transaction.max.timeout.ms", "int", 900_000, minimum=1),
        ConfigKey("transaction.partition.verification.enable", "boolean", True, read_only=False),
        ConfigKey(
            "transaction.abort.timed.out.transaction.cleanup.interval.ms", "int", 10_000, minimum=1
        ),
        ConfigKey(
            "transaction.remove.expired.transaction.cleanup.interval.ms",
            "int",
            3_600_000,
            minimum=1,
        ),
        ConfigKey("producer.id.expiration.ms", "int", 86_400_000, minimum=1, read_only=False),
        ConfigKey("producer.id.expiration.check.interval.ms", "int", 600_000, minimum=1),
        ConfigKey("max.incremental.fetch.session.cache.slots", "int", 1000, minimum=0),
        ConfigKey("fetch.max.bytes", "int", 57_671_680, minimum=1024),
        ConfigKey("cluster.id", "string", None, nullable=True),
        *SECURITY_KEYS,
    ]
)


class KafkaConfig:
    """Parsed broker properties; attribute access by Kafka name through ``get``/``[]``."""

    def __init__(self, props: Mapping[str, Any] | None = None) -> None:
        props = dict(props or {})
        # listener.name.<l>.<key>: a listener's own TLS and SASL settings.
        self.listener_overrides: dict[str, dict[str, Any]] = {}
        for name in [n for n in props if split_listener_key(n)]:
            listener, key = split_listener_key(name) or ("", "")
            raw = props.pop(name)
            if not is_listener_key(key):
                raise ConfigError(name, "not a setting a listener can override")
            value = BROKER_CONFIG[key].parse(raw) if key in BROKER_CONFIG else str(raw)
            self.listener_overrides.setdefault(listener.lower(), {})[key] = value
        parsed = BROKER_CONFIG.parse(props)
        self.originals: dict[str, Any] = {
            **parsed,
            **{
                f"listener.name.{listener}.{key}": value
                for listener, values in self.listener_overrides.items()
                for key, value in values.items()
            },
        }
        self.values: dict[str, Any] = {**BROKER_CONFIG.defaults(), **parsed}
        self._validate()

    def _validate(self) -> None:
        if self.values["message.max.bytes"] > self.values["socket.request.max.bytes"]:
            raise ConfigError("message.max.bytes", "must not exceed socket.request.max.bytes")

    def __getitem__(self, name: str) -> Any:
        return self.values[name]

    def get(self, name: str, default: Any = None) -> Any:
        return self.values.get(name, default)

    def for_listener(self, listener: str, name: str) -> Any:
        """A setting as a listener sees it: its ``listener.name.<l>.`` override, else the
        broker-wide value."""
        values = self.listener_overrides.get(listener.lower(), {})
        return values[name] if name in values else self.values.get(name)

    def with_overrides(self, props: Mapping[str, Any]) -> KafkaConfig:
        return KafkaConfig({**self.originals, **props})

    @property
    def broker_id(self) -> int:
        return int(self.values["broker.id"])

    @property
    def log_roll_ms(self) -> int:
        ms = self.values["log.roll.ms"]
        return int(ms) if ms is not None else int(self.values["log.roll.hours"]) * 3_600_000

    @property
    def log_roll_jitter_ms(self) -> int:
        ms = self.values["log.roll.jitter.ms"]
        return int(ms) if ms is not None else int(self.values["log.roll.jitter.hours"]) * 3_600_000

    @property
    def log_retention_ms(self) -> int:
        if self.values["log.retention.ms"] is not None:
            return int(self.values["log.retention.ms"])
        if self.values["log.retention.minutes"] is not None:
            return int(self.values["log.retention.minutes"]) * 60_000
        return int(self.values["log.retention.hours"]) * 3_600_000

    @property
    def log_flush_interval_ms(self) -> int:
        ms = self.values["log.flush.interval.ms"]
        return int(ms) if ms is not None else LONG_MAX

    def topic_defaults(self) -> dict[str, Any]:
        """Topic-level keys with the values this broker gives topics that don't override them."""
        derived = {
            "log.roll.ms": self.log_roll_ms,
            "log.roll.jitter.ms": self.log_roll_jitter_ms,
            "log.retention.ms": self.log_retention_ms,
            "log.flush.interval.ms": self.log_flush_interval_ms,
        }
        out: dict[str, Any] = {}
        for topic_key, broker_key in BROKER_SYNONYMS.items():
            out[topic_key] = derived.get(broker_key, self.values.get(broker_key))
        return out

    def log_config(self, overrides: Mapping[str, Any] | None = None) -> LogConfig:
        return LogConfig.from_props(overrides or {}, self.topic_defaults())
