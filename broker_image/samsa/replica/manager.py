"""ReplicaManager: the partitions this broker hosts, and the produce and fetch paths over them."""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from samsa.config import LogConfig
from samsa.log import LogManager, OffsetOutOfRangeError
from samsa.metadata.model import PartitionState, TopicPartition
from samsa.protocol.errors import ErrorCode, KafkaApiError
from samsa.protocol.fileregion import FileRegion
from samsa.protocol.record_filter import first_keyless_record
from samsa.protocol.records import (
    BatchHeader,
    CorruptRecordError,
    RecordTooLargeError,
    validate_batches,
)
from samsa.replica.delayed import DataWaiters
from samsa.replica.partition import Partition, ProducePartitionResponse

log = logging.getLogger(__name__)

# Timestamp sentinels of ListOffsets.
LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL_TIMESTAMP = -4
LATEST_TIERED_TIMESTAMP = -5


@dataclass(slots=True)
class FetchPartitionRequest:
    tp: TopicPartition
    fetch_offset: int
    partition_max_bytes: int
    current_leader_epoch: int = -1


@dataclass(slots=True)
class FetchPartitionResponse:
    tp: TopicPartition
    error_code: int = 0
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    records: bytes | FileRegion = b""
    messages: int = 0  # records in the batches returned (the first batch counts whole)


def _require_keys(
    tp: TopicPartition, records: bytes | memoryview, headers: list[BatchHeader]
) -> None:
    """Kafka's rule for compacted topics: every record has a key (INVALID_RECORD if not).
    The one place the produce path reads individual records, and only for such topics."""
    missing = first_keyless_record(records, headers)
    if missing is not None:
        raise KafkaApiError(
            ErrorCode.invalid_record,
            f"Compacted topic cannot accept message without key in topic partition {tp} "
            f"(batch {missing[0]}, record {missing[1]}).",
        )


