"""Topic administration shared by CreateTopics, auto-creation, CreatePartitions and configs."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterable, Mapping
from datetime import timedelta
from typing import Any

from samsa.config import TOPIC_CONFIG, ConfigError, LogConfig
from samsa.config.topic import BROKER_SYNONYMS
from samsa.coordinator import GROUP_METADATA_TOPIC_NAME
from samsa.coordinator.transaction import TRANSACTION_STATE_TOPIC_NAME
from samsa.handlers.context import BrokerServices
from samsa.metadata import TopicMetadata, validate_topic_name
from samsa.metadata.assignment import assign_replicas
from samsa.metadata.names import is_internal
from samsa.protocol.errors import ErrorCode, KafkaApiError

MAX_PARTITIONS = 100_000


def duplicated(keys: Iterable[Any]) -> set[Any]:
    """The keys named more than once: Kafka refuses each of them with INVALID_REQUEST."""
    seen: set[Any] = set()
    twice: set[Any] = set()
    for key in keys:
        (twice if key in seen else seen).add(key)
    return twice


def validate_configs(services: BrokerServices, configs: Mapping[str, str | None]) -> dict[str, str]:
    """Topic overrides as strings, checked against Kafka's topic keys; INVALID_CONFIG if not."""
    clean: dict[str, str] = {}
    for name, value in configs.items():
        if value is None:
            raise KafkaApiError(ErrorCode.invalid_config, f"Null value not supported for {name}")
        clean[name] = value
    try:
        LogConfig.from_props(clean, services.dynamic_config().topic_defaults())
    except ConfigError as exc:
        raise KafkaApiError(ErrorCode.invalid_config, f"Invalid config {exc}") from None
    return clean


def plan_topic(
    services: BrokerServices,
    name: str,
    num_partitions: int,
    replication_factor: int,
    assignments: Mapping[int, list[int]] | None,
    configs: Mapping[str, str | None],
) -> tuple[dict[int, list[int]], dict[str, str]]:
    """The replica assignment and configs of a new topic, or KafkaApiError saying why not."""
    reason = validate_topic_name(name)
    if reason is not None:
        raise KafkaApiError(ErrorCode.invalid_topic_exception, reason)
    if services.cache.topic(name) is not None or name in services.store.topics():
        raise KafkaApiError(ErrorCode.topic_already_exists, f"Topic '{name}' already exists.")
    clean = validate_configs(services, configs)
    brokers = services.cache.brokers()
    live = {b.id for b in brokers}
    if assignments:
        if num_partitions != -1 or replication_factor != -1:
            raise KafkaApiError(
                ErrorCode.invalid_request,
                "Both numPartitions or replicationFactor and replicasAssignments were set. "
                "Both cannot be used at the same time.",
            )
        plan = {int(p): list(r) for p, r in assignments.items()}
        if sorted(plan) != list(range(len(plan))):
            raise KafkaApiError(
                ErrorCode.invalid_replica_assignment,
                "Partitions should be a consecutive 0-based integer sequence",
            )
        sizes = {len(r) for r in plan.values()}
        if len(sizes) != 1 or 0 in sizes:
            raise KafkaApiError(
                ErrorCode.invalid_replica_assignment,
                "All partitions should have the same number of replicas",
            )
        for p, replicas in plan.items():
            if len(set(replicas)) != len(replicas):
                raise KafkaApiError(
                    ErrorCode.invalid_replica_assignment,
                    f"Duplicate brokers not allowed in replica assignment: {replicas} "
                    f"for partition id {p}.",
                )
            unknown = [r for r in replicas if r not in live]
            if unknown:
                raise KafkaApiError(
                    ErrorCode.broker_not_available,
                    f"Unknown broker(s) {unknown} in the replica assignment of partition {p}",
                )
        return plan, clean
    config = services.dynamic_config()
    partitions = config["num.partitions"] if num_partitions == -1 else num_partitions
    rf = config["default.replication.factor"] if replication_factor == -1 else replication_factor
    if partitions <= 0 or partitions > MAX_PARTITIONS:
        raise KafkaApiError(
            ErrorCode.invalid_partitions,
            "Number of partitions must be larger than 0."
            if partitions <= 0
            else f"Number of partitions must be at most {MAX_PARTITIONS}.",
        )
    if rf <= 0:
        raise KafkaApiError(
            ErrorCode.invalid_replication_factor, "Replication factor must be larger than 0."
        )
    if rf > len(brokers):
        raise KafkaApiError(
            ErrorCode.invalid_replication_factor,
            f"Replication factor: {rf} larger than available brokers: {len(brokers)}.",
        )
    return assign_replicas(brokers, partitions, rf), clean


async def create_topic(
    services: BrokerServices,
    name: str,
    assignment: dict[int, list[int]],
    configs: dict[str, str],
) -> TopicMetadata:
    return await services.store.create_topic(name, assignment, configs)


async def answer_when_led(
    services: BrokerServices,
    results: list[dict[str, Any]],
    partitions: Mapping[str, Iterable[int]],
    wait: timedelta,
) -> None:
    """Hold a CreateTopics or CreatePartitions answer until this broker's metadata has a
    leader for every new partition, as Kafka does (DelayedCreatePartitions), so that a client
    may ask this broker for the topic's metadata at once. The topics still lacking a leader
    when ``wait`` (the request's timeout) runs out get REQUEST_TIMED_OUT (they exist all the
    same); a timeout of 0 answers at once."""
    if not partitions or wait.total_seconds() <= 0:
        return
    wanted = {name: list(ps) for name, ps in partitions.items()}

    def leaderless() -> set[str]:
        return {
            name
            for name, ps in wanted.items()
            if any(
                (state := services.cache.partition_state(name, p)) is None or state.leader < 0
                for p in ps
            )
        }

    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(wait.total_seconds()):
            await services.cache.wait_for(lambda: not leaderless())
    missing = leaderless()
    for entry in results:
        if entry["name"] in missing:
            entry["error_code"] = ErrorCode.request_timed_out


