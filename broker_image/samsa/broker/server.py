"""KafkaServer: builds a broker from its config and runs it until it is stopped."""

from __future__ import annotations

import asyncio
import logging
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from samsa.broker.coordinators import Coordinators
from samsa.broker.listeners import listener_plan
from samsa.broker.log_tasks import LogManagerTasks, start_log_cleaner
from samsa.broker.metrics import BrokerMetrics
from samsa.broker.properties import parse_listener
from samsa.broker.scheduler import KafkaScheduler
from samsa.config import KafkaConfig, LogConfig
from samsa.controller import StandaloneController
from samsa.coordinator.transaction import TRANSACTION_STATE_TOPIC_NAME
from samsa.handlers.apis import KafkaApis
from samsa.handlers.context import BrokerServices
from samsa.handlers.registry import default_apis
from samsa.handlers.topic_admin import transaction_state_topic_configs
from samsa.log import LogManager
from samsa.log.cleaner import LogCleaner
from samsa.metadata import (
    BrokerInfo,
    MetadataCache,
    MetadataStore,
    StandaloneMetadataStore,
    TopicPartition,
)
from samsa.metadata.standalone_metadata_store import (
    ensure_meta_properties,
    new_cluster_id,
    read_meta_properties,
)
from samsa.network import Connection, SocketServer
from samsa.protocol.schema_preload import warm_up
from samsa.quota.manager import QuotaManagers
from samsa.quota.store import QuotaFollower, QuotaStore, StandaloneQuotaStore, ZkQuotaStore
from samsa.replica import ReplicaManager
from samsa.replica.fetch_session import FetchSessionCache
from samsa.security.authorizer import Authorizer
from samsa.security.channels import inter_broker_security, listener_ssl_context
from samsa.security.sasl import SaslServer
from samsa.security.security_store import SecurityStore, StandaloneSecurityStore, ZkSecurityStore
from samsa.security.session import SASL_PROTOCOLS

if TYPE_CHECKING:
    # Imported where used: a standalone broker needs neither ZooKeeper (kazoo, the inter-broker
    # client, the controller) nor, without --http, aiohttp; they are most of its start-up.
    from samsa.broker.cluster import ClusterMembership
    from samsa.broker.http import HttpSidePort
    from samsa.client import ConnectionPool

log = logging.getLogger(__name__)


class _LateHandler:
    """Lets the socket bind (and learn its port) before the request handler exists; the
    socket accepts nothing until it does."""

    def __init__(self) -> None:
        self.target: KafkaApis | None = None

    def handle(self, frame: bytes | memoryview, conn: Connection) -> Any:
        assert self.target is not None
        return self.target.handle(frame, conn)