class ReplicaManager:
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
        self.now_ms = now_ms or (lambda: int(time.time() * 1000))
        # Metrics hooks; the broker wires prometheus counters in.
        self.on_append: Callable[[TopicPartition, int, int], None] = lambda tp, n, b: None

    # leadership

    def become_leader(self, state: PartitionState, topic_id: uuid.UUID) -> Partition:
        tp = TopicPartition(state.topic, state.partition)
        partition = self.partitions.get(tp)
        if partition is None:
            plog = self.log_manager.get_or_create_log(
                tp.topic, tp.partition, self.log_config_for(tp.topic)
            )
            partition = Partition(tp, topic_id, plog, self.broker_id, self.waiters.notify)
            self.partitions[tp] = partition
        partition.topic_id = topic_id
        partition.make_leader(state)
        return partition

    def stop_replica(self, tp: TopicPartition, delete: bool) -> None:
        partition = self.partitions.pop(tp, None)
        if delete:
            self.log_manager.delete_log(tp.topic, tp.partition)
        if partition is not None:
            self.waiters.notify(tp)

    def update_log_config(self, topic: str, config: LogConfig) -> None:
        self.log_manager.update_config(topic, config)

    def get_partition(self, tp: TopicPartition) -> Partition | None:
        return self.partitions.get(tp)

    def leader_partition(self, tp: TopicPartition) -> Partition:
        partition = self.partitions.get(tp)
        if partition is None:
            raise KafkaApiError(ErrorCode.unknown_topic_or_partition)
        if not partition.is_leader:
            raise KafkaApiError(ErrorCode.not_leader_or_follower)
        return partition

    # produce

    def append_records(
        self,
        tp: TopicPartition,
        records: bytes | memoryview | None,
        required_acks: int,
        max_message_bytes: int,
    ) -> ProducePartitionResponse:
        """Validate and append one partition's batches as leader; errors become codes."""
        try:
            partition = self.leader_partition(tp)
            if not records:
                raise KafkaApiError(ErrorCode.corrupt_message, "empty record set")
            config = partition.log.config
            try:
                headers = validate_batches(records, config.max_message_bytes)
                if config.compact:
                    _require_keys(tp, records, headers)
            except RecordTooLargeError as exc:
                raise KafkaApiError(ErrorCode.message_too_large, str(exc)) from None
            except CorruptRecordError as exc:
                raise KafkaApiError(ErrorCode.corrupt_message, str(exc)) from None
            info = partition.append_records_to_leader(
                records, headers, required_acks, config.min_insync_replicas
            )
        except KafkaApiError as exc:
            return ProducePartitionResponse(error_code=exc.code.value, error_message=exc.message)
        except OSError as exc:
            log.error("append to %s failed: %s", tp, exc)
            return ProducePartitionResponse(
                error_code=ErrorCode.kafka_storage_error.value, error_message=str(exc)
            )
        self.on_append(tp, info.num_messages, info.valid_bytes)
        return ProducePartitionResponse(
            base_offset=info.first_offset,
            log_append_time_ms=info.log_append_time,
            log_start_offset=info.log_start_offset,
        )

    # fetch

    def read(
        self,
        requests: Iterable[FetchPartitionRequest],
        max_bytes: int,
        isolation_level: int,
        replica_id: int = -1,
    ) -> tuple[list[FetchPartitionResponse], int]:
        """Read each partition in order until max_bytes; returns the responses and bytes read."""
        responses: list[FetchPartitionResponse] = []
        total = 0
        for req in requests:
            resp = FetchPartitionResponse(req.tp)
            responses.append(resp)
            partition = self.partitions.get(req.tp)
            if partition is None:
                resp.error_code = ErrorCode.unknown_topic_or_partition.value
                continue
            if not partition.is_leader:
                resp.error_code = ErrorCode.not_leader_or_follower.value
                continue
            if req.current_leader_epoch >= 0 and req.current_leader_epoch != partition.leader_epoch:
                resp.error_code = (
                    ErrorCode.fenced_leader_epoch.value
                    if req.current_leader_epoch < partition.leader_epoch
                    else ErrorCode.unknown_leader_epoch.value
                )
                continue
            plog = partition.log
            resp.high_watermark = partition.high_watermark
            resp.last_stable_offset = partition.high_watermark
            resp.log_start_offset = plog.log_start_offset
            upper = partition.fetch_upper_bound(isolation_level, replica_id >= 0)
            budget = min(req.partition_max_bytes, max_bytes - total)
            if req.fetch_offset == upper and req.fetch_offset <= plog.log_end_offset:
                continue
            try:
                data = plog.read(
                    req.fetch_offset,
                    max(budget, 0),
                    max_offset=upper,
                    min_one_message=total == 0,
                    zero_copy=True,
                )
            except OffsetOutOfRangeError:
                resp.error_code = ErrorCode.offset_out_of_range.value
                continue
            if budget <= 0 and total > 0:
                continue
            resp.records = data.records
            if data.next_offset > data.first_batch_offset >= 0:
                resp.messages = data.next_offset - data.first_batch_offset
            total += len(data.records)
        return responses, total

    async def wait_for_data(self, tps: list[TopicPartition], timeout_s: float) -> bool:
        return await self.waiters.wait(tps, timeout_s)

    # offsets

    def offset_for_timestamp(
        self, tp: TopicPartition, timestamp: int, isolation_level: int, current_leader_epoch: int
    ) -> tuple[int, int, int]:
        """(timestamp, offset, leader_epoch) as ListOffsets answers; errors raise KafkaApiError."""
        partition = self.leader_partition(tp)
        if 0 <= current_leader_epoch != partition.leader_epoch:
            raise KafkaApiError(
                ErrorCode.fenced_leader_epoch
                if current_leader_epoch < partition.leader_epoch
                else ErrorCode.unknown_leader_epoch
            )
        plog = partition.log
        epoch = partition.leader_epoch
        upper = partition.high_watermark
        if timestamp == LATEST_TIMESTAMP:
            return -1, upper, epoch
        if timestamp in (EARLIEST_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP):
            return -1, plog.log_start_offset, epoch
        if timestamp == LATEST_TIERED_TIMESTAMP:
            return -1, -1, -1
        if timestamp == MAX_TIMESTAMP:
            found = plog.latest_timestamp_offset()
            if found is None or found[0] >= upper:
                return -1, -1, -1
            return found[1], found[0], epoch
        if timestamp < 0:
            raise KafkaApiError(ErrorCode.invalid_request, f"invalid timestamp {timestamp}")
        hit = plog.offset_for_timestamp(timestamp)
        if hit is None or hit[0] >= upper:
            return -1, -1, -1
        return hit[1], hit[0], epoch

    def shutdown(self) -> None:
        self.waiters.notify_all()
