"""Offset requests on a leader's log: ListOffsets' lookups and DeleteRecords' moves.

``offset_for_timestamp`` answers ListOffsets: the sentinels (latest, earliest, max timestamp,
the tiered ones) and a lookup by timestamp in the time indexes, below the high watermark (the
last stable offset for read_committed). ``delete_records`` moves a leader's log start offset
and waits for the followers to move theirs (Kafka's DelayedDeleteRecords).
"""

from __future__ import annotations

import asyncio

from samsa.metadata.model import TopicPartition
from samsa.metadata.names import is_internal
from samsa.protocol.errors import ErrorCode, KafkaApiError
from samsa.replica.hosted_partitions import HostedPartitions
from samsa.replica.partition import READ_COMMITTED

# Timestamp sentinels of ListOffsets.
LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL_TIMESTAMP = -4
LATEST_TIERED_TIMESTAMP = -5
EARLIEST_PENDING_UPLOAD_TIMESTAMP = -6


class OffsetRequests(HostedPartitions):
    """ListOffsets and DeleteRecords on the partitions this broker leads."""

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
        # read_committed consumers see offsets below the last stable offset only (Kafka's
        # lastFetchableOffset).
        upper = (
            partition.last_stable_offset
            if isolation_level == READ_COMMITTED
            else partition.high_watermark
        )
        if timestamp == LATEST_TIMESTAMP:
            return -1, upper, epoch
        if timestamp in (EARLIEST_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP):
            return -1, plog.log_start_offset, epoch
        if timestamp in (LATEST_TIERED_TIMESTAMP, EARLIEST_PENDING_UPLOAD_TIMESTAMP):
            # No tiered storage: nothing is tiered, or waiting to be.
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

    async def delete_records(
        self, offsets: dict[TopicPartition, int], timeout_s: float
    ) -> dict[TopicPartition, tuple[ErrorCode, int]]:
        """Move each partition's log start offset as leader, then wait (up to ``timeout_s``)
        until every live replica has moved its own: Kafka's DelayedDeleteRecords.

        Returns (error, low watermark) per partition; REQUEST_TIMED_OUT with the low
        watermark seen at first when the followers do not follow in time."""
        results: dict[TopicPartition, tuple[ErrorCode, int]] = {}
        waits: dict[TopicPartition, asyncio.Future[int]] = {}
        moved = False
        for tp, offset in offsets.items():
            if is_internal(tp.topic):
                results[tp] = (ErrorCode.invalid_topic_exception, -1)
                continue
            try:
                partition = self.leader_partition(tp)
                start = partition.log.log_start_offset
                wanted, low = partition.delete_records_on_leader(offset)
            except KafkaApiError as exc:
                results[tp] = (exc.code, -1)
                continue
            moved = moved or partition.log.log_start_offset != start
            results[tp] = (ErrorCode.none, low)
            if low < wanted:
                waits[tp] = partition.wait_for_low_watermark(wanted)
        if moved:
            # Kafka leaves this to its periodic checkpoint; one small file is cheap to write.
            self.log_manager.checkpoint_log_start_offsets()
        if waits:
            done, _ = await asyncio.wait(waits.values(), timeout=max(timeout_s, 0))
            for tp, fut in waits.items():
                hosted = self.partitions.get(tp)
                if fut not in done:
                    fut.cancel()
                    results[tp] = (ErrorCode.request_timed_out, results[tp][1])
                elif fut.result() or hosted is None:
                    results[tp] = (ErrorCode(fut.result() or self._not_hosted(tp)), -1)
                else:
                    results[tp] = (ErrorCode.none, hosted.low_watermark())
        return results
