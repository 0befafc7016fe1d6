"""Config resources shared by DescribeConfigs, AlterConfigs and IncrementalAlterConfigs."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from samsa.config.kafka import BROKER_CONFIG
from samsa.config.topic import BROKER_SYNONYMS
from samsa.handlers.authorization import cluster_allowed, group_allowed, topic_allowed
from samsa.handlers.context import BrokerServices, RequestContext
from samsa.handlers.topic_admin import (
    _CONFIG_TYPES,
    DEFAULT_CONFIG,
    DYNAMIC_BROKER_CONFIG,
    DYNAMIC_DEFAULT_BROKER_CONFIG,
    STATIC_BROKER_CONFIG,
    topic_config_entries,
    validate_configs,
)
from samsa.metadata import TopicMetadata
from samsa.protocol.errors import ErrorCode, KafkaApiError
from samsa.security.acl import AclOperation

TOPIC = 2
BROKER = 4
BROKER_LOGGER = 8
GROUP = 32


def authorize(
    services: BrokerServices, ctx: RequestContext, resource_type: int, name: str, op: AclOperation
) -> None:
    """Kafka's check before a config resource is described (DESCRIBE_CONFIGS) or altered
    (ALTER_CONFIGS): on the topic, the group, or for broker resources the cluster; a refusal
    is that resource type's authorization error."""
    if resource_type == TOPIC and not topic_allowed(services, ctx, op, name):
        raise KafkaApiError(ErrorCode.topic_authorization_failed, None)
    if resource_type in (BROKER, BROKER_LOGGER) and not cluster_allowed(services, ctx, op):
        raise KafkaApiError(ErrorCode.cluster_authorization_failed, None)
    if resource_type == GROUP and not group_allowed(services, ctx, op, name):
        raise KafkaApiError(ErrorCode.group_authorization_failed, None)


def topic_of(services: BrokerServices, name: str) -> TopicMetadata:
    topic = services.cache.topic(name)
    if topic is None:
        raise KafkaApiError(ErrorCode.unknown_topic_or_partition, f"Topic '{name}' does not exist.")
    return topic


async def described_topic(services: BrokerServices, name: str) -> TopicMetadata:
    """The topic with its overrides read from the store of record, so that a describe or an
    incremental alter on one broker sees what another broker altered a moment ago."""
    topic = topic_of(services, name)
    return dataclasses.replace(topic, configs=await services.store.topic_configs(name))


def check_broker(services: BrokerServices, name: str) -> bool:
    """Whether the broker resource is the cluster-wide default (an empty name), rather than
    this broker; any other broker's id is refused, as Kafka does."""
    if name not in ("", str(services.broker.id)):
        raise KafkaApiError(
            ErrorCode.invalid_request,
            f"Unexpected broker id, expected {services.broker.id} "
            f"or empty string, but received {name}",
        )
    return name == ""


def broker_config_entries(
    services: BrokerServices, cluster_default: bool = False
) -> list[dict[str, Any]]:
    """Each broker config with its value and source; of the cluster-wide default resource,
    leaving out what is set for this broker alone."""
    default_layer, own = services.store.broker_config_layers()
    if cluster_default:
        own = {}
    static = services.config.originals
    entries = []
    for name, key in BROKER_CONFIG.keys.items():
        if name in own:
            source, value = DYNAMIC_BROKER_CONFIG, key.parse(own[name])
        elif name in default_layer:
            source, value = DYNAMIC_DEFAULT_BROKER_CONFIG, key.parse(default_layer[name])
        elif name in static:
            source, value = STATIC_BROKER_CONFIG, static[name]
        else:
            source, value = DEFAULT_CONFIG, key.default
        entries.append(
            {
                "name": name,
                "value": None if key.sensitive else key.render(value),
                "read_only": key.read_only,
                "config_source": source,
                "is_default": source == DEFAULT_CONFIG,
                "is_sensitive": key.sensitive,
                "config_type": _CONFIG_TYPES.get(key.type, 0),
                "documentation": key.doc or None,
            }
        )
    return entries


