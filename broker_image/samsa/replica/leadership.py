"""Leadership changes: the controller's LeaderAndIsr and StopReplica, applied to partitions.

In a cluster the controller drives leadership with LeaderAndIsr and StopReplica, each carrying
its epoch: a request from an older controller epoch than one already seen is refused
(STALE_CONTROLLER_EPOCH), the split-brain fence (``check_controller_epoch``). Standalone, the
local controller makes this broker leader of everything (``become_leader``). A partition
becoming a follower is handed to the fetchers. The periodic ISR check of the partitions this
broker leads is here too.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterable
from dataclasses import dataclass

from samsa.metadata.model import PartitionState, TopicPartition
from samsa.protocol.errors import ErrorCode
from samsa.replica.hosted_partitions import HostedPartitions
from samsa.replica.partition import Partition
from samsa.wall_clock import monotonic_ms

log = logging.getLogger(__name__)


@dataclass(slots=True)
class LeaderAndIsrPartition:
    """One partition of a controller's LeaderAndIsr request."""

    state: PartitionState
    topic_id: uuid.UUID
    is_new: bool = False


class Leadership(HostedPartitions):
    """Which partitions this broker leads or follows, as the controller says."""

    def _get_or_create(self, tp: TopicPartition, topic_id: uuid.UUID) -> Partition:
        partition = self.partitions.get(tp)
        if partition is None:
            plog = self.log_manager.get_or_create_log(
                tp.topic, tp.partition, self.log_config_for(tp.topic)
            )
            partition = Partition(
                tp,
                topic_id,
                plog,
                self.broker_id,
                self._on_data,
                # ISR lag is an interval: a step of the wall clock must not shrink the ISR.
                monotonic_ms,
                self.alter_isr,
                self._checkpointed_hw.get((tp.topic, tp.partition)),
                self.stages,
            )
            partition.replica_alive = self.broker_alive
            self.partitions[tp] = partition
        partition.topic_id = topic_id
        return partition

    def become_leader(self, state: PartitionState, topic_id: uuid.UUID) -> Partition:
        """Standalone: this broker leads ``state``'s partition."""
        partition = self._get_or_create(TopicPartition(state.topic, state.partition), topic_id)
        if partition.make_leader(state):
            self.on_leader(partition)
        return partition

    def become_leader_or_follower(
        self, controller_epoch: int, partitions: Iterable[LeaderAndIsrPartition]
    ) -> dict[TopicPartition, ErrorCode]:
        """Apply a controller's LeaderAndIsr; per-partition errors (a stale leader epoch gets
        FENCED_LEADER_EPOCH and changes nothing)."""
        errors: dict[TopicPartition, ErrorCode] = {}
        if not self.check_controller_epoch(controller_epoch):
            return {
                TopicPartition(p.state.topic, p.state.partition): ErrorCode.stale_controller_epoch
                for p in partitions
            }
        new_followers: list[Partition] = []
        for item in partitions:
            state = item.state
            tp = TopicPartition(state.topic, state.partition)
            if self.broker_id not in state.replicas:
                errors[tp] = ErrorCode.unknown_topic_or_partition
                continue
            existing = self.partitions.get(tp)
            if existing is not None and not existing.is_newer(state):
                errors[tp] = ErrorCode.fenced_leader_epoch
                continue
            try:
                partition = self._get_or_create(tp, item.topic_id)
            except OSError as exc:
                log.error("cannot open the log of %s: %s", tp, exc)
                errors[tp] = ErrorCode.kafka_storage_error
                continue
            errors[tp] = ErrorCode.none
            if state.leader == self.broker_id:
                if self.fetcher_manager is not None:
                    self.fetcher_manager.remove([tp])
                if partition.make_leader(state):
                    log.info(
                        "%s: leader at epoch %d, ISR %s", tp, state.leader_epoch, list(state.isr)
                    )
                    self.on_leader(partition)
            elif state.leader >= 0:
                was_leader = partition.is_leader
                if partition.make_follower(state) or (
                    self.fetcher_manager is not None
                    and self.fetcher_manager.following(tp) != state.leader
                ):
                    new_followers.append(partition)
                if was_leader:
                    self.on_follower(partition)
                self.waiters.notify(tp)
            else:
                was_leader = partition.is_leader
                partition._apply(state)
                partition.make_offline()
                if self.fetcher_manager is not None:
                    self.fetcher_manager.remove([tp])
                if was_leader:
                    self.on_follower(partition)
                self.waiters.notify(tp)
        if new_followers and self.fetcher_manager is not None:
            for partition in new_followers:
                log.info(
                    "%s: following broker %d at epoch %d",
                    partition.tp,
                    partition.leader_id,
                    partition.leader_epoch,
                )
            self.fetcher_manager.add(new_followers)
        return errors

    def stop_replicas(
        self, controller_epoch: int, partitions: Iterable[tuple[TopicPartition, int, bool]]
    ) -> dict[TopicPartition, ErrorCode]:
        """StopReplica: stop fetching or leading (tp, leader epoch, delete the log?)."""
        if not self.check_controller_epoch(controller_epoch):
            return {tp: ErrorCode.stale_controller_epoch for tp, _, _ in partitions}
        errors = {}
        for tp, leader_epoch, delete in partitions:
            partition = self.partitions.get(tp)
            if (
                partition is not None
                and leader_epoch >= 0
                and partition.leader_epoch > leader_epoch
                and not delete
            ):
                errors[tp] = ErrorCode.fenced_leader_epoch
                continue
            if self.fetcher_manager is not None:
                self.fetcher_manager.remove([tp])
            if partition is not None:
                was_leader = partition.is_leader
                partition.make_offline()
                if was_leader:
                    self.on_follower(partition)
            if delete:
                self.stop_replica(tp, delete=True)
            errors[tp] = ErrorCode.none
        return errors

    def stop_replica(self, tp: TopicPartition, delete: bool) -> None:
        partition = self.partitions.pop(tp, None)
        if partition is not None:
            partition.make_offline()
        if self.fetcher_manager is not None:
            self.fetcher_manager.remove([tp])
        if delete:
            self.log_manager.delete_log(tp.topic, tp.partition)
        if partition is not None:
            self.waiters.notify(tp)

    def shrink_isrs(self, max_lag_ms: int) -> None:
        """The periodic ISR check of every partition this broker leads."""
        for partition in list(self.partitions.values()):
            lagging = partition.maybe_shrink_isr(max_lag_ms)
            if lagging:
                log.info(
                    "%s: replicas %s are out of sync (no catch-up in %d ms); shrinking the ISR",
                    partition.tp,
                    list(lagging),
                    max_lag_ms,
                )
