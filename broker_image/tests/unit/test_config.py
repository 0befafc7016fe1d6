"""Broker and topic configuration: Kafka's names and defaults, one-line errors naming the key."""

import pytest

from samsa.broker.properties import parse_listener, parse_overrides, parse_properties
from samsa.config import ConfigError, KafkaConfig, LogConfig


def test_defaults_are_kafkas() -> None:
    config = KafkaConfig()
    assert config["num.partitions"] == 1
    assert config["message.max.bytes"] == 1_048_588
    assert config["socket.request.max.bytes"] == 104_857_600
    assert config["auto.create.topics.enable"] is True
    assert config.log_retention_ms == 168 * 3_600_000
    assert config.log_roll_ms == 168 * 3_600_000
    log = config.log_config()
    assert log.segment_bytes == 1_073_741_824
    assert log.retention_bytes == -1
    assert log.cleanup_policy == ("delete",)


def test_retention_precedence_ms_over_minutes_over_hours() -> None:
    assert KafkaConfig({"log.retention.hours": "1"}).log_retention_ms == 3_600_000
    assert (
        KafkaConfig({"log.retention.minutes": "2", "log.retention.hours": "1"}).log_retention_ms
        == 120_000
    )
    assert (
        KafkaConfig({"log.retention.ms": "5", "log.retention.minutes": "2"}).log_retention_ms == 5
    )


def test_broker_values_become_topic_defaults() -> None:
    config = KafkaConfig(
        {
            "log.segment.bytes": "2048",
            "log.retention.bytes": "10000",
            "log.message.timestamp.type": "LogAppendTime",
        }
    )
    log = config.log_config({"retention.ms": "60000"})
    assert log.segment_bytes == 2048
    assert log.retention_bytes == 10000
    assert log.message_timestamp_type == "LogAppendTime"
    assert log.retention_ms == 60000
    assert log.overrides == {"retention.ms": 60000}


@pytest.mark.parametrize(
    ("props", "key"),
    [
        ({"no.such.key": "1"}, "no.such.key"),
        ({"num.partitions": "many"}, "num.partitions"),
        ({"num.partitions": "0"}, "num.partitions"),
        ({"auto.create.topics.enable": "yes"}, "auto.create.topics.enable"),
        ({"log.message.timestamp.type": "WallClock"}, "log.message.timestamp.type"),
        ({"log.cleanup.policy": "delete,archive"}, "log.cleanup.policy"),
        ({"message.max.bytes": "200000000"}, "message.max.bytes"),
        ({"log.message.timestamp.after.max.ms": "-5"}, "log.message.timestamp.after.max.ms"),
        (
            {"log.message.timestamp.difference.max.ms": "1000"},
            "log.message.timestamp.difference.max.ms",
        ),
    ],
)
def test_invalid_broker_settings_name_the_key(props: dict[str, str], key: str) -> None:
    with pytest.raises(ConfigError) as err:
        KafkaConfig(props)
    assert err.value.key == key
    assert str(err.value).startswith(key)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize(
    ("props", "key"),
    [
        ({"retention.ms": "abc"}, "retention.ms"),
        ({"segment.bytes": "1"}, "segment.bytes"),
        ({"cleanup.policy": "forever"}, "cleanup.policy"),
        ({"compression.type": "brotli"}, "compression.type"),
        ({"compression.type": "none"}, "compression.type"),  # the producer's name, not Kafka's
        ({"compression.gzip.level": "0"}, "compression.gzip.level"),
        ({"compression.gzip.level": "10"}, "compression.gzip.level"),
        ({"compression.lz4.level": "18"}, "compression.lz4.level"),
        ({"compression.zstd.level": "23"}, "compression.zstd.level"),
        ({"compression.zstd.level": "-131073"}, "compression.zstd.level"),
        ({"message.timestamp.after.max.ms": "-1"}, "message.timestamp.after.max.ms"),
        ({"message.timestamp.before.max.ms": "soon"}, "message.timestamp.before.max.ms"),
        # Kafka 4.0 removed it (KIP-937 replaced it with before/after.max.ms): unknown.
        ({"message.timestamp.difference.max.ms": "1000"}, "message.timestamp.difference.max.ms"),
        ({"nosuch.key": "1"}, "nosuch.key"),
    ],
)
def test_invalid_topic_settings_name_the_key(props: dict[str, str], key: str) -> None:
    with pytest.raises(ConfigError) as err:
        LogConfig.from_props(props)
    assert err.value.key == key


