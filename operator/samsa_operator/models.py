"""The KafkaCluster and Topic resources: their specs and statuses as pydantic models.

These models are the single source of the CRD schemas (`crds.py` renders them) and of the
operator's own validation, so a spec the schema lets through is checked again here, with a
message that names the field.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal, TypeVar

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)
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
    # Security: rendered from spec.listeners, spec.authorization and the operator's PKI.
    "ssl.keystore.type",
    "ssl.keystore.location",
    "ssl.truststore.type",
    "ssl.truststore.location",
    "sasl.enabled.mechanisms",
    "authorizer.class.name",
    "super.users",
)
# Prefixes of broker properties the operator owns too (per-listener security settings).
OPERATOR_OWNED_PREFIXES = ("listener.name.",)
# The mutual-TLS listener of the brokers and the operator (inter-broker when asked).
REPLICATION_PORT = 9091
RESERVED_LISTENER_NAMES = ("plaintext", "internal", "external", "replication")

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
    storage_class: str | None = Field(
        None,
        description="StorageClass of the claims: unset, the cluster's default class; "
        '"", no class (only volumes made beforehand bind).',
    )
    delete_claim: bool = Field(
        False, description="Delete the claims when the cluster is deleted or scaled down."
    )


class ZooKeeperStorage(Storage):
    size: Quantity = Field("5Gi", description="Size of each persistent volume claim.")


class ResourceRequirements(Model):
    requests: dict[str, Quantity] = Field(default_factory=dict)
    limits: dict[str, Quantity] = Field(default_factory=dict)


class DisruptionBudget(Model):
    max_unavailable: int = Field(
        1,
        ge=0,
        description="Pods a voluntary disruption (an eviction, `kubectl drain`) may take down "
        "at once; 0 refuses every eviction, for drains handled by hand or by a tool.",
    )


class Brokers(Model):
    replicas: int = Field(3, ge=1, le=1000, description="Number of brokers (pod ordinal = id).")
    image: str | None = Field(None, description="Broker image; the operator's default if unset.")
    resources: ResourceRequirements = Field(default_factory=lambda: ResourceRequirements())
    storage: Storage = Field(default_factory=lambda: Storage())
    termination_grace_period_seconds: int = Field(
        120, ge=10, description="Time a broker gets for its controlled shutdown."
    )
    pod_disruption_budget: DisruptionBudget = Field(
        default_factory=lambda: DisruptionBudget(),
        description="The brokers' PodDisruptionBudget.",
    )


class ZooKeeper(Model):
    replicas: int = Field(3, ge=1, le=9, description="ZooKeeper servers (odd numbers keep quorum).")
    image: str = Field("zookeeper:3.9", description="The official ZooKeeper image.")
    resources: ResourceRequirements = Field(default_factory=lambda: ResourceRequirements())
    storage: ZooKeeperStorage = Field(default_factory=lambda: ZooKeeperStorage())
    pod_disruption_budget: DisruptionBudget = Field(
        default_factory=lambda: DisruptionBudget(),
        description="The ZooKeeper servers' PodDisruptionBudget.",
    )
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

    def address(self, broker_id: int) -> tuple[str, int]:
        """The host and port broker `broker_id` advertises on this listener."""
        host = self.advertised_host_template.replace("{id}", str(broker_id))
        if self.type == "NodePort":
            assert self.node_port_base is not None  # the schema and the validator require it
            return host, self.node_port_base + broker_id
        return host, self.port

    @model_validator(mode="after")
    def _node_port_needs_its_base(self) -> ExternalListener:
        if self.type == "NodePort" and self.node_port_base is None:
            raise ValueError("a NodePort external listener needs nodePortBase")
        return self


class CertificateSecret(Model):
    """A certificate of your own and its key (from cert-manager, or your company's or a
    public CA), in a Secret of the cluster's namespace."""

    secret_name: str = Field(min_length=1, description="The Secret that holds it.")
    certificate: str = Field(
        "tls.crt", min_length=1, description="Its key for the certificate (and chain), PEM."
    )
    key: str = Field("tls.key", min_length=1, description="Its key for the private key, PEM.")


class ClientListener(Model):
    name: str = Field(
        pattern=r"^[a-z][a-z0-9]{0,15}$",
        description="Listener name (lower case; the broker's listener is its upper case).",
    )
    port: int = Field(ge=1, le=65535, description="Port inside Kubernetes.")
    type: Literal["plain", "tls"] = Field("tls", description="plain or TLS-encrypted.")
    authentication: Literal["none", "scram-sha-512", "tls"] = Field(
        "none",
        description="How clients authenticate: none, SCRAM-SHA-512 (SASL) or a client "
        "certificate from the clients CA (tls, which needs type tls).",
    )
    certificate: CertificateSecret | None = Field(
        None,
        description="The certificate every broker serves on this TLS listener, instead of "
        "one from the cluster CA; it must name the addresses clients use.",
    )
    external: ExternalListener | None = Field(
        None,
        description="Serve this listener to clients outside Kubernetes: each broker advertises "
        "its external address on it (in the brokers' certificates for type tls), reached "
        "through a Service of this type per broker.",
    )

    @property
    def security_protocol(self) -> str:
        tls = self.type == "tls"
        if self.authentication == "scram-sha-512":
            return "SASL_SSL" if tls else "SASL_PLAINTEXT"
        return "SSL" if tls else "PLAINTEXT"


