"""The source's and sink's options, parsed and checked: Spark's Kafka option names, no I/O.

Every mistake raises `SamsaOptionError` with a one-line message that names the option, so that
Spark shows the user which option to fix rather than where in our code it was noticed.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

EARLIEST = -2  # Kafka's (and Spark's) sentinels in offset JSON
LATEST = -1

TopicPartitionOffsets = dict[str, dict[int, int]]


class SamsaOptionError(ValueError):
    """An option is missing, unknown in combination, or malformed."""


def get_option(options: Mapping[str, str], name: str) -> str | None:
    # Spark passes options case-insensitively (a CaseInsensitiveDict, or lowered keys).
    lowered = name.lower()
    for key, value in options.items():
        if key.lower() == lowered:
            return str(value)
    return None


def _bool(options: Mapping[str, str], name: str, default: bool) -> bool:
    raw = get_option(options, name)
    if raw is None:
        return default
    if raw.strip().lower() in ("true", "false"):
        return raw.strip().lower() == "true"
    raise SamsaOptionError(f"option {name} must be true or false, not {raw!r}")


def _int(
    options: Mapping[str, str], name: str, default: int | None, minimum: int = 0
) -> int | None:
    raw = get_option(options, name)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise SamsaOptionError(f"option {name} must be an integer, not {raw!r}") from None
    if value < minimum:
        raise SamsaOptionError(f"option {name} must be at least {minimum}, not {value}")
    return value


def kafka_params(options: Mapping[str, str]) -> dict[str, str]:
    """The `kafka.*` options with their prefix removed: librdkafka configuration. The Java
    client's security settings, which Spark's own connector takes, are translated, so one set
    of options serves both formats."""
    params = {
        k[len("kafka.") :]: str(v) for k, v in options.items() if k.lower().startswith("kafka.")
    }
    return java_security_to_librdkafka(params)


# username="..." and password="..." of a JAAS config (PlainLoginModule, ScramLoginModule).
_JAAS_OPTION = re.compile(r'\b(username|password)\s*=\s*"((?:[^"\\]|\\.)*)"')


def java_security_to_librdkafka(params: Mapping[str, str]) -> dict[str, str]:
    """sasl.jaas.config becomes sasl.username and sasl.password; PEM trust and key stores
    (KIP-651: ssl.truststore.location or .certificates, ssl.keystore.location or .key with
    .certificate.chain) become librdkafka's ssl.ca.*, ssl.certificate.* and ssl.key.*."""
    out = dict(params)
    jaas = out.pop("sasl.jaas.config", None)
    if jaas is not None:
        found = {k: v.replace('\\"', '"') for k, v in _JAAS_OPTION.findall(jaas)}
        if "username" not in found or "password" not in found:
            raise SamsaOptionError(
                'option kafka.sasl.jaas.config needs username="..." and password="..."'
            )
        out.setdefault("sasl.username", found["username"])
        out.setdefault("sasl.password", found["password"])
    for store in ("ssl.truststore.type", "ssl.keystore.type"):
        kind = out.pop(store, None)
        if kind is not None and kind.upper() != "PEM":
            raise SamsaOptionError(
                f"option kafka.{store}={kind}: only PEM stores (KIP-651) are read here"
            )
    renames = {
        "ssl.truststore.location": "ssl.ca.location",
        "ssl.truststore.certificates": "ssl.ca.pem",
        "ssl.keystore.key": "ssl.key.pem",
        "ssl.keystore.certificate.chain": "ssl.certificate.pem",
        "ssl.keystore.password": "ssl.key.password",
    }
    for java, librdkafka in renames.items():
        if java in out:
            out.setdefault(librdkafka, out.pop(java))
    keystore = out.pop("ssl.keystore.location", None)
    if keystore is not None:  # one PEM file: the key, then its certificate chain
        out.setdefault("ssl.key.location", keystore)
        out.setdefault("ssl.certificate.location", keystore)
    return out


def bootstrap_servers(options: Mapping[str, str]) -> str:
    servers = get_option(options, "kafka.bootstrap.servers")
    if not servers or not servers.strip():
        raise SamsaOptionError("option kafka.bootstrap.servers is required (host:port[,host:port])")
    return servers.strip()


