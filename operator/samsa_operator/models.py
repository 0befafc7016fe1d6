"""The KafkaCluster and Topic resources: their specs and statuses as pydantic models.

These models are the single source of the CRD schemas (`crds.py` renders them) and of the
operator's own validation, so a spec the schema lets through is checked again here, with a
message that names the field.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from pydantic.alias_generators import to_camel

GROUP = "kafka.samsa.dev"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"

# Broker properties the operator derives from the cluster's shape; a user setting them would
# break the brokers' identity or their reachability.
OPERATOR_OWNED_KEYS = (
    "broker.id",
    "broker.rack",
    "listeners",
    "advertised.listeners",
    "listener.security.protocol.map",
    "inter.broker.listener.name",
    "zookeeper.connect",
    "log.dirs",
    "log.dir",
    "http.listener",
)

QUANTITY_PATTERN = r"^[0-9]+(\.[0-9]+)?(m|k|Ki|Mi|Gi|Ti|Pi|Ei|M|G|T|P|E)?$"
_QUANTITY = re.compile(QUANTITY_PATTERN)

Quantity = Annotated[str, Field(pattern=QUANTITY_PATTERN)]
ConfigValue = str | int | float | bool


class Model(BaseModel):
    """camelCase on the wire (Kubernetes style), snake_case in Python; unknown fields refused."""

    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True
    )


class StatusModel(BaseModel):
    """Status is written by the operator: fields it no longer knows are ignored, not refused."""

    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="ignore", frozen=True
    )


class Storage(Model):
    size: Quantity = Field("10Gi", description="Size of each persistent volume claim.")
    storage_class: str | None = Field(None, description="StorageClass of the claims.")
    delete_claim: bool = Field(
        False, description="Delete the claims when the cluster is deleted or scaled down."
    )


class ZooKeeperStorage(Storage):
    size: Quantity = Field("5Gi", description="Size of each persistent volume claim.")


class ResourceRequirements(Model):
    requests: dict[str, Quantity] = Field(default_factory=dict)
    limits: dict[str, Quantity] = Field(default_factory=dict)


class Brokers(Model):
    replicas: int = Field(3, ge=1, le=1000, description="Number of brokers (pod ordinal = id).")
    image: str | None = Field(None, description="Broker image; the operator's default if unset.")
    resources: ResourceRequirements = Field(default_factory=lambda: ResourceRequirements())
    storage: Storage = Field(default_factory=lambda: Storage())
    termination_grace_period_seconds: int = Field(
        120, ge=10, description="Time a broker gets for its controlled shutdown."
    )


class ZooKeeper(Model):
    replicas: int = Field(3, ge=1, le=9, description="ZooKeeper servers (odd numbers keep quorum).")
    image: str = Field("zookeeper:3.9", description="The official ZooKeeper image.")
    resources: ResourceRequirements = Field(default_factory=lambda: ResourceRequirements())
    storage: ZooKeeperStorage = Field(default_factory=lambda: ZooKeeperStorage())
    connect: str | None = Field(
        None,
        description="An external ZooKeeper (host:port,...[/chroot]); no ZooKeeper is deployed.",
    )


class ExternalListener(Model):
    type: Literal["NodePort", "LoadBalancer"] = Field(
        description="How clients outside Kubernetes reach each broker."
    )
    port: int = Field(9094, ge=1, le=65535, description="Port of the LoadBalancer services.")
    node_port_base: int | None = Field(
        None,
        ge=30000,
        le=32767,
        description="NodePort of broker 0; broker N gets nodePortBase + N.",
    )
    advertised_host_template: str = Field(
        description="Address each broker advertises to external clients; {id} is its broker id."
    )


class Listeners(Model):
    internal_port: int = Field(9092, ge=1, le=65535, description="Port inside Kubernetes.")
    external: ExternalListener | None = None


class Rack(Model):
    topology_key: str = Field(
        "topology.kubernetes.io/zone",
        description="Node label whose value becomes each broker's broker.rack.",
    )


class PodTemplate(Model):
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)
    affinity: dict[str, Any] | None = None
    tolerations: list[dict[str, Any]] = Field(default_factory=list)
    priority_class_name: str | None = None
    security_context: dict[str, Any] | None = Field(
        None, description="Pod securityContext fields, merged over the operator's defaults."
    )


class Metrics(Model):
    enabled: bool = Field(True, description="Advertise /metrics for Prometheus scraping.")


class Operations(Model):
    reassignment_throttle_bytes_per_second: int = Field(
        50 * 1024 * 1024,
        ge=0,
        description="Replication rate of each broker for replicas being moved by a scale-up, "
        "drain or replication-factor change (follower.replication.throttled.rate); 0: none.",
    )
    leader_imbalance_percentage: int = Field(
        10,
        ge=0,
        le=100,
        description="Preferred-leader election runs when a broker leads fewer than this "
        "share of the partitions it is preferred leader of.",
    )


class KafkaClusterSpec(Model):
    brokers: Brokers = Field(default_factory=lambda: Brokers())
    config: dict[str, ConfigValue] = Field(
        default_factory=dict, description="Broker properties, by Kafka's names."
    )
    zookeeper: ZooKeeper = Field(default_factory=lambda: ZooKeeper())
    listeners: Listeners = Field(default_factory=lambda: Listeners())
    rack: Rack | None = None
    pod_template: PodTemplate = Field(default_factory=lambda: PodTemplate())
    metrics: Metrics = Field(default_factory=lambda: Metrics())
    operations: Operations = Field(default_factory=lambda: Operations())

    @field_validator("config")
    @classmethod
    def _no_operator_owned_keys(cls, value: dict[str, ConfigValue]) -> dict[str, ConfigValue]:
        owned = sorted(set(value) & set(OPERATOR_OWNED_KEYS))
        if owned:
            raise ValueError(f"{', '.join(owned)} is set by the operator and cannot be configured")
        return value


class TopicSpec(Model):
    cluster_ref: str = Field(min_length=1, description="Name of the KafkaCluster (same namespace).")
    topic_name: str | None = Field(
        None,
        min_length=1,
        max_length=249,
        pattern=r"^[a-zA-Z0-9._-]+$",
        description="Name of the Kafka topic; metadata.name if unset. Immutable.",
    )
    partitions: int = Field(1, ge=1, le=100_000)
    replication_factor: int = Field(3, ge=1, le=1000)
    config: dict[str, ConfigValue] = Field(
        default_factory=dict, description="Topic configs, by Kafka's names."
    )


class Condition(StatusModel):
    type: str
    status: Literal["True", "False", "Unknown"]
    reason: str = ""
    message: str = ""
    last_transition_time: str | None = None
    observed_generation: int | None = None


class BootstrapServers(Model):
    internal: str | None = None
    external: str | None = None


class BrokerStatus(Model):
    id: int
    pod: str
    ready: bool = False
    rack: str | None = None
    config_hash: str | None = Field(None, description="Hash of this broker's properties.")
    running_config_hash: str | None = Field(
        None, description="configHash of the properties this broker was last seen running."
    )


class ZooKeeperStatus(Model):
    ready: bool = False
    ready_replicas: int = 0
    replicas: int = 0
    connect: str | None = None


class RollStatus(StatusModel):
    phase: str | None = None
    message: str | None = None
    started_at: str | None = None
    finished_at: str | None = None
    pending: list[int] = Field(default_factory=list, description="Brokers still to restart.")
    restarted: list[int] = Field(default_factory=list, description="Brokers restarted so far.")
    reasons: dict[str, str] = Field(default_factory=dict, description="Why, by broker id.")
    elections: int = Field(0, description="Preferred-leader elections run since the last restart.")


class ScalingStatus(StatusModel):
    phase: str | None = None
    message: str | None = None
    started_at: str | None = None
    finished_at: str | None = None
    from_replicas: int | None = None
    to_replicas: int | None = None
    remaining: int | None = Field(None, description="Partitions still to move.")
    elections: int = Field(0, description="Preferred-leader elections run after the moves.")


class ThrottleStatus(StatusModel):
    rate: int = 0
    brokers: list[int] = Field(default_factory=list)


class KafkaClusterStatus(StatusModel):
    conditions: list[Condition] = Field(default_factory=list)
    observed_generation: int | None = None
    bootstrap_servers: BootstrapServers | None = None
    replicas: int | None = None
    ready_brokers: int | None = None
    brokers: list[BrokerStatus] = Field(default_factory=list)
    zookeeper: ZooKeeperStatus | None = None
    controller_id: int | None = None
    cluster_id: str | None = None
    roll: RollStatus | None = Field(None, description="The rolling restart in progress.")
    last_roll: RollStatus | None = None
    scaling: ScalingStatus | None = Field(
        None, description="The scale-up rebalance or scale-down drain in progress."
    )
    last_scaling: ScalingStatus | None = None
    throttle: ThrottleStatus | None = Field(
        None, description="The replication throttle set while partitions move."
    )


class ReassignmentStatus(StatusModel):
    replication_factor: int | None = None
    remaining: int | None = None
    started_at: str | None = None


class TopicStatus(StatusModel):
    conditions: list[Condition] = Field(default_factory=list)
    observed_generation: int | None = None
    topic_name: str | None = None
    topic_id: str | None = None
    partitions: int | None = None
    replication_factor: int | None = None
    reassignment: ReassignmentStatus | None = Field(
        None, description="The replication-factor change in progress."
    )


Kind = Literal["KafkaCluster", "Topic"]
SPEC_MODELS: dict[str, type[Model]] = {"KafkaCluster": KafkaClusterSpec, "Topic": TopicSpec}
STATUS_MODELS: dict[str, type[BaseModel]] = {
    "KafkaCluster": KafkaClusterStatus,
    "Topic": TopicStatus,
}


M = TypeVar("M", bound=Model)


class SpecError(ValueError):
    """A spec the operator refuses; the message names the field."""


def parse_spec(model: type[M], spec: dict[str, Any] | None) -> M:
    """Validate a resource's spec; a SpecError names the first offending field."""
    try:
        return model.model_validate(spec or {})
    except ValidationError as exc:
        raise SpecError(describe_errors(exc)) from None


def describe_errors(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors():
        loc = "spec." + ".".join(str(p) for p in err["loc"]) if err["loc"] else "spec"
        msg = err["msg"].removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            msg = "unknown field"
        parts.append(f"{loc}: {msg}")
    return "; ".join(parts)


def quantity_is_valid(text: str) -> bool:
    return bool(_QUANTITY.match(text))