@pytest.mark.parametrize("name", ["producer", "uncompressed", "gzip", "snappy", "lz4", "zstd"])
def test_every_kafka_compression_type_is_a_topic_and_broker_setting(name: str) -> None:
    assert LogConfig.from_props({"compression.type": name}).compression_type == name
    assert KafkaConfig({"compression.type": name}).log_config().compression_type == name


def test_compression_levels_as_kafka_defines_them() -> None:
    """KIP-390: Kafka's defaults, its ranges' ends accepted, gzip's -1 too; the broker's
    settings are the topics' defaults."""
    defaults = LogConfig.from_props({})
    assert (
        defaults.compression_gzip_level,
        defaults.compression_lz4_level,
        defaults.compression_zstd_level,
    ) == (-1, 9, 3)
    ends = {"gzip": ("1", "9", "-1"), "lz4": ("1", "17"), "zstd": ("-131072", "22")}
    for codec, levels in ends.items():
        for level in levels:
            props = {"compression.type": codec, f"compression.{codec}.level": level}
            assert LogConfig.from_props(props).compression_level == int(level)
    broker = KafkaConfig({"compression.type": "zstd", "compression.zstd.level": "12"})
    assert broker.log_config().compression_level == 12
    assert broker.log_config({"compression.zstd.level": "1"}).compression_level == 1
    assert LogConfig.from_props({"compression.type": "snappy"}).compression_level is None


def test_timestamp_bounds_as_kafka_4_defines_them() -> None:
    """KIP-937's bounds with Kafka 4's defaults (any age, at most an hour ahead); the
    broker's log.message.timestamp.* are the topics' defaults."""
    defaults = LogConfig.from_props({})
    assert defaults.message_timestamp_before_max_ms == 2**63 - 1
    assert defaults.message_timestamp_after_max_ms == 3_600_000
    broker = KafkaConfig(
        {
            "log.message.timestamp.before.max.ms": "86400000",
            "log.message.timestamp.after.max.ms": "60000",
        }
    )
    log = broker.log_config({"message.timestamp.after.max.ms": "9223372036854775807"})
    assert log.message_timestamp_before_max_ms == 86_400_000
    assert log.message_timestamp_after_max_ms == 2**63 - 1
    assert broker.log_config().message_timestamp_after_max_ms == 60_000


def test_properties_file_syntax() -> None:
    text = (
        "# comment\n! also\nbroker.id=3\nlisteners = PLAINTEXT://h:1\nlog.dirs: /x\n"
        "long.value=a,\\\n  b\n"
    )
    assert parse_properties(text) == {
        "broker.id": "3",
        "listeners": "PLAINTEXT://h:1",
        "log.dirs": "/x",
        "long.value": "a,b",
    }
    with pytest.raises(ConfigError):
        parse_properties("just words\n")


def test_overrides_and_listeners() -> None:
    assert parse_overrides(["a=1", "b = two=2"]) == {"a": "1", "b": "two=2"}
    with pytest.raises(ConfigError):
        parse_overrides(["novalue"])
    assert parse_listener("PLAINTEXT://127.0.0.1:9092") == ("PLAINTEXT", "127.0.0.1", 9092)
    assert parse_listener("0.0.0.0:1") == ("PLAINTEXT", "0.0.0.0", 1)
    assert parse_listener("[::1]:7") == ("PLAINTEXT", "::1", 7)
    for bad in ("nohost", "h:notaport", "h:70000"):
        with pytest.raises(ValueError):
            parse_listener(bad)
