"""Partition: one topic partition on this broker, its log, leadership and high watermark."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass

from samsa.log import Log, LogAppendInfo
from samsa.metadata.model import PartitionState, TopicPartition
from samsa.protocol.errors import ErrorCode, KafkaApiError
from samsa.protocol.records import BatchHeader


@dataclass(slots=True)
class ProducePartitionResponse:
    error_code: int = 0
    base_offset: int = -1
    log_append_time_ms: int = -1
    log_start_offset: int = -1
    error_message: str | None = None


class Partition:
    """The leader (or follower) replica of one partition on this broker.

    The high watermark is the smallest log end offset among the in-sync replicas; with one
    replica it follows the leader's log end offset.  Followers' offsets are tracked here so
    that replication slots in without changing the produce and fetch paths.
    """

    def __init__(
        self,
        tp: TopicPartition,
        topic_id: uuid.UUID,
        log: Log,
        broker_id: int,
        on_data: Callable[[TopicPartition], None],
    ) -> None:
        self.tp = tp
        self.topic_id = topic_id
        self.log = log
        self.broker_id = broker_id
        self.leader_id = -1
        self.leader_epoch = -1
        self.partition_epoch = 0
        self.replicas: tuple[int, ...] = ()
        self.isr: tuple[int, ...] = ()
        self.follower_end_offsets: dict[int, int] = {}
        self.high_watermark = log.log_end_offset
        self._on_data = on_data

    @property
    def is_leader(self) -> bool:
        return self.leader_id == self.broker_id

    def make_leader(self, state: PartitionState) -> None:
        self.leader_id = state.leader
        self.leader_epoch = state.leader_epoch
        self.partition_epoch = state.partition_epoch
        self.replicas = state.replicas
        self.isr = state.isr
        self.follower_end_offsets = {
            r: self.follower_end_offsets.get(r, -1) for r in state.replicas if r != self.broker_id
        }
        self._maybe_advance_high_watermark()

    def _maybe_advance_high_watermark(self) -> bool:
        hw = self.log.log_end_offset
        for replica in self.isr:
            if replica != self.broker_id:
                hw = min(hw, self.follower_end_offsets.get(replica, -1))
        hw = max(hw, self.log.log_start_offset)
        if hw > self.high_watermark or hw < self.log.log_start_offset:
            self.high_watermark = hw
            return True
        if self.high_watermark > self.log.log_end_offset:
            self.high_watermark = self.log.log_end_offset
        return False

    def append_records_to_leader(
        self,
        records: bytes,
        headers: list[BatchHeader],
        required_acks: int,
        min_insync_replicas: int,
    ) -> LogAppendInfo:
        if not self.is_leader:
            raise KafkaApiError(ErrorCode.not_leader_or_follower)
        if required_acks == -1 and len(self.isr) < min_insync_replicas:
            raise KafkaApiError(
                ErrorCode.not_enough_replicas,
                f"The in-sync replicas of {self.tp} ({len(self.isr)}) are fewer than "
                f"min.insync.replicas ({min_insync_replicas})",
            )
        info = self.log.append_as_leader(records, self.leader_epoch, headers)
        self._maybe_advance_high_watermark()
        self._on_data(self.tp)
        return info

    def fetch_upper_bound(self, isolation_level: int, for_replica: bool) -> int:
        """Consumers read below the high watermark; followers read to the log end."""
        if for_replica:
            return self.log.log_end_offset
        return self.high_watermark

    def after_log_truncated(self) -> None:
        self.high_watermark = min(self.high_watermark, self.log.log_end_offset)
        self.high_watermark = max(self.high_watermark, self.log.log_start_offset)