class KafkaServer:
    """One broker: socket server, handlers, replicas, logs, metadata, and the side port.

    Standalone (no zookeeper.connect): the metadata lives in the data directory and this broker
    leads every partition. ``start`` starts the parts in order; ``stop`` is the graceful shutdown.
    """

    def __init__(self, config: KafkaConfig, data_dir: Path) -> None:
        self.config = config
        self.data_dir = data_dir
        # Checked here, so a bad listener setting stops start-up with a message naming it.
        self.listeners = listener_plan(config)
        first = self.listeners.bind[0]
        self.host = first.host
        self.socket_servers: dict[str, SocketServer] = {}
        self.http: HttpSidePort | None = None
        self.log_manager: LogManager | None = None
        self.replica_manager: ReplicaManager | None = None
        self.store: MetadataStore | None = None
        self.cache: MetadataCache | None = None
        self.log_cleaner: LogCleaner | None = None
        self.metrics = BrokerMetrics(
            lambda: self.log_manager,
            lambda: self.log_cleaner,
            lambda: self.replica_manager,
            lambda: self.cluster.controller if self.cluster is not None else None,
            data_dir,
        )
        # The group and transaction coordinators and the producer ids; None until started.
        self.coordinators: Coordinators | None = None
        # What the handlers are given; None until started.
        self.services: BrokerServices | None = None
        self.cluster: ClusterMembership | None = None
        self.authorizer: Authorizer | None = None
        self.scheduler = KafkaScheduler()
        # The consumer lag metrics' connections to the other brokers (a cluster's only).
        self._lag_pool: ConnectionPool | None = None
        self._stopped = asyncio.Event()
        self._started = False
        self._stopping = False

    @property
    def socket_server(self) -> SocketServer | None:
        """The first listener's socket server (the one a standalone broker usually has)."""
        return self.socket_servers.get(self.listeners.bind[0].listener)

    @property
    def port(self) -> int:
        assert self.socket_server is not None
        return self.socket_server.port

    @property
    def bootstrap_servers(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def http_port(self) -> int | None:
        return self.http.port if self.http else None

    def dynamic_config(self) -> KafkaConfig:
        assert self.store is not None
        dynamic = self.store.broker_configs()
        return self.config.with_overrides(dynamic) if dynamic else self.config

    def log_config_for(self, topic: str) -> LogConfig:
        assert self.store is not None
        meta = self.store.topics().get(topic)
        config = self.dynamic_config()
        overrides = dict(meta.configs) if meta else {}
        if topic == "__consumer_offsets":
            overrides.setdefault("cleanup.policy", "compact")
            overrides.setdefault("segment.bytes", str(config["offsets.topic.segment.bytes"]))
        elif topic == TRANSACTION_STATE_TOPIC_NAME:
            for key, value in transaction_state_topic_configs(config).items():
                overrides.setdefault(key, value)
        return config.log_config(overrides)

    def _security_store(self) -> SecurityStore:
        if self.cluster is not None:
            return ZkSecurityStore(self.cluster.zk)
        return StandaloneSecurityStore(self.data_dir)

    async def _start_authorizer(self) -> None:
        self.authorizer = Authorizer.from_config(self.config, self._security_store())
        if self.authorizer is not None:
            await self.authorizer.start(refresh=self.cluster is not None)

    async def _follow_quotas(self, services: BrokerServices) -> None:
        """Client quotas: loaded before the first request is served, then kept current."""
        store: QuotaStore = (
            ZkQuotaStore(self.cluster.zk)
            if self.cluster is not None
            else StandaloneQuotaStore(self.data_dir)
        )
        services.quota_store = store
        services.quotas = QuotaManagers(
            self.config["quota.window.num"], self.config["quota.window.size.seconds"]
        )
        self.metrics.watch_quotas(services.quotas)
        self._quota_follower = QuotaFollower(store, services.quotas.update)
        await self._quota_follower.start()

    def _sasl_server(self) -> SaslServer:
        """SASL settings checked now, so a bad mechanism stops start-up with its key named."""
        sasl = SaslServer(self.config, self._security_store())
        for bind in self.listeners.bind:
            if self.listeners.protocol(bind.listener) in SASL_PROTOCOLS:
                sasl.mechanisms(bind.listener)
        return sasl

    @property
    def clustered(self) -> bool:
        return bool(self.config["zookeeper.connect"])

    async def start(self) -> None:
        """Bind the listeners, open the metadata (ZooKeeper or the data directory), load the
        logs, start the replica manager, the coordinators and the cleaner, then serve; a
        cluster member then registers and runs for controller."""
        started = time.monotonic()
        config = self.config
        self.data_dir.mkdir(parents=True, exist_ok=True)
        late = _LateHandler()
        broker = await self._bind_listeners(late)
        if self.clustered:
            cluster_id = await self._join_cluster(broker)
        else:
            cluster_id = await self._open_standalone(broker)
        assert self.store is not None
        self.cache = MetadataCache(config.broker_id, cluster_id)
        log_manager, replica_manager = self._start_log_and_replica_managers()
        coordinators = self.coordinators = Coordinators(
            config,
            self.dynamic_config,
            self.data_dir,
            self.store,
            self.cache,
            replica_manager,
            self.cluster,
            self._partition_exists,
        )
        if self.cluster is not None:
            self.cluster.attach(self.cache, replica_manager, self.dynamic_config)
            self.store.add_listener(self._on_cluster_metadata_change)
            coordinators.start_cluster_group_coordinator()
        else:
            controller = StandaloneController(
                self.store,
                self.cache,
                replica_manager,
                self.log_config_for,
                self._on_topic_deleted,
            )
            await controller.start()
            await coordinators.start_standalone_group_coordinator()
        self._watch_consumer_lag(coordinators)
        self.log_cleaner = start_log_cleaner(log_manager, self.dynamic_config(), replica_manager)
        coordinators.start_transaction_coordinator()
        if self.cluster is None:
            await coordinators.load_standalone_transactions()
        await self._start_authorizer()
        services = self.services = self._broker_services(broker, coordinators)
        await self._follow_quotas(services)
        late.target = KafkaApis(services, default_apis())
        for server in self.socket_servers.values():
            await server.serve()
        warm_up(asyncio.get_running_loop())
        if self.cluster is not None:
            await self.cluster.register()
            services.controller = await self.cluster.start_controller()
            self.scheduler.schedule(
                max(config["replica.lag.time.max.ms"] // 2, 10), self._shrink_isrs
            )
            self.scheduler.schedule(
                config["replica.high.watermark.checkpoint.interval.ms"],
                replica_manager.checkpoint_high_watermarks,
            )
        if config["http.listener"]:
            await self._start_http()
        LogManagerTasks(log_manager, self.dynamic_config, replica_manager.retention_ran).schedule(
            self.scheduler, config
        )
        self._started = True
        log.info(
            "broker %d (cluster %s%s) serving Kafka on %s:%d%s, %d partitions, started in %.0f ms",
            config.broker_id,
            cluster_id,
            f", ZooKeeper {config['zookeeper.connect']}" if self.clustered else ", standalone",
            self.host,
            self.port,
            f", HTTP on {self.http.host}:{self.http.port}" if self.http else "",
            len(log_manager.all_logs()),
            (time.monotonic() - started) * 1000,
        )

    async def _bind_listeners(self, handler: _LateHandler) -> BrokerInfo:
        """Bind every listener's socket (accepting nothing yet) and learn its port: this
        broker's registration, with each listener's advertised endpoint."""
        config = self.config
        endpoints = []
        for bind in self.listeners.bind:
            protocol = self.listeners.protocol(bind.listener)
            server = SocketServer(
                handler,
                bind.host,
                bind.port,
                max_request_size=config["socket.request.max.bytes"],
                name=bind.listener,
                on_connection_change=self.metrics.connections.inc,
                ssl_context=listener_ssl_context(config, bind.listener, protocol),
                security_protocol=protocol,
            )
            await server.start(serving=False)
            self.socket_servers[bind.listener] = server
            endpoints.append(self.listeners.advertised_for(bind.listener, server.port))
        inter = next(e for e in endpoints if e.listener == self.listeners.inter_broker)
        return BrokerInfo(
            config.broker_id, inter.host, inter.port, config["broker.rack"], tuple(endpoints)
        )

    async def _open_standalone(self, broker: BrokerInfo) -> str:
        """Standalone: the cluster id and the metadata store are the data directory's."""
        cluster_id = ensure_meta_properties(
            self.data_dir, self.config.broker_id, self.config["cluster.id"]
        )
        self.store = StandaloneMetadataStore(self.data_dir, broker, cluster_id)
        await self.store.start()
        return cluster_id

    async def _join_cluster(self, broker: BrokerInfo) -> str:
        """Connect to ZooKeeper (retrying until it answers), agree on the cluster id with it
        and with meta.properties, and open the ZooKeeper metadata store."""
        from samsa.broker.cluster import ClusterMembership
        from samsa.metadata.zk_metadata_store import ZkMetadataStore

        inter = self.listeners.inter_broker
        self.cluster = ClusterMembership(
            self.config,
            broker,
            inter,
            inter_broker_security(self.config, inter, self.listeners.protocol(inter)),
        )
        await self.cluster.connect()
        recorded = read_meta_properties(self.data_dir).get("cluster.id")
        proposed = recorded or self.config["cluster.id"] or new_cluster_id()
        cluster_id = await self.cluster.zk.get_or_create_cluster_id(proposed)
        if recorded and recorded != cluster_id:
            raise ValueError(
                f"the data directory belongs to cluster {recorded}, but ZooKeeper at "
                f"{self.config['zookeeper.connect']} holds cluster {cluster_id}"
            )
        ensure_meta_properties(self.data_dir, self.config.broker_id, cluster_id)
        store = ZkMetadataStore(self.cluster.zk, broker, cluster_id)
        await store.start()
        self.store = store
        return cluster_id

    def _on_cluster_metadata_change(self, names: set[str]) -> None:
        """Topic configs changed in ZooKeeper: new log configs, and the cache's copy."""
        assert self.store is not None and self.cache is not None
        assert self.replica_manager is not None
        topics = self.store.topics()
        for name in names or set(topics):
            meta = topics.get(name)
            if meta is None:
                continue
            self.cache.update_configs(name, dict(meta.configs))
            self.replica_manager.update_log_config(name, self.log_config_for(name))

    def _start_log_and_replica_managers(self) -> tuple[LogManager, ReplicaManager]:
        """The logs in the data directory, loaded with their topics' configs, and the replica
        manager over them, its callbacks wired to the metrics and the metadata."""
        assert self.store is not None
        config = self.config
        topic_configs = {name: self.log_config_for(name) for name in self.store.topics()}
        self.log_manager = LogManager(self.data_dir, self.dynamic_config().log_config())
        self.log_manager.load_logs(topic_configs)
        self.replica_manager = ReplicaManager(
            config.broker_id, self.log_manager, self.log_config_for
        )
        self.replica_manager.on_append = self._on_append
        self.replica_manager.on_isr_change = self.metrics.on_isr_change
        self.replica_manager.partition_known = lambda tp: self._partition_exists(*tp)
        self.replica_manager.broker_alive = self._broker_alive
        self.replica_manager.stages.sink = self.metrics.on_stage
        return self.log_manager, self.replica_manager

    def _broker_services(self, broker: BrokerInfo, coordinators: Coordinators) -> BrokerServices:
        """What the request handlers (KafkaApis) are given: the broker's parts, its settings
        and the callbacks of its metrics."""
        config = self.config
        assert self.cache is not None and self.store is not None
        assert self.replica_manager is not None
        return BrokerServices(
            config=config,
            broker=broker,
            cache=self.cache,
            store=self.store,
            replica_manager=self.replica_manager,
            dynamic_config=self.dynamic_config,
            log_config_for=self.log_config_for,
            on_request=self.metrics.on_request,
            on_fetch=self.metrics.on_fetch,
            group_coordinator=coordinators.group_coordinator,
            transaction_coordinator=coordinators.transaction_coordinator,
            verify_transaction=coordinators.transaction_verifier().verify,
            on_topic_deleted=self._on_topic_deleted,
            inter_broker_listener=self.listeners.inter_broker,
            producer_id_manager=coordinators.producer_id_manager,
            sasl=self._sasl_server(),
            authorizer=self.authorizer,
            fetch_sessions=FetchSessionCache(config["max.incremental.fetch.session.cache.slots"]),
        )

    async def _start_http(self) -> None:
        """The side port: /healthz, /readyz and /metrics."""
        from samsa.broker.http import HttpSidePort

        _, http_host, http_port = parse_listener(self.config["http.listener"])
        self.http = HttpSidePort(
            http_host,
            http_port,
            self.metrics.registry,
            self._ready,
            self._alive,
            self.metrics.before_scrape,
        )
        await self.http.start()

    def _watch_consumer_lag(self, coordinators: Coordinators) -> None:
        """The lag of the groups coordinated here, on /metrics; in a cluster through
        connections of its own to the partitions' leaders."""
        from samsa.broker.consumer_lag import ConsumerLag

        if self.cluster is not None:
            from samsa.client import ConnectionPool

            self._lag_pool = ConnectionPool(
                self.cluster.address_of,
                client_id=f"broker-{self.config.broker_id}-consumer-lag",
                security=self.cluster.security,
            )
        pool = self._lag_pool
        self.metrics.watch_consumer_lag(
            ConsumerLag(
                lambda: coordinators.group_coordinator,
                lambda: self.replica_manager,
                lambda: self.cache,
                lambda: pool,
            )
        )

    def _shrink_isrs(self) -> None:
        assert self.replica_manager is not None
        self.replica_manager.shrink_isrs(self.dynamic_config()["replica.lag.time.max.ms"])

    def _partition_exists(self, topic: str, partition: int) -> bool:
        assert self.cache is not None
        meta = self.cache.topic(topic)
        return meta is not None and partition in meta.assignment

    def _broker_alive(self, broker_id: int) -> bool:
        assert self.cache is not None
        return self.cache.broker(broker_id) is not None

    def _on_topic_deleted(self, name: str, partitions: list[int]) -> None:
        self.metrics.forget_topic(name)
        if self.coordinators is not None:
            self.coordinators.on_partitions_deleted(name, partitions)

    def _on_append(self, tp: TopicPartition, messages: int, size: int) -> None:
        self.metrics.on_append(tp.topic, messages, size)

    def _ready(self) -> tuple[bool, str]:
        if not self._started or self._stopping:
            return False, "starting" if not self._stopping else "stopping"
        assert self.replica_manager is not None
        if self.cluster is not None:
            return self._cluster_ready()
        lagging = [
            str(p.tp)
            for p in self.replica_manager.partitions.values()
            if p.is_leader and len(p.isr) < len(p.replicas)
        ]
        if lagging:
            return False, f"under-replicated: {', '.join(lagging[:10])}"
        return True, "ready"

    def _cluster_ready(self) -> tuple[bool, str]:
        """Ready once registered, told the cluster's state by a controller, and in the ISR of
        every partition it hosts: only then may another broker restart without loss."""
        assert self.cluster is not None and self.cache is not None
        if not self.cluster.registered:
            return False, "not registered in ZooKeeper"
        if self.cache.controller_id < 0:
            return False, "no metadata from a controller yet"
        me = self.config.broker_id
        if (
            self.cache.brokers_updated_at <= self.cluster.registered_at
            or self.cache.broker(me) is None
        ):
            # What we know predates our (re-)registration: wait for the controller's view of it.
            return False, "no metadata from the controller since this broker registered"
        lagging = []
        for topic in self.cache.topics():
            for p, state in self.cache.partition_states(topic.name).items():
                if me in state.replicas and me not in state.isr:
                    lagging.append(f"{topic.name}-{p}")
        if lagging:
            return False, f"not in the ISR of: {', '.join(lagging[:10])}"
        return True, "ready"

    def _alive(self) -> tuple[bool, str]:
        return (not self._stopping or self._started), "ok"

    async def stop(self) -> None:
        """Graceful shutdown: stop taking requests, then close the logs cleanly."""
        if self._stopping:
            await self._stopped.wait()
            return
        self._stopping = True
        if self.cluster is not None and self._started:
            try:
                await self.cluster.controlled_shutdown()
            except Exception:
                log.exception("controlled shutdown failed; stopping anyway")
        if self.authorizer is not None:
            await self.authorizer.stop()
        await self.scheduler.shutdown()
        if self.log_cleaner is not None:
            await self.log_cleaner.shutdown()
        if self.cluster is not None:
            # Leaving ZooKeeper deregisters this broker: the controller moves what is left.
            await self.cluster.close()
        for server in self.socket_servers.values():
            await server.stop()
        if self.coordinators is not None:
            await self.coordinators.shutdown()
        if self.replica_manager is not None:
            if self.cluster is not None:
                try:
                    self.replica_manager.checkpoint_high_watermarks()
                except OSError as exc:  # a full disk: the logs must still be closed
                    log.error("high watermarks not checkpointed at shutdown: %s", exc)
            self.replica_manager.shutdown()
        if self.log_manager is not None:
            self.log_manager.shutdown()
        if self.store is not None:
            await self.store.close()
        if self.http is not None:
            await self.http.stop()
        if self._lag_pool is not None:
            await self._lag_pool.close()
        self._stopped.set()
        log.info("broker %d stopped", self.config.broker_id)