class Listeners(Model):
    internal_port: int = Field(
        9092, ge=1, le=65535, description="Port of the plain listener inside Kubernetes."
    )
    plain: bool = Field(
        True,
        description="false: no plain listener at all (internalPort unused); clients use "
        "listeners.clients, brokers replicate over TLS (needs interBroker: tls).",
    )
    external: ExternalListener | None = Field(
        None, description="A plain listener for clients outside Kubernetes."
    )
    clients: list[ClientListener] = Field(
        default_factory=list,
        max_length=8,
        description="More listeners, each with its encryption and authentication.",
    )
    inter_broker: Literal["plain", "tls"] = Field(
        "plain",
        description="tls: brokers replicate over the mutual-TLS replication listener "
        f"(port {REPLICATION_PORT}) with their certificates from the cluster CA.",
    )

    @model_validator(mode="after")
    def _listeners_fit_together(self) -> Listeners:
        taken = {
            self.internal_port: "internalPort",
            REPLICATION_PORT: "the replication listener",
            9644: "the HTTP listener",
        }
        if self.external is not None:
            taken[self.internal_port + 2] = "the external listener"
        if not self.plain:
            del taken[self.internal_port]
            if self.inter_broker != "tls":
                raise ValueError("plain: false needs interBroker: tls")
            if self.external is not None:
                raise ValueError("plain: false leaves no plain listener for external")
            if not self.clients:
                raise ValueError("plain: false needs a listener in clients")
        names: set[str] = set()
        for i, listener in enumerate(self.clients):
            where = f"clients[{i}] ({listener.name})"
            if listener.authentication == "tls" and listener.type != "tls":
                raise ValueError(f"{where}: authentication tls needs type tls")
            if listener.certificate is not None and listener.type != "tls":
                raise ValueError(f"{where}: a certificate needs type tls")
            if listener.name in RESERVED_LISTENER_NAMES or listener.name in names:
                raise ValueError(f"{where}: the name is taken")
            if listener.port in taken:
                owner = taken[listener.port]
                raise ValueError(f"{where}: port {listener.port} is taken by {owner}")
            names.add(listener.name)
            taken[listener.port] = where
        return self


class Authorization(Model):
    type: Literal["simple"] = Field(
        "simple", description="simple: Kafka's ACL authorizer, with ACLs from KafkaUsers."
    )
    super_users: list[str] = Field(
        default_factory=list,
        description="More principals allowed everything (User:name); the brokers and the "
        "operator always are.",
    )


class Certificates(Model):
    validity_days: int = Field(
        365, ge=2, le=3650, description="Validity of the CAs and the certificates issued."
    )
    cluster_ca: CertificateSecret | None = Field(
        None,
        description="A CA of your own (cert-manager's CA Issuer Secret, a company CA) that "
        "signs the brokers' and the operator's certificates instead of one the operator makes; "
        "you renew it. A new key in the Secret is rolled out without a moment of distrust.",
    )
    clients_ca: CertificateSecret | None = Field(
        None,
        description="A CA of your own that signs the TLS KafkaUsers' certificates.",
    )
    renewal_days: int = Field(
        30, ge=1, description="Certificates are renewed this many days before they expire."
    )

    @model_validator(mode="after")
    def _renewal_within_validity(self) -> Certificates:
        if self.renewal_days >= self.validity_days:
            raise ValueError("renewalDays must be less than validityDays")
        return self


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
    node_selector: dict[str, str] = Field(
        default_factory=dict, description="Nodes the pods may run on, by their labels."
    )
    topology_spread_constraints: list[dict[str, Any]] = Field(
        default_factory=list,
        description="How the pods spread over zones or nodes (Kubernetes' own field).",
    )
    image_pull_secrets: list[str] = Field(
        default_factory=list, description="Secrets of a private registry the images come from."
    )
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
    authorization: Authorization | None = Field(
        None, description="Turns on ACL authorization; off when unset."
    )
    certificates: Certificates = Field(default_factory=lambda: Certificates())
    rack: Rack | None = None
    pod_template: PodTemplate = Field(default_factory=lambda: PodTemplate())
    metrics: Metrics = Field(default_factory=lambda: Metrics())
    operations: Operations = Field(default_factory=lambda: Operations())

    @field_validator("config")
    @classmethod
    def _no_operator_owned_keys(cls, value: dict[str, ConfigValue]) -> dict[str, ConfigValue]:
        owned = sorted(
            k for k in value if k in OPERATOR_OWNED_KEYS or k.startswith(OPERATOR_OWNED_PREFIXES)
        )
        if owned:
            raise ValueError(f"{', '.join(owned)} is set by the operator and cannot be configured")
        return value

    @model_validator(mode="after")
    def _authorization_needs_secured_brokers(self) -> KafkaClusterSpec:
        if self.authorization is not None and self.listeners.inter_broker != "tls":
            raise ValueError(
                "authorization needs listeners.interBroker: tls (brokers on a plain listener "
                "are User:ANONYMOUS, which may not replicate)"
            )
        return self

    @property
    def secured(self) -> bool:
        """True when the cluster needs its PKI: a TLS or authenticated listener, TLS between
        brokers or authorization (the operator then talks mutual TLS to the brokers)."""
        listeners = self.listeners
        return (
            self.authorization is not None
            or listeners.inter_broker == "tls"
            or any(c.security_protocol != "PLAINTEXT" for c in listeners.clients)
        )


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


