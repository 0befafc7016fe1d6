"""Configuration definitions with Kafka's property names, types and defaults (pure, no I/O)."""

from samsa.config.defs import ConfigDef, ConfigError, ConfigKey
from samsa.config.kafka import KafkaConfig
from samsa.config.topic import TOPIC_CONFIG, LogConfig

__all__ = ["TOPIC_CONFIG", "ConfigDef", "ConfigError", "ConfigKey", "KafkaConfig", "LogConfig"]