async def describe(services: BrokerServices, resource_type: int, name: str) -> list[dict[str, Any]]:
    if resource_type == TOPIC:
        return topic_config_entries(services, await described_topic(services, name))
    if resource_type == BROKER:
        return broker_config_entries(services, check_broker(services, name))
    raise KafkaApiError(ErrorCode.invalid_request, f"Unsupported resource type {resource_type}")


def validate_broker_configs(configs: Mapping[str, str | None]) -> dict[str, str]:
    clean: dict[str, str] = {}
    for name, value in configs.items():
        key = BROKER_CONFIG.keys.get(name)
        if key is None:
            raise KafkaApiError(ErrorCode.invalid_config, f"Unknown broker config {name}")
        if key.read_only:
            raise KafkaApiError(
                ErrorCode.invalid_request,
                f"Cannot update these configs dynamically: {{{name}}}",
            )
        if value is None:
            continue
        try:
            key.parse(value)
        except ValueError as exc:
            # Kafka 4 refuses a broker config's bad value as a bad request, where a topic's
            # gets INVALID_CONFIG.
            raise KafkaApiError(ErrorCode.invalid_request, f"Invalid config {exc}") from None
        clean[name] = value
    return clean


async def replace(
    services: BrokerServices,
    resource_type: int,
    name: str,
    configs: Mapping[str, str | None],
    validate_only: bool,
) -> None:
    """Set the resource's overrides to exactly these (AlterConfigs semantics)."""
    if resource_type == TOPIC:
        topic_of(services, name)
        clean = validate_configs(services, configs)
        if not validate_only:
            await services.store.set_topic_configs(name, clean)
        return
    if resource_type == BROKER:
        cluster_default = check_broker(services, name)
        clean = validate_broker_configs(configs)
        if not validate_only:
            await services.store.set_broker_configs(clean, cluster_default)
        return
    raise KafkaApiError(ErrorCode.invalid_request, f"Unsupported resource type {resource_type}")


async def current_overrides(
    services: BrokerServices, resource_type: int, name: str
) -> dict[str, str]:
    if resource_type == TOPIC:
        return dict((await described_topic(services, name)).configs)
    if resource_type == BROKER:
        default_layer, own = services.store.broker_config_layers()
        return default_layer if check_broker(services, name) else own
    raise KafkaApiError(ErrorCode.invalid_request, f"Unsupported resource type {resource_type}")


def synonyms(services: BrokerServices, resource_type: int, name: str) -> list[dict[str, Any]]:
    """Where a value comes from, most specific first (Kafka's DescribeConfigs synonyms)."""
    default_layer, own = services.store.broker_config_layers()
    static = services.config.originals
    out: list[dict[str, Any]] = []
    broker_key = name
    if resource_type == TOPIC:
        broker_key = BROKER_SYNONYMS.get(name, "")
    key = BROKER_CONFIG.keys.get(broker_key)
    if key is None:
        return out
    for layer, source in (
        (own, DYNAMIC_BROKER_CONFIG),
        (default_layer, DYNAMIC_DEFAULT_BROKER_CONFIG),
    ):
        if broker_key in layer:
            out.append({"name": broker_key, "value": layer[broker_key], "source": source})
    if broker_key in static:
        out.append(
            {
                "name": broker_key,
                "value": key.render(static[broker_key]),
                "source": STATIC_BROKER_CONFIG,
            }
        )
    default = services.config.topic_defaults().get(name) if resource_type == TOPIC else None
    out.append(
        {
            "name": broker_key,
            "value": key.render(default if default is not None else key.default),
            "source": DEFAULT_CONFIG,
        }
    )
    return out


def resource_error(exc: KafkaApiError) -> dict[str, Any]:
    return {"error_code": exc.code, "error_message": exc.message}