@dataclass(frozen=True)
class Subscription:
    """Which partitions to read: exactly one of Spark's three ways of saying it."""

    kind: Literal["subscribe", "subscribePattern", "assign"]
    topics: tuple[str, ...] = ()
    pattern: str = ""
    assigned: tuple[tuple[str, int], ...] = ()

    def describe(self) -> str:
        if self.kind == "subscribe":
            return f"subscribe={','.join(self.topics)}"
        if self.kind == "subscribePattern":
            return f"subscribePattern={self.pattern}"
        return f"assign={_assign_json(self.assigned)}"

    def select(self, partitions_by_topic: Mapping[str, int]) -> list[tuple[str, int]]:
        """The topic-partitions this subscription reads, given each topic's partition count.

        Raises SamsaOptionError for a subscribed or assigned topic that does not exist.
        """
        if self.kind == "subscribePattern":
            regex = re.compile(self.pattern)
            names = sorted(t for t in partitions_by_topic if regex.fullmatch(t))
            return [(t, p) for t in names for p in range(partitions_by_topic[t])]
        wanted = self.topics if self.kind == "subscribe" else tuple(t for t, _ in self.assigned)
        missing = sorted({t for t in wanted if t not in partitions_by_topic})
        if missing:
            raise SamsaOptionError(
                f"option {self.kind}: unknown topic {', '.join(missing)} "
                "(it does not exist on the brokers)"
            )
        if self.kind == "subscribe":
            return [(t, p) for t in self.topics for p in range(partitions_by_topic[t])]
        for t, p in self.assigned:
            if p >= partitions_by_topic[t]:
                raise SamsaOptionError(
                    f"option assign: topic {t} has {partitions_by_topic[t]} partitions, "
                    f"no partition {p}"
                )
        return list(self.assigned)


def _assign_json(assigned: tuple[tuple[str, int], ...]) -> str:
    by_topic: dict[str, list[int]] = {}
    for t, p in assigned:
        by_topic.setdefault(t, []).append(p)
    return json.dumps(by_topic)


def parse_subscription(options: Mapping[str, str]) -> Subscription:
    given = {
        name: get_option(options, name)
        for name in ("subscribe", "subscribePattern", "assign")
        if get_option(options, name) is not None
    }
    if len(given) != 1:
        raise SamsaOptionError(
            "exactly one of the options subscribe, subscribePattern or assign is required"
            + (f" (got {', '.join(sorted(given))})" if given else "")
        )
    ((kind, raw),) = given.items()
    assert raw is not None
    if kind == "subscribe":
        topics = tuple(t.strip() for t in raw.split(",") if t.strip())
        if not topics:
            raise SamsaOptionError("option subscribe: no topic given")
        return Subscription("subscribe", topics=topics)
    if kind == "subscribePattern":
        try:
            re.compile(raw)
        except re.error as e:
            raise SamsaOptionError(
                f"option subscribePattern: bad regular expression: {e}"
            ) from None
        return Subscription("subscribePattern", pattern=raw)
    parsed = _json_object("assign", raw, 'like {"topicA":[0,1],"topicB":[2,4]}')
    assigned: list[tuple[str, int]] = []
    for topic, parts in parsed.items():
        if not isinstance(parts, list) or not all(
            isinstance(p, int) and not isinstance(p, bool) and p >= 0 for p in parts
        ):
            raise SamsaOptionError(
                f"option assign: topic {topic} must map to a list of partition numbers"
            )
        assigned.extend((topic, p) for p in parts)
    if not assigned:
        raise SamsaOptionError("option assign: no partition given")
    return Subscription("assign", assigned=tuple(assigned))


def _json_object(option: str, raw: str, example: str) -> dict[str, Any]:
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as e:
        raise SamsaOptionError(
            f"option {option}: malformed JSON ({e.msg}), expected {example}"
        ) from None
    if not isinstance(value, dict):
        raise SamsaOptionError(f"option {option}: expected a JSON object {example}")
    return value


@dataclass(frozen=True)
class OffsetSpec:
    """Where reading starts or ends: earliest, latest, per-partition offsets, or a timestamp."""

    kind: Literal["earliest", "latest", "specific", "timestamp"]
    offsets: TopicPartitionOffsets = field(default_factory=dict)  # specific: -2/-1 allowed
    timestamp_ms: int = 0


def parse_offsets(
    options: Mapping[str, str], name: str, default: Literal["earliest", "latest"]
) -> OffsetSpec:
    raw = get_option(options, name)
    if raw is None:
        return OffsetSpec(default)
    text = raw.strip()
    if text.lower() in ("earliest", "latest"):
        return OffsetSpec(text.lower())  # type: ignore[arg-type]
    parsed = _json_object(
        name, text, '"earliest", "latest" or like {"topicA":{"0":23,"1":-2},"topicB":{"0":-1}}'
    )
    offsets: TopicPartitionOffsets = {}
    for topic, parts in parsed.items():
        if not isinstance(parts, dict):
            raise SamsaOptionError(
                f"option {name}: topic {topic} must map to an object of partition: offset"
            )
        for p, off in parts.items():
            if not str(p).isdigit():
                raise SamsaOptionError(f"option {name}: {topic} partition {p!r} is not a number")
            if not isinstance(off, int) or isinstance(off, bool) or off < EARLIEST:
                raise SamsaOptionError(
                    f"option {name}: {topic}/{p} offset {off!r} must be an integer "
                    "(-2 for earliest, -1 for latest)"
                )
            offsets.setdefault(topic, {})[int(p)] = off
    return OffsetSpec("specific", offsets=offsets)


