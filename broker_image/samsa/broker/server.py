"""KafkaServer: builds a broker from its config and runs it until it is stopped."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from samsa import faults
from samsa.broker.listeners import listener_plan
from samsa.broker.metrics import BrokerMetrics
from samsa.broker.properties import parse_listener
from samsa.config import KafkaConfig, LogConfig
from samsa.controller import StandaloneController
from samsa.coordinator import (
    GROUP_METADATA_TOPIC_NAME,
    AsyncioClock,
    GroupCoordinator,
    GroupCoordinatorConfig,
    ProducerIdManager,
)
from samsa.coordinator.log_group_store import LogGroupStore, replay
from samsa.coordinator.transaction import (
    TRANSACTION_STATE_TOPIC_NAME,
    TransactionConfig,
    TransactionCoordinator,
)
from samsa.handlers.apis import KafkaApis
from samsa.handlers.context import BrokerServices
from samsa.handlers.registry import default_apis
from samsa.handlers.topic_admin import transaction_state_topic_configs
from samsa.log import LogManager
from samsa.log.cleaner import CleanerConfig, LogCleaner
from samsa.log.errors import out_of_space
from samsa.metadata import (
    BrokerInfo,
    MetadataCache,
    MetadataStore,
    StandaloneMetadataStore,
    TopicPartition,
)
from samsa.metadata.producer_ids import (
    LocalProducerIdBlockStore,
    ProducerIdBlockStore,
    ZkProducerIdBlockStore,
)
from samsa.metadata.standalone_metadata_store import (
    ensure_meta_properties,
    new_cluster_id,
    read_meta_properties,
)
from samsa.network import Connection, SocketServer
from samsa.protocol.schema_preload import warm_up
from samsa.replica import Partition, ReplicaManager
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
    leads every partition.
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
        )
        self.group_coordinator: GroupCoordinator | None = None
        self.transaction_coordinator: TransactionCoordinator | None = None
        # What the handlers are given; None until started.
        self.services: BrokerServices | None = None
        self._marker_pool: Any = None
        self.cluster: ClusterMembership | None = None
        self.producer_id_manager: ProducerIdManager | None = None
        self.authorizer: Authorizer | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._stopped = asyncio.Event()
        self._background: set[asyncio.Task[int]] = set()
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
        started = time.monotonic()
        config = self.config
        self.data_dir.mkdir(parents=True, exist_ok=True)
        late = _LateHandler()
        endpoints = []
        for bind in self.listeners.bind:
            protocol = self.listeners.protocol(bind.listener)
            server = SocketServer(
                late,
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
        broker = BrokerInfo(
            config.broker_id, inter.host, inter.port, config["broker.rack"], tuple(endpoints)
        )
        if self.clustered:
            cluster_id = await self._join_cluster(broker)
        else:
            cluster_id = ensure_meta_properties(
                self.data_dir, config.broker_id, config["cluster.id"]
            )
            self.store = StandaloneMetadataStore(self.data_dir, broker, cluster_id)
            await self.store.start()
        assert self.store is not None
        self.cache = MetadataCache(config.broker_id, cluster_id)
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
        if self.cluster is not None:
            self.cluster.attach(self.cache, self.replica_manager, self.dynamic_config)
            self.store.add_listener(self._on_cluster_metadata_change)
            self.group_coordinator = self._cluster_group_coordinator()
        else:
            controller = StandaloneController(
                self.store,
                self.cache,
                self.replica_manager,
                self.log_config_for,
                self._on_topic_deleted,
            )
            await controller.start()
            self.group_coordinator = await self._start_group_coordinator()
        self.log_cleaner = self._start_log_cleaner()
        self.producer_id_manager = ProducerIdManager(config.broker_id, self._producer_id_blocks())
        self.producer_id_manager.start()
        self.transaction_coordinator = self._transaction_coordinator()
        self.replica_manager.on_txn_marker = self._on_txn_marker
        # Started before the standalone loads: a transaction found prepared completes at once.
        self.transaction_coordinator.start()
        if self.cluster is None:
            await self._start_standalone_transactions()
        await self._start_authorizer()
        services = BrokerServices(
            config=config,
            broker=broker,
            cache=self.cache,
            store=self.store,
            replica_manager=self.replica_manager,
            dynamic_config=self.dynamic_config,
            log_config_for=self.log_config_for,
            on_request=self.metrics.on_request,
            on_fetch=self.metrics.on_fetch,
            group_coordinator=self.group_coordinator,
            transaction_coordinator=self.transaction_coordinator,
            verify_transaction=self._transaction_verifier().verify,
            on_topic_deleted=self._on_topic_deleted,
            inter_broker_listener=self.listeners.inter_broker,
            producer_id_manager=self.producer_id_manager,
            sasl=self._sasl_server(),
            authorizer=self.authorizer,
            fetch_sessions=FetchSessionCache(config["max.incremental.fetch.session.cache.slots"]),
        )
        self.services = services
        late.target = KafkaApis(services, default_apis())
        for server in self.socket_servers.values():
            await server.serve()
        warm_up(asyncio.get_running_loop())
        if self.cluster is not None:
            await self.cluster.register()
            services.controller = await self.cluster.start_controller()
            self._schedule(max(config["replica.lag.time.max.ms"] // 2, 10), self._shrink_isrs)
            self._schedule(
                config["replica.high.watermark.checkpoint.interval.ms"],
                self.replica_manager.checkpoint_high_watermarks,
            )
        if config["http.listener"]:
            from samsa.broker.http import HttpSidePort

            _, http_host, http_port = parse_listener(config["http.listener"])
            self.http = HttpSidePort(
                http_host, http_port, self.metrics.registry, self._ready, self._alive
            )
            await self.http.start()
        self._schedule(config["log.retention.check.interval.ms"], self._retention)
        self._schedule(config["log.flush.offset.checkpoint.interval.ms"], self._checkpoint)
        self._schedule(config["producer.id.expiration.check.interval.ms"], self._expire_producers)
        flush_interval = config["log.flush.scheduler.interval.ms"]
        if flush_interval < 2**62:
            self._schedule(flush_interval, self._flush)
        self._started = True
        log.info(
            "broker %d (cluster %s%s) serving Kafka on %s:%d%s, %d partitions, started in %.0f ms",
            config.broker_id,
            cluster_id,
            f", ZooKeeper {config['zookeeper.connect']}" if self.clustered else ", standalone",
            self.host,
            self.port,
            f", HTTP on {self.http.host}:{self.http.port}" if self.http else "",
            len(self.log_manager.all_logs()),
            (time.monotonic() - started) * 1000,
        )

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

    def _producer_id_blocks(self) -> ProducerIdBlockStore:
        """Producer ids must be unique across a cluster's brokers: ZooKeeper hands out the
        blocks there; standalone, the data directory records them."""
        if self.cluster is not None:
            return ZkProducerIdBlockStore(self.cluster.zk)
        return LocalProducerIdBlockStore(self.data_dir)

    def _cluster_group_coordinator(self) -> GroupCoordinator:
        """In a cluster this broker coordinates the groups of the __consumer_offsets partitions
        it leads: loaded when it becomes their leader, dropped when it stops being it."""
        assert self.replica_manager is not None
        config = self.dynamic_config()
        coordinator = GroupCoordinator(
            GroupCoordinatorConfig.from_properties(config.values),
            LogGroupStore(self.replica_manager, config["request.timeout.ms"] / 1000),
            clock=AsyncioClock(),
            partition_exists=self._partition_exists,
        )
        coordinator.start()
        self.replica_manager.on_leader = self._on_leader
        self.replica_manager.on_follower = self._on_follower
        return coordinator

    def _on_leader(self, partition: Partition) -> None:
        assert self.replica_manager is not None
        rm, p = self.replica_manager, partition.tp.partition
        if partition.tp.topic == TRANSACTION_STATE_TOPIC_NAME:
            if self.transaction_coordinator is not None:
                # Kafka's coordinator epoch is the partition's leader epoch: markers from an
                # older coordinator of the same id are then fenced on the partitions.
                self._spawn(
                    self.transaction_coordinator.load_partition(
                        p, partition.leader_epoch, replay(rm, p, TRANSACTION_STATE_TOPIC_NAME)
                    )
                )
            return
        if partition.tp.topic != GROUP_METADATA_TOPIC_NAME or self.group_coordinator is None:
            return
        coordinator = self.group_coordinator
        self._spawn(coordinator.load_partition(p, replay(rm, p, transactional=True)))

    def _on_follower(self, partition: Partition) -> None:
        if partition.tp.topic == TRANSACTION_STATE_TOPIC_NAME:
            if self.transaction_coordinator is not None:
                self.transaction_coordinator.unload_partition(partition.tp.partition)
            return
        if partition.tp.topic == GROUP_METADATA_TOPIC_NAME and self.group_coordinator is not None:
            self.group_coordinator.unload_partition(partition.tp.partition)

    def _on_txn_marker(self, tp: TopicPartition, producer_id: int, committed: bool) -> None:
        if self.group_coordinator is not None:
            self.group_coordinator.on_txn_marker(tp.partition, producer_id, committed)

    def _transaction_coordinator(self) -> TransactionCoordinator:
        """Transactions: the ids of the __transaction_state partitions this broker leads;
        markers go to the partitions' leaders through the inter-broker connections."""
        from samsa.broker.txn_markers import BrokerMarkerWriter

        assert self.replica_manager is not None and self.cache is not None
        assert self.producer_id_manager is not None
        config = self.dynamic_config()
        partitions = config["transaction.state.log.num.partitions"]
        existing = self.store.topics().get(TRANSACTION_STATE_TOPIC_NAME) if self.store else None
        if existing is not None:
            partitions = existing.partition_count
        if self.cluster is not None:
            from samsa.client import ConnectionPool

            self._marker_pool = ConnectionPool(
                self.cluster.address_of,
                client_id=f"broker-{config.broker_id}-txn-markers",
                security=self.cluster.security,
            )
        pool = self._marker_pool
        return TransactionCoordinator(
            TransactionConfig.from_properties(
                {**config.values, "transaction.state.log.num.partitions": partitions}
            ),
            LogGroupStore(
                self.replica_manager,
                config["request.timeout.ms"] / 1000,
                topic=TRANSACTION_STATE_TOPIC_NAME,
            ),
            self.producer_id_manager.generate_producer_id,
            BrokerMarkerWriter(config.broker_id, self.cache, self.replica_manager, lambda: pool),
            clock=AsyncioClock(),
        )

    def _transaction_verifier(self) -> Any:
        """KIP-890's check of a transaction's first batch on a partition, with the id's
        coordinator: this broker's own, or over the transaction markers' connections."""
        from samsa.broker.txn_verifier import BrokerTransactionVerifier

        assert self.cache is not None
        return BrokerTransactionVerifier(
            self.dynamic_config().broker_id,
            self.cache,
            lambda: self.transaction_coordinator,
            lambda: self._marker_pool,
            lambda: self.dynamic_config()["request.timeout.ms"] / 1000,
        )

    async def _start_standalone_transactions(self) -> None:
        """Standalone, __transaction_state is created on first use, as in a cluster (with one
        replica: there is no other broker); partitions it already has are loaded now."""
        assert self.store is not None and self.replica_manager is not None
        assert self.transaction_coordinator is not None
        rm = self.replica_manager
        rm.on_leader = self._on_leader
        rm.on_follower = self._on_follower
        meta = self.store.topics().get(TRANSACTION_STATE_TOPIC_NAME)
        for p in range(meta.partition_count if meta is not None else 0):
            partition = rm.get_partition(TopicPartition(TRANSACTION_STATE_TOPIC_NAME, p))
            if partition is not None and partition.is_leader:
                await self.transaction_coordinator.load_partition(
                    p, partition.leader_epoch, replay(rm, p, TRANSACTION_STATE_TOPIC_NAME)
                )

    def _spawn(self, coro: Any) -> None:
        task = asyncio.ensure_future(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    def _shrink_isrs(self) -> None:
        assert self.replica_manager is not None
        self.replica_manager.shrink_isrs(self.dynamic_config()["replica.lag.time.max.ms"])

    async def _start_group_coordinator(self) -> GroupCoordinator:
        """Consumer groups: __consumer_offsets (created on first start), replayed, then served.

        Standalone, the topic's replication factor is this one broker, whatever
        offsets.topic.replication.factor says: there is no other broker to place a replica on.
        """
        assert self.store is not None and self.replica_manager is not None
        config = self.dynamic_config()
        partitions = config["offsets.topic.num.partitions"]
        if GROUP_METADATA_TOPIC_NAME not in self.store.topics():
            me = config.broker_id
            await self.store.create_topic(
                GROUP_METADATA_TOPIC_NAME, {p: [me] for p in range(partitions)}, {}
            )
        else:
            partitions = self.store.topics()[GROUP_METADATA_TOPIC_NAME].partition_count
        coordinator = GroupCoordinator(
            GroupCoordinatorConfig.from_properties(
                {**config.values, "offsets.topic.num.partitions": partitions}
            ),
            LogGroupStore(self.replica_manager),
            clock=AsyncioClock(),
            partition_exists=self._partition_exists,
        )
        for p in range(partitions):
            await coordinator.load_partition(p, replay(self.replica_manager, p, transactional=True))
        coordinator.start()
        return coordinator

    def _start_log_cleaner(self) -> LogCleaner:
        """Kafka's log cleaner: compacts logs with cleanup.policy=compact in the background,
        never past a partition's high watermark."""
        assert self.log_manager is not None
        cleaner = LogCleaner(
            self.log_manager,
            CleanerConfig.from_properties(self.dynamic_config().values),
            last_stable=self._last_stable_offset,
            crash_hook=faults.cleaner_crash_hook(),
        )
        if cleaner.config.enable:
            cleaner.start()
        return cleaner

    def _last_stable_offset(self, topic: str, partition: int) -> int | None:
        # Compaction stops at the LSO: an open transaction's records may yet be aborted.
        assert self.replica_manager is not None
        hosted = self.replica_manager.get_partition(TopicPartition(topic, partition))
        return hosted.last_stable_offset if hosted is not None else None

    def _partition_exists(self, topic: str, partition: int) -> bool:
        assert self.cache is not None
        meta = self.cache.topic(topic)
        return meta is not None and partition in meta.assignment

    def _broker_alive(self, broker_id: int) -> bool:
        assert self.cache is not None
        return self.cache.broker(broker_id) is not None

    def _on_topic_deleted(self, name: str, partitions: list[int]) -> None:
        self.metrics.forget_topic(name)
        if self.group_coordinator is not None:
            task = asyncio.create_task(
                self.group_coordinator.on_partitions_deleted(
                    [TopicPartition(name, p) for p in partitions]
                )
            )
            self._background.add(task)
            task.add_done_callback(self._background.discard)

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

    def _schedule(self, interval_ms: int, job: Callable[[], Awaitable[None] | None]) -> None:
        async def loop() -> None:
            while True:
                await asyncio.sleep(interval_ms / 1000)
                try:
                    result = job()
                    if asyncio.iscoroutine(result):
                        await result
                except OSError as exc:
                    if not out_of_space(exc):
                        log.exception("scheduled job %s failed", getattr(job, "__name__", job))
                        continue
                    # A full disk is expected to pass: one line, and the job runs again.
                    log.warning("scheduled job %s: %s", getattr(job, "__name__", job), exc)
                except Exception:
                    log.exception("scheduled job %s failed", getattr(job, "__name__", job))

        self._tasks.append(asyncio.create_task(loop()))

    def _retention(self) -> None:
        assert self.log_manager is not None
        deleted = self.log_manager.cleanup_logs()
        if deleted:
            log.info("retention deleted %d segments", deleted)
            self.log_manager.checkpoint_log_start_offsets()

    def _expire_producers(self) -> None:
        assert self.log_manager is not None
        expired = self.log_manager.remove_expired_producers(
            self.dynamic_config()["producer.id.expiration.ms"]
        )
        if expired:
            log.info("expired %d idle producer ids (producer.id.expiration.ms)", expired)

    def _checkpoint(self) -> None:
        assert self.log_manager is not None
        self.log_manager.checkpoint_recovery_points()
        self.log_manager.checkpoint_log_start_offsets()

    def _flush(self) -> None:
        assert self.log_manager is not None
        self.log_manager.flush_dirty_logs()

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
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if self.log_cleaner is not None:
            await self.log_cleaner.shutdown()
        if self.cluster is not None:
            # Leaving ZooKeeper deregisters this broker: the controller moves what is left.
            await self.cluster.close()
        for server in self.socket_servers.values():
            await server.stop()
        if self.transaction_coordinator is not None:
            await self.transaction_coordinator.shutdown()
        if self._marker_pool is not None:
            await self._marker_pool.close()
        if self.group_coordinator is not None:
            await self.group_coordinator.shutdown()
        if self.producer_id_manager is not None:
            await self.producer_id_manager.close()
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
        self._stopped.set()
        log.info("broker %d stopped", self.config.broker_id)

    async def wait_stopped(self) -> None:
        await self._stopped.wait()
