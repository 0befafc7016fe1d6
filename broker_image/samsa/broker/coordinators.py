"""The coordinators of one broker, wired to its partitions: the group coordinator on
__consumer_offsets, the transaction coordinator on __transaction_state, and the producer id
manager behind both.

A coordinator serves the partitions of its topic that this broker leads: their state is
replayed from the log when this broker becomes their leader and dropped when it stops being it
(Kafka's onLeadershipChange). In a cluster the replica manager says when; standalone this
broker leads every partition, so they are loaded at start-up.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from samsa.config import KafkaConfig
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
from samsa.metadata import MetadataCache, MetadataStore, TopicPartition
from samsa.metadata.producer_ids import (
    LocalProducerIdBlockStore,
    ProducerIdBlockStore,
    ZkProducerIdBlockStore,
)
from samsa.replica import Partition, ReplicaManager

if TYPE_CHECKING:
    from samsa.broker.cluster import ClusterMembership


class Coordinators:
    """Builds, starts, feeds and stops the coordinators; each is None until started."""

    def __init__(
        self,
        config: KafkaConfig,
        dynamic_config: Callable[[], KafkaConfig],
        data_dir: Path,
        store: MetadataStore,
        cache: MetadataCache,
        replica_manager: ReplicaManager,
        cluster: ClusterMembership | None,
        partition_exists: Callable[[str, int], bool],
    ) -> None:
        self.config = config
        self.dynamic_config = dynamic_config
        self.data_dir = data_dir
        self.store = store
        self.cache = cache
        self.replica_manager = replica_manager
        self.cluster = cluster
        self.partition_exists = partition_exists
        self.group_coordinator: GroupCoordinator | None = None
        self.transaction_coordinator: TransactionCoordinator | None = None
        self.producer_id_manager: ProducerIdManager | None = None
        # The transaction markers' connections to the other brokers (a cluster's only).
        self.marker_pool: Any = None
        self._background: set[asyncio.Task[Any]] = set()

    # -- consumer groups ---------------------------------------------------------------------

    def start_cluster_group_coordinator(self) -> None:
        """In a cluster this broker coordinates the groups of the __consumer_offsets partitions
        it leads: loaded when it becomes their leader, dropped when it stops being it."""
        config = self.dynamic_config()
        coordinator = GroupCoordinator(
            GroupCoordinatorConfig.from_properties(config.values),
            LogGroupStore(self.replica_manager, config["request.timeout.ms"] / 1000),
            clock=AsyncioClock(),
            partition_exists=self.partition_exists,
        )
        coordinator.start()
        self.replica_manager.on_leader = self.on_leader
        self.replica_manager.on_follower = self.on_follower
        self.group_coordinator = coordinator

    async def start_standalone_group_coordinator(self) -> None:
        """Consumer groups: __consumer_offsets (created on first start), replayed, then served.

        Standalone, the topic's replication factor is this one broker, whatever
        offsets.topic.replication.factor says: there is no other broker to place a replica on.
        """
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
            partition_exists=self.partition_exists,
        )
        for p in range(partitions):
            await coordinator.load_partition(p, replay(self.replica_manager, p, transactional=True))
        coordinator.start()
        self.group_coordinator = coordinator

    # -- transactions ------------------------------------------------------------------------

    def start_transaction_coordinator(self) -> None:
        """Producer ids, then the transaction coordinator, which hands out their epochs and
        writes the markers the group coordinator hears of."""
        self.producer_id_manager = ProducerIdManager(
            self.config.broker_id, self._producer_id_blocks()
        )
        self.producer_id_manager.start()
        self.transaction_coordinator = self._transaction_coordinator()
        self.replica_manager.on_txn_marker = self.on_txn_marker
        # Started before the standalone loads: a transaction found prepared completes at once.
        self.transaction_coordinator.start()

    def _producer_id_blocks(self) -> ProducerIdBlockStore:
        """Producer ids must be unique across a cluster's brokers: ZooKeeper hands out the
        blocks there; standalone, the data directory records them."""
        if self.cluster is not None:
            return ZkProducerIdBlockStore(self.cluster.zk)
        return LocalProducerIdBlockStore(self.data_dir)

    def _transaction_coordinator(self) -> TransactionCoordinator:
        """Transactions: the ids of the __transaction_state partitions this broker leads;
        markers go to the partitions' leaders through the inter-broker connections."""
        from samsa.broker.txn_markers import BrokerMarkerWriter

        assert self.producer_id_manager is not None
        config = self.dynamic_config()
        partitions = config["transaction.state.log.num.partitions"]
        existing = self.store.topics().get(TRANSACTION_STATE_TOPIC_NAME)
        if existing is not None:
            partitions = existing.partition_count
        if self.cluster is not None:
            from samsa.client import ConnectionPool

            self.marker_pool = ConnectionPool(
                self.cluster.address_of,
                client_id=f"broker-{config.broker_id}-txn-markers",
                security=self.cluster.security,
            )
        pool = self.marker_pool
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

    def transaction_verifier(self) -> Any:
        """KIP-890's check of a transaction's first batch on a partition, with the id's
        coordinator: this broker's own, or over the transaction markers' connections."""
        from samsa.broker.txn_verifier import BrokerTransactionVerifier

        return BrokerTransactionVerifier(
            self.dynamic_config().broker_id,
            self.cache,
            lambda: self.transaction_coordinator,
            lambda: self.marker_pool,
            lambda: self.dynamic_config()["request.timeout.ms"] / 1000,
        )

    async def load_standalone_transactions(self) -> None:
        """Standalone, __transaction_state is created on first use, as in a cluster (with one
        replica: there is no other broker); partitions it already has are loaded now."""
        assert self.transaction_coordinator is not None
        rm = self.replica_manager
        rm.on_leader = self.on_leader
        rm.on_follower = self.on_follower
        meta = self.store.topics().get(TRANSACTION_STATE_TOPIC_NAME)
        for p in range(meta.partition_count if meta is not None else 0):
            partition = rm.get_partition(TopicPartition(TRANSACTION_STATE_TOPIC_NAME, p))
            if partition is not None and partition.is_leader:
                await self.transaction_coordinator.load_partition(
                    p, partition.leader_epoch, replay(rm, p, TRANSACTION_STATE_TOPIC_NAME)
                )

    # -- what the replica manager and the metadata tell them ---------------------------------

    def on_leader(self, partition: Partition) -> None:
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

    def on_follower(self, partition: Partition) -> None:
        if partition.tp.topic == TRANSACTION_STATE_TOPIC_NAME:
            if self.transaction_coordinator is not None:
                self.transaction_coordinator.unload_partition(partition.tp.partition)
            return
        if partition.tp.topic == GROUP_METADATA_TOPIC_NAME and self.group_coordinator is not None:
            self.group_coordinator.unload_partition(partition.tp.partition)

    def on_txn_marker(self, tp: TopicPartition, producer_id: int, committed: bool) -> None:
        if self.group_coordinator is not None:
            self.group_coordinator.on_txn_marker(tp.partition, producer_id, committed)

    def on_partitions_deleted(self, name: str, partitions: list[int]) -> None:
        """A topic was deleted: the offsets committed for its partitions go."""
        if self.group_coordinator is not None:
            task = asyncio.create_task(
                self.group_coordinator.on_partitions_deleted(
                    [TopicPartition(name, p) for p in partitions]
                )
            )
            self._background.add(task)
            task.add_done_callback(self._background.discard)

    def _spawn(self, coro: Any) -> None:
        task = asyncio.ensure_future(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def shutdown(self) -> None:
        if self.transaction_coordinator is not None:
            await self.transaction_coordinator.shutdown()
        if self.marker_pool is not None:
            await self.marker_pool.close()
        if self.group_coordinator is not None:
            await self.group_coordinator.shutdown()
        if self.producer_id_manager is not None:
            await self.producer_id_manager.close()