async def auto_create_topic(services: BrokerServices, name: str) -> TopicMetadata | None:
    """Create a topic on first use with the broker's defaults (auto.create.topics.enable)."""
    config = services.dynamic_config()
    rf = min(config["default.replication.factor"], len(services.cache.brokers()))
    try:
        plan, clean = plan_topic(services, name, config["num.partitions"], max(rf, 1), None, {})
    except KafkaApiError as exc:
        if exc.code == ErrorCode.topic_already_exists:
            return services.cache.topic(name)
        raise
    return await create_topic(services, name, plan, clean)


async def ensure_offsets_topic(services: BrokerServices) -> None:
    """Create __consumer_offsets on first use, as Kafka does: offsets.topic.num.partitions
    partitions, offsets.topic.replication.factor replicas, compacted.  Refused (the client
    retries) while fewer brokers are alive than the replication factor asks."""
    config = services.dynamic_config()
    rf = config["offsets.topic.replication.factor"]
    live = len(services.cache.brokers())
    if live < rf:
        raise KafkaApiError(
            ErrorCode.coordinator_not_available,
            f"Number of alive brokers '{live}' does not meet the required replication factor "
            f"'{rf}' for the offsets topic (configured via 'offsets.topic.replication.factor').",
        )
    name = GROUP_METADATA_TOPIC_NAME
    if name in services.store.topics():
        return
    configs = {
        "cleanup.policy": "compact",
        "segment.bytes": str(config["offsets.topic.segment.bytes"]),
    }
    plan = assign_replicas(services.cache.brokers(), config["offsets.topic.num.partitions"], rf)
    with contextlib.suppress(Exception):
        await create_topic(services, name, plan, configs)


async def ensure_transaction_state_topic(services: BrokerServices) -> None:
    """Create __transaction_state on first use, as Kafka does: compacted, with
    transaction.state.log.num.partitions partitions, .replication.factor replicas and
    min.insync.replicas of .min.isr.  Refused (the client retries) while fewer brokers are alive
    than the replication factor asks."""
    config = services.dynamic_config()
    rf = config["transaction.state.log.replication.factor"]
    configs = transaction_state_topic_configs(config)
    if not services.config["zookeeper.connect"]:
        # Standalone: one broker holds everything.
        rf = 1
        configs["min.insync.replicas"] = "1"
    live = len(services.cache.brokers())
    if live < rf:
        raise KafkaApiError(
            ErrorCode.coordinator_not_available,
            f"Number of alive brokers '{live}' does not meet the required replication factor "
            f"'{rf}' for the transactions state topic (configured via "
            "'transaction.state.log.replication.factor').",
        )
    name = TRANSACTION_STATE_TOPIC_NAME
    if name in services.store.topics():
        return
    plan = assign_replicas(
        services.cache.brokers(), config["transaction.state.log.num.partitions"], rf
    )
    with contextlib.suppress(Exception):
        await create_topic(services, name, plan, configs)


def transaction_state_topic_configs(config: Any) -> dict[str, str]:
    """The topic configs Kafka gives __transaction_state."""
    return {
        "cleanup.policy": "compact",
        "min.insync.replicas": str(config["transaction.state.log.min.isr"]),
        "segment.bytes": str(config["transaction.state.log.segment.bytes"]),
        "unclean.leader.election.enable": "false",
    }


def topic_config_entries(services: BrokerServices, topic: TopicMetadata) -> list[dict[str, object]]:
    """Every topic key with value, source and read-only flag, for DescribeConfigs/CreateTopics."""
    defaults = services.dynamic_config().topic_defaults()
    effective = LogConfig.from_props(topic.configs, defaults).to_props()
    default_layer, own = services.store.broker_config_layers()
    entries: list[dict[str, object]] = []
    for name, key in TOPIC_CONFIG.keys.items():
        value = effective[name]
        # As Kafka: the source is the most specific place that sets the value, the topic's
        # own override, else its broker synonym set dynamically (for this broker, or for
        # the cluster) or in the properties file.
        synonym = BROKER_SYNONYMS.get(name)
        if name in topic.configs:
            source = DYNAMIC_TOPIC_CONFIG
        elif synonym in own:
            source = DYNAMIC_BROKER_CONFIG
        elif synonym in default_layer:
            source = DYNAMIC_DEFAULT_BROKER_CONFIG
        elif synonym in services.config.originals:
            source = STATIC_BROKER_CONFIG
        else:
            source = DEFAULT_CONFIG
        entries.append(
            {
                "name": name,
                "value": key.render(value),
                "read_only": False,
                "config_source": source,
                "is_default": source == DEFAULT_CONFIG,
                "is_sensitive": False,
                "config_type": _CONFIG_TYPES.get(key.type, 0),
                "documentation": key.doc or None,
            }
        )
    return entries


# DescribeConfigs config_source values.
DYNAMIC_TOPIC_CONFIG = 1
DYNAMIC_BROKER_CONFIG = 2
DYNAMIC_DEFAULT_BROKER_CONFIG = 3
STATIC_BROKER_CONFIG = 4
DEFAULT_CONFIG = 5

# DescribeConfigs config_type values.
_CONFIG_TYPES = {
    "boolean": 1,
    "string": 2,
    "int": 3,
    "short": 4,
    "long": 5,
    "double": 6,
    "list": 7,
    "class": 8,
    "password": 9,
}


def internal(name: str) -> bool:
    return is_internal(name)
