"""HostedPartitions: the state every path of the replica manager shares.

The partitions this broker hosts, the parked fetches waiting on them, the controller epoch
seen last (the split-brain fence every controller-to-broker request passes), and the hooks
the broker wires in (metrics, the group coordinator, the metadata cache). The paths over
them (leadership, produce, fetch, transaction markers, offsets) are mixins of this class,
put together as ``ReplicaManager``.
"""

from __future__ import annotations

from collections.abc import Callable

from samsa.config import LogConfig
from samsa.log import LogManager
from samsa.metadata.model import TopicPartition
from samsa.protocol.errors import ErrorCode, KafkaApiError
from samsa.replica.delayed import DataWaiters
from samsa.replica.fetcher import ReplicaFetcherManager
from samsa.replica.latency_stages import StageClock
from samsa.replica.partition import AlterIsr, Partition
from samsa.wall_clock import wall_clock_ms


class HostedPartitions:
    """The partitions this broker hosts, as leader or follower, and the hooks around them."""

    def __init__(
        self,
        broker_id: int,
        log_manager: LogManager,
        log_config_for: Callable[[str], LogConfig],
        now_ms: Callable[[], int] | None = None,
    ) -> None:
        self.broker_id = broker_id
        self.log_manager = log_manager
        self.log_config_for = log_config_for
        self.partitions: dict[TopicPartition, Partition] = {}
        self.waiters = DataWaiters()
        # Replication stage timings; the broker sets their sink (prometheus histograms).
        self.stages = StageClock()
        self.now_ms = now_ms or wall_clock_ms
        self.controller_epoch = -1
        # How many times retention moved log start offsets up: fetch sessions, which skip
        # partitions whose state they saw last, look at every partition again after a move.
        self.log_starts_moved = 0
        # Brokers the controller named as leaders (host, port), before UpdateMetadata arrives.
        self.known_brokers: dict[int, tuple[str, int]] = {}
        self._checkpointed_hw = log_manager.read_high_watermarks()
        # Cluster mode only: the followers' fetchers and the ISR-change channel.
        self.fetcher_manager: ReplicaFetcherManager | None = None
        self.alter_isr: AlterIsr | None = None
        # Metrics hooks; the broker wires prometheus counters in.
        self.on_append: Callable[[TopicPartition, int, int], None] = lambda tp, n, b: None
        # Metrics hook: an ISR shrink (True) or expansion (False) was proposed.
        self.on_isr_change: Callable[..., None] = lambda shrink: None
        # Leadership hooks (the group coordinator follows __consumer_offsets leadership).
        self.on_leader: Callable[[Partition], None] = lambda p: None
        self.on_follower: Callable[[Partition], None] = lambda p: None
        # What the metadata cache knows: a partition it knows that this broker does not host
        # gets NOT_LEADER_OR_FOLLOWER (the client's metadata is stale), as in Kafka.
        self.partition_known: Callable[[TopicPartition], bool] = lambda tp: False
        self.broker_alive: Callable[[int], bool] = lambda broker_id: True
        # The group coordinator's seam: a transaction marker reached the ISR of a
        # __consumer_offsets partition, so that producer's pending transactional offsets
        # become committed (True) or are dropped (False).
        self.on_txn_marker: Callable[[TopicPartition, int, bool], None] = (
            lambda tp, producer_id, committed: None
        )

    def check_controller_epoch(self, controller_epoch: int) -> bool:
        """The split-brain fence: False for a request from an older controller."""
        if controller_epoch < self.controller_epoch:
            return False
        self.controller_epoch = controller_epoch
        return True

    def update_log_config(self, topic: str, config: LogConfig) -> None:
        self.log_manager.update_config(topic, config)

    def get_partition(self, tp: TopicPartition) -> Partition | None:
        return self.partitions.get(tp)

    def leader_partition(self, tp: TopicPartition) -> Partition:
        partition = self.partitions.get(tp)
        if partition is None:
            raise KafkaApiError(self._not_hosted(tp))
        if not partition.is_leader:
            raise KafkaApiError(ErrorCode.not_leader_or_follower)
        return partition

    def _not_hosted(self, tp: TopicPartition) -> ErrorCode:
        return (
            ErrorCode.not_leader_or_follower
            if self.partition_known(tp)
            else ErrorCode.unknown_topic_or_partition
        )

    def checkpoint_high_watermarks(self) -> None:
        self.log_manager.write_high_watermarks(
            {(tp.topic, tp.partition): p.high_watermark for tp, p in self.partitions.items()}
        )

    def retention_ran(self) -> None:
        """Retention deleted segments: log start offsets may have moved."""
        self.log_starts_moved += 1
        if self.fetcher_manager is not None:
            self.fetcher_manager.log_starts_moved()

    def _on_data(self, tp: TopicPartition, committed: bool) -> None:
        if committed:
            self.waiters.committed(tp)
        else:
            self.waiters.appended(tp)

    def on_follower_appended(self, partition: Partition, messages: int, size: int) -> None:
        self.on_append(partition.tp, messages, size)
        self.waiters.notify(partition.tp)