@dataclass(frozen=True)
class SourceOptions:
    bootstrap: str
    subscription: Subscription
    starting: OffsetSpec
    ending: OffsetSpec | None  # batch only
    fail_on_data_loss: bool
    include_headers: bool
    min_partitions: int | None
    max_offsets_per_trigger: int | None
    by_timestamp_strategy: Literal["error", "latest"]
    poll_timeout_ms: int
    metadata_timeout_ms: int
    kafka: dict[str, str]
    # How executors read: Fetch decoded into Arrow columns, or librdkafka's consumer.
    reader: Literal["columnar", "librdkafka"] = "columnar"


def parse_source_options(options: Mapping[str, str], streaming: bool) -> SourceOptions:
    bootstrap = bootstrap_servers(options)
    subscription = parse_subscription(options)
    starting = parse_offsets(options, "startingOffsets", "latest" if streaming else "earliest")
    ts = _int(options, "startingTimestamp", None)
    if ts is not None:
        if get_option(options, "startingOffsets") is not None:
            raise SamsaOptionError(
                "options startingOffsets and startingTimestamp exclude each other"
            )
        starting = OffsetSpec("timestamp", timestamp_ms=ts)
    ending: OffsetSpec | None = None
    if streaming:
        for batch_only in ("endingOffsets", "endingTimestamp"):
            if get_option(options, batch_only) is not None:
                raise SamsaOptionError(f"option {batch_only} is for batch reads only")
    else:
        ending = parse_offsets(options, "endingOffsets", "latest")
        if ending.kind == "earliest":
            raise SamsaOptionError("option endingOffsets cannot be earliest")
        if any(o == EARLIEST for parts in ending.offsets.values() for o in parts.values()):
            raise SamsaOptionError("option endingOffsets: -2 (earliest) is not allowed")
        end_ts = _int(options, "endingTimestamp", None)
        if end_ts is not None:
            ending = OffsetSpec("timestamp", timestamp_ms=end_ts)
        if starting.kind == "latest":
            raise SamsaOptionError("option startingOffsets cannot be latest for a batch read")
        if any(o == LATEST for parts in starting.offsets.values() for o in parts.values()):
            raise SamsaOptionError(
                "option startingOffsets: -1 (latest) is not allowed in a batch read"
            )
    max_per_trigger = _int(options, "maxOffsetsPerTrigger", None, minimum=1)
    if max_per_trigger is not None and not streaming:
        raise SamsaOptionError("option maxOffsetsPerTrigger is for streaming reads only")
    strategy = (get_option(options, "startingOffsetsByTimestampStrategy") or "error").lower()
    if strategy not in ("error", "latest"):
        raise SamsaOptionError(
            f"option startingOffsetsByTimestampStrategy must be error or latest, not {strategy!r}"
        )
    kafka = kafka_params(options)
    for managed in ("group.id", "enable.auto.commit", "auto.offset.reset"):
        if managed in kafka:
            raise SamsaOptionError(
                f"option kafka.{managed} is not supported: the source manages offsets itself "
                "(Spark's checkpoint holds them)"
            )
    reader = (get_option(options, "reader") or "columnar").lower()
    if reader not in ("columnar", "librdkafka"):
        raise SamsaOptionError(f"option reader must be columnar or librdkafka, not {reader!r}")
    return SourceOptions(
        bootstrap=bootstrap,
        subscription=subscription,
        starting=starting,
        ending=ending,
        fail_on_data_loss=_bool(options, "failOnDataLoss", True),
        include_headers=_bool(options, "includeHeaders", False),
        min_partitions=_int(options, "minPartitions", None, minimum=1),
        max_offsets_per_trigger=max_per_trigger,
        by_timestamp_strategy=strategy,  # type: ignore[arg-type]
        poll_timeout_ms=_int(options, "kafkaConsumer.pollTimeoutMs", 120_000, minimum=1) or 120_000,
        metadata_timeout_ms=_int(options, "metadataTimeoutMs", 30_000, minimum=1) or 30_000,
        kafka=kafka,
        reader=reader,  # type: ignore[arg-type]
    )


@dataclass(frozen=True)
class SinkOptions:
    bootstrap: str
    topic: str | None
    commit_log_topic: str | None
    metadata_timeout_ms: int
    kafka: dict[str, str]
    writer: Literal["columnar", "librdkafka"] = "columnar"


def parse_sink_options(options: Mapping[str, str]) -> SinkOptions:
    topic = get_option(options, "topic")
    writer = (get_option(options, "writer") or "columnar").lower()
    if writer not in ("columnar", "librdkafka"):
        raise SamsaOptionError(f"option writer must be columnar or librdkafka, not {writer!r}")
    return SinkOptions(
        bootstrap=bootstrap_servers(options),
        topic=topic.strip() if topic else None,
        commit_log_topic=get_option(options, "commitLogTopic"),
        metadata_timeout_ms=_int(options, "metadataTimeoutMs", 30_000, minimum=1) or 30_000,
        kafka=kafka_params(options),
        writer=writer,  # type: ignore[arg-type]
    )
