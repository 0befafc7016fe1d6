"""What handlers are given: the broker's services, and each request's context."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from samsa.config import KafkaConfig, LogConfig
from samsa.coordinator import GroupCoordinator, ProducerIdManager
from samsa.coordinator.transaction import TransactionCoordinator
from samsa.metadata import BrokerInfo, MetadataCache, MetadataStore
from samsa.protocol.messages import RequestHeader
from samsa.quota.manager import QuotaManagers
from samsa.replica import ReplicaManager

if TYPE_CHECKING:
    from samsa.controller import KafkaController
    from samsa.handlers.txn_verification import VerifyTransaction
    from samsa.quota.store import QuotaStore
    from samsa.replica import FetchPartitionRequest
    from samsa.replica.fetch_session import FetchSessionCache
    from samsa.security.authorizer import Authorizer
    from samsa.security.sasl import SaslServer


class ClientConnection(Protocol):
    peer: str
    # The listener the connection came in on: clients are told that listener's addresses.
    listener: str

    def mute_for(self, ms: int) -> None:
        """Read no more requests from this client for ``ms`` (a quota's throttle, KIP-219)."""


@dataclass
class BrokerServices:
    """The broker's components a handler may use; the broker layer fills it in."""

    config: KafkaConfig
    broker: BrokerInfo
    cache: MetadataCache
    store: MetadataStore
    replica_manager: ReplicaManager
    # Effective broker config (static plus dynamic); topic log configs are derived from it.
    dynamic_config: Callable[[], KafkaConfig]
    log_config_for: Callable[[str], LogConfig]
    on_request: Callable[[str, float], None] = field(default=lambda api, seconds: None)
    # Consumer groups; None until the broker has started it.
    group_coordinator: GroupCoordinator | None = None
    # Transactions (transactional ids in __transaction_state); None until started.
    transaction_coordinator: TransactionCoordinator | None = None
    # Asks a transactional id's coordinator which partitions are in its transaction (KIP-890
    # verification of a transaction's first Produce to a partition); None: not verified.
    verify_transaction: VerifyTransaction | None = None
    # Producer ids for InitProducerId; None until the broker has started it.
    producer_id_manager: ProducerIdManager | None = None
    # Bytes and messages sent to fetchers, per topic.
    on_fetch: Callable[[str, int, int], None] = field(default=lambda topic, n, size: None)
    # Followers' fetch sessions (KIP-227); None: every fetch is full.
    fetch_sessions: FetchSessionCache[FetchPartitionRequest] | None = None
    # The dispatch table (API key -> Api), for ApiVersions; set by KafkaApis.
    api_table: dict[int, Any] = field(default_factory=dict)
    # Cluster mode: this broker's controller (active or not); None standalone.
    controller: KafkaController | None = None
    # SASL mechanisms and credentials; None when no listener uses SASL.
    sasl: SaslServer | None = None
    # authorizer.class.name's ACL authorizer; None: everything is allowed.
    authorizer: Authorizer | None = None
    # The listener brokers use among themselves (inter.broker.listener.name).
    inter_broker_listener: str = "PLAINTEXT"
    # Client quotas: their sensors, fed from the quota configs, and where those are stored
    # (None: DescribeClientQuotas and AlterClientQuotas are not served).
    quotas: QuotaManagers = field(default_factory=QuotaManagers)
    quota_store: QuotaStore | None = None
    # A topic's deletion reached this broker: (name, partitions).
    on_topic_deleted: Callable[[str, list[int]], None] = field(
        default=lambda name, partitions: None
    )


@dataclass(slots=True)
class RequestContext:
    header: RequestHeader
    conn: ClientConnection
    # time.perf_counter() when the request was taken up.
    started: float = 0.0
    # The request's size in bytes (what a producer's quota counts).
    size: int = 0
    # Seconds an awaited handler spent on the event loop before it first waited; None until
    # then, and unset with no quota configured (what request_percentage counts).
    on_loop: float | None = None
    # The request metrics' name when it is not the API's: Kafka counts a Fetch as
    # FetchConsumer or FetchFollower.
    metric_name: str = ""

    @property
    def version(self) -> int:
        return self.header.api_version