class UserAuthentication(Model):
    type: Literal["scram-sha-512", "tls"] = Field(
        description="scram-sha-512: a generated password; tls: a client certificate from the "
        "clients CA. Either goes into a Secret named after the KafkaUser."
    )


AclOperation = Literal[
    "All",
    "Read",
    "Write",
    "Create",
    "Delete",
    "Alter",
    "Describe",
    "ClusterAction",
    "DescribeConfigs",
    "AlterConfigs",
    "IdempotentWrite",
]


class AclResource(Model):
    type: Literal["topic", "group", "cluster", "transactionalId"]
    name: str = Field(
        "*", min_length=1, description="Resource name ('*': every one); unused for cluster."
    )
    pattern_type: Literal["literal", "prefix"] = Field(
        "literal", description="prefix: every resource whose name starts with name."
    )


class AclRule(Model):
    resource: AclResource
    operations: list[AclOperation] = Field(min_length=1)
    host: str = Field("*", min_length=1)
    type: Literal["allow", "deny"] = "allow"


class UserAuthorization(Model):
    type: Literal["simple"] = "simple"
    acls: list[AclRule] = Field(default_factory=list, max_length=256)


class UserQuotas(Model):
    """Kafka's client quotas of the user entity (Strimzi's names); an unset one is removed."""

    producer_byte_rate: int | None = Field(
        None, ge=0, description="Bytes per second the user may produce, per broker."
    )
    consumer_byte_rate: int | None = Field(
        None, ge=0, description="Bytes per second the user may fetch, per broker."
    )
    request_percentage: int | None = Field(
        None,
        ge=0,
        description="Percent of one request handler thread's time the user may take, per broker.",
    )
    controller_mutation_rate: float | None = Field(
        None,
        ge=0,
        description="Partitions per second the user may create or delete (topics and partitions).",
    )


class KafkaUserSpec(Model):
    cluster_ref: str = Field(min_length=1, description="Name of the KafkaCluster (same namespace).")
    authentication: UserAuthentication
    authorization: UserAuthorization | None = Field(
        None, description="The user's ACLs, kept equal to this list."
    )
    quotas: UserQuotas | None = Field(
        None,
        description="The user's client quotas in the cluster, kept equal to these; none if unset.",
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
    listeners: dict[str, str] = Field(
        default_factory=dict, description="Bootstrap address of each of spec.listeners.clients."
    )


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


class ClaimStatus(StatusModel):
    claim: str | None = None
    requested: str | None = None
    capacity: str | None = None
    phase: str | None = Field(
        None,
        description="Resized, Resizing, ShrinkRefused, NotExpandable, or Pending (not bound).",
    )


class StorageStatus(StatusModel):
    brokers: list[ClaimStatus] = Field(default_factory=list)
    zookeeper: list[ClaimStatus] = Field(default_factory=list)


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
    storage: StorageStatus | None = Field(
        None, description="Each persistent volume claim: its request, capacity and resize."
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


class KafkaUserStatus(StatusModel):
    conditions: list[Condition] = Field(default_factory=list)
    observed_generation: int | None = None
    username: str | None = Field(None, description="The user's Kafka principal.")
    secret: str | None = Field(None, description="The Secret with the user's credentials.")
    credentials: str | None = Field(
        None, description="Fingerprint of the credentials last set in the cluster."
    )
    acls: int | None = Field(None, description="ACLs in place.")
    quotas: dict[str, float] | None = Field(
        None, description="Client quotas in place, by Kafka's names."
    )


Kind = Literal["KafkaCluster", "Topic", "KafkaUser"]
SPEC_MODELS: dict[str, type[Model]] = {
    "KafkaCluster": KafkaClusterSpec,
    "Topic": TopicSpec,
    "KafkaUser": KafkaUserSpec,
}
STATUS_MODELS: dict[str, type[BaseModel]] = {
    "KafkaCluster": KafkaClusterStatus,
    "Topic": TopicStatus,
    "KafkaUser": KafkaUserStatus,
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
