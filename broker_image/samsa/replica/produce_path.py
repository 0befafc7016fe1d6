"""The produce path: a leader's appends of producers' batches, and the acks=all wait.

``append_records`` validates one partition's batches (one batch per partition, sizes, and for
the topics and batches that ask for it their records: keys of compacted topics, timestamps
out of the topic's bounds, the topic's codec) and
appends them as leader; with acks=all its answer carries the offset the high watermark must
reach, and ``wait_for_all_acks`` waits for the ISR to get there (Kafka's DelayedProduce).
DescribeProducers reads the producer state these appends keep.
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import logging

from samsa.log.producer_state import AppendOrigin, ProducerStateEntry
from samsa.log.record_validation import (
    RecordValidationError,
    inspects_records,
    timestamps_settled,
    validate_records,
)
from samsa.metadata.model import TopicPartition
from samsa.protocol.errors import ErrorCode, KafkaApiError
from samsa.protocol.record_batch import (
    CorruptRecordError,
    InvalidRecordError,
    RecordTooLargeError,
    scan_batches,
    validate_batches,
)
from samsa.replica.hosted_partitions import HostedPartitions
from samsa.replica.partition import Partition, ProducePartitionResponse

log = logging.getLogger(__name__)


def append_error(tp: TopicPartition, exc: KafkaApiError | OSError) -> ProducePartitionResponse:
    """A refused append's answer: the KafkaApiError's code and message, or
    KAFKA_STORAGE_ERROR for the disk's error (logged)."""
    if isinstance(exc, KafkaApiError):
        return ProducePartitionResponse(error_code=exc.code.value, error_message=exc.message)
    log.error("append to %s failed: %s", tp, exc)
    return ProducePartitionResponse(
        error_code=ErrorCode.kafka_storage_error.value, error_message=str(exc)
    )


def _time_out(futures: list[asyncio.Future[int]]) -> None:
    """acks=all waits that ran out of time (Kafka's DelayedProduce expiring)."""
    for future in futures:
        if not future.done():
            future.set_result(ErrorCode.request_timed_out.value)


def _settle_ack(
    partition: Partition, response: ProducePartitionResponse, future: asyncio.Future[int]
) -> None:
    """One partition's acks=all wait ended: its answer."""
    if future.cancelled():
        return
    code = future.result()
    if code == 0 and len(partition.isr) < partition.log.config.min_insync_replicas:
        code = ErrorCode.not_enough_replicas_after_append.value
    response.error_code = code
    response.required_offset = -1


class ProducePath(HostedPartitions):
    """Producers' appends to the partitions this broker leads, and their acks."""

    def append_records(
        self,
        tp: TopicPartition,
        records: bytes | memoryview | None,
        required_acks: int,
        max_message_bytes: int,
        origin: AppendOrigin = AppendOrigin.CLIENT,
    ) -> ProducePartitionResponse:
        """Validate and append one partition's batches as leader; errors become codes.

        With acks=all the response carries the offset the high watermark must reach before
        the producer is answered (see ``wait_for_acks``). The group coordinator appends its
        transactional offset commits as origin COORDINATOR: epochs checked, no sequence."""
        try:
            partition = self.leader_partition(tp)
            if not records:
                raise KafkaApiError(ErrorCode.invalid_record, "empty record set")
            config = partition.log.config
            try:
                if len(list(itertools.islice(scan_batches(records), 2))) > 1:
                    raise KafkaApiError(
                        ErrorCode.invalid_record,
                        "Produce requests are only allowed to contain exactly one record batch "
                        "per partition",
                    )
                headers = validate_batches(records, config.max_message_bytes)
                now = self.now_ms()
                if inspects_records(config) or not timestamps_settled(headers, config, now):
                    records, headers = validate_records(str(tp), records, headers, config, now)
            except RecordValidationError as exc:
                # As Kafka: the culprits named, and the partition's log start offset.
                return ProducePartitionResponse(
                    error_code=exc.code.value,
                    error_message=exc.message,
                    log_start_offset=partition.log.log_start_offset,
                    record_errors=tuple(exc.record_errors),
                )
            except RecordTooLargeError as exc:
                raise KafkaApiError(ErrorCode.message_too_large, str(exc)) from None
            except InvalidRecordError as exc:
                raise KafkaApiError(ErrorCode.invalid_record, str(exc)) from None
            except CorruptRecordError as exc:
                raise KafkaApiError(ErrorCode.corrupt_message, str(exc)) from None
            try:
                info = partition.append_records_to_leader(
                    records, headers, required_acks, config.min_insync_replicas, origin
                )
            except OSError:
                partition.storage_error = True
                raise
            except KafkaApiError as exc:
                if partition.storage_error and exc.code is ErrorCode.out_of_order_sequence_number:
                    # The producer's batch before this one was refused for the disk, so this
                    # one is out of sequence. Kafka would have taken the log offline and
                    # refused both alike; so does this broker, with the retriable error. An
                    # idempotent producer told OUT_OF_ORDER_SEQUENCE_NUMBER here bumps its
                    # epoch, and librdkafka then resends under the new epoch batches of other
                    # partitions that may already be written: duplicates.
                    raise KafkaApiError(
                        ErrorCode.kafka_storage_error, "the disk refused an earlier batch"
                    ) from None
                raise
            partition.storage_error = False
        except (KafkaApiError, OSError) as exc:
            return append_error(tp, exc)
        self.on_append(tp, info.num_messages, info.valid_bytes)
        required = info.last_offset + 1
        return ProducePartitionResponse(
            base_offset=info.first_offset,
            log_append_time_ms=info.log_append_time,
            log_start_offset=info.log_start_offset,
            required_offset=required
            if required_acks == -1 and partition.high_watermark < required
            else -1,
        )

    async def wait_for_acks(
        self, tp: TopicPartition, response: ProducePartitionResponse, timeout_s: float
    ) -> None:
        """acks=all: wait until the ISR has the appended records (Kafka's DelayedProduce).

        REQUEST_TIMED_OUT if they do not in time, NOT_LEADER_OR_FOLLOWER if leadership moves,
        NOT_ENOUGH_REPLICAS_AFTER_APPEND if the ISR shrank below min.insync.replicas."""
        await self.wait_for_all_acks([(tp, response)], timeout_s)

    async def wait_for_all_acks(
        self, waits: list[tuple[TopicPartition, ProducePartitionResponse]], timeout_s: float
    ) -> None:
        """``wait_for_acks`` for the partitions of one produce request, with one deadline.

        Each partition's answer is settled the moment its wait ends, as one task per partition
        would, but with none: a timer and the partitions' own futures, awaited in turn."""
        pending: list[asyncio.Future[int]] = []
        for tp, response in waits:
            if response.required_offset < 0 or response.error_code:
                continue
            partition = self.partitions.get(tp)
            if partition is None:
                response.error_code = ErrorCode.not_leader_or_follower.value
                continue
            future = partition.wait_for_high_watermark(response.required_offset)
            if future.done():
                _settle_ack(partition, response, future)
            else:
                future.add_done_callback(functools.partial(_settle_ack, partition, response))
                pending.append(future)
        if not pending:
            return
        # A timer, not asyncio.timeout: that one costs a cancellation scope per request.
        timer = asyncio.get_running_loop().call_later(timeout_s, _time_out, pending)
        try:
            for future in pending:
                await future
        finally:
            timer.cancel()

    def active_producers(self, tp: TopicPartition) -> list[ProducerStateEntry]:
        """The producer state of a partition this broker leads (Kafka's activeProducerState);
        KafkaApiError otherwise."""
        return list(self.leader_partition(tp).log.producer_state.producers.values())
