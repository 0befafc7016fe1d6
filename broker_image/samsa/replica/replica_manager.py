"""ReplicaManager: the partitions this broker hosts, and the produce and fetch paths over them."""

from __future__ import annotations

import asyncio
import functools
import itertools
import logging
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from samsa.config import LogConfig
from samsa.log import LogManager, OffsetOutOfRangeError
from samsa.log.producer_state import AppendOrigin, ProducerStateEntry
from samsa.metadata.model import PartitionState, TopicPartition
from samsa.metadata.names import is_internal
from samsa.protocol.control import build_end_txn_marker
from samsa.protocol.errors import ErrorCode, KafkaApiError
from samsa.protocol.fileregion import FileRegion
from samsa.protocol.record_batch import (
    BatchHeader,
    CorruptRecordError,
    InvalidRecordError,
    RecordTooLargeError,
    read_batch_header,
    scan_batches,
    validate_batches,
)
from samsa.protocol.record_filter import first_keyless_record
from samsa.replica.delayed import DataWaiters
from samsa.replica.fetcher import ReplicaFetcherManager
from samsa.replica.latency_stages import StageClock
from samsa.replica.partition import (
    READ_COMMITTED,
    AlterIsr,
    Partition,
    ProducePartitionResponse,
)
from samsa.wall_clock import monotonic_ms, wall_clock_ms

log = logging.getLogger(__name__)

GROUP_METADATA_TOPIC = "__consumer_offsets"

# Timestamp sentinels of ListOffsets.
LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL_TIMESTAMP = -4
LATEST_TIERED_TIMESTAMP = -5
EARLIEST_PENDING_UPLOAD_TIMESTAMP = -6


@dataclass(slots=True)
class FetchPartitionRequest:
    tp: TopicPartition
    fetch_offset: int
    partition_max_bytes: int
    current_leader_epoch: int = -1
    # A follower's own log start offset (Fetch v5+), for DeleteRecords' low watermark.
    log_start_offset: int = -1


@dataclass(slots=True)
class FetchPartitionResponse:
    tp: TopicPartition
    error_code: int = 0
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    records: bytes | FileRegion = b""
    messages: int = 0  # records in the batches returned (the first batch counts whole)
    # read_committed: (producer id, first offset) of the aborted transactions overlapping
    # the records returned; None otherwise.
    aborted_transactions: list[tuple[int, int]] | None = None


@dataclass(slots=True)
class TxnMarker:
    """One marker of a WriteTxnMarkers request: end a producer's transaction on partitions."""

    producer_id: int
    producer_epoch: int
    committed: bool
    coordinator_epoch: int
    partitions: list[TopicPartition]


@dataclass(slots=True)
class LeaderAndIsrPartition:
    """One partition of a controller's LeaderAndIsr request."""

    state: PartitionState
    topic_id: uuid.UUID
    is_new: bool = False


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


class ReplicaManager:
    """The partitions this broker hosts, as leader or follower, and the paths through them.

    In a cluster the controller drives leadership with LeaderAndIsr and StopReplica, each
    carrying its epoch: a request from an older controller epoch than one already seen is
    refused (STALE_CONTROLLER_EPOCH), the split-brain fence.  Standalone, the local
    controller makes this broker leader of everything.
    """

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

    # leadership

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

    def check_controller_epoch(self, controller_epoch: int) -> bool:
        """The split-brain fence: False for a request from an older controller."""
        if controller_epoch < self.controller_epoch:
            return False
        self.controller_epoch = controller_epoch
        return True

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

    def checkpoint_high_watermarks(self) -> None:
        self.log_manager.write_high_watermarks(
            {(tp.topic, tp.partition): p.high_watermark for tp, p in self.partitions.items()}
        )

    def _on_data(self, tp: TopicPartition, committed: bool) -> None:
        if committed:
            self.waiters.committed(tp)
        else:
            self.waiters.appended(tp)

    def on_follower_appended(self, partition: Partition, messages: int, size: int) -> None:
        self.on_append(partition.tp, messages, size)
        self.waiters.notify(partition.tp)

    # produce

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
                if config.compact:
                    _require_keys(tp, records, headers)
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
        except KafkaApiError as exc:
            return ProducePartitionResponse(error_code=exc.code.value, error_message=exc.message)
        except OSError as exc:
            log.error("append to %s failed: %s", tp, exc)
            return ProducePartitionResponse(
                error_code=ErrorCode.kafka_storage_error.value, error_message=str(exc)
            )
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

    # transaction markers

    def append_txn_marker(
        self,
        tp: TopicPartition,
        producer_id: int,
        producer_epoch: int,
        committed: bool,
        coordinator_epoch: int,
    ) -> ProducePartitionResponse:
        """Append the control batch that ends a producer's transaction, as leader; like
        acks=all, the answer waits for the ISR (``wait_for_acks``).  A partition this broker
        does not host is UNKNOWN_TOPIC_OR_PARTITION (Kafka's getMagic check)."""
        partition = self.partitions.get(tp)
        if partition is None:
            return ProducePartitionResponse(error_code=ErrorCode.unknown_topic_or_partition.value)
        try:
            if not partition.is_leader:
                raise KafkaApiError(ErrorCode.not_leader_or_follower)
            records = build_end_txn_marker(
                producer_id, producer_epoch, committed, coordinator_epoch, self.now_ms()
            )
            info = partition.append_records_to_leader(
                records,
                [read_batch_header(records)],
                -1,
                partition.log.config.min_insync_replicas,
                AppendOrigin.COORDINATOR,
            )
        except KafkaApiError as exc:
            return ProducePartitionResponse(error_code=exc.code.value, error_message=exc.message)
        except OSError as exc:
            log.error("append to %s failed: %s", tp, exc)
            return ProducePartitionResponse(
                error_code=ErrorCode.kafka_storage_error.value, error_message=str(exc)
            )
        self.on_append(tp, info.num_messages, info.valid_bytes)
        required = info.last_offset + 1
        return ProducePartitionResponse(
            base_offset=info.first_offset,
            log_start_offset=info.log_start_offset,
            required_offset=required if partition.high_watermark < required else -1,
        )

    async def write_txn_markers(
        self, markers: list[TxnMarker], timeout_s: float
    ) -> list[dict[TopicPartition, ErrorCode]]:
        """WriteTxnMarkers: append every marker, then answer each partition once its ISR has
        the marker (or with the error).  Markers that reached a __consumer_offsets partition
        are handed to ``on_txn_marker``."""
        appended: list[dict[TopicPartition, ProducePartitionResponse]] = []
        for marker in markers:
            appended.append(
                {
                    tp: self.append_txn_marker(
                        tp,
                        marker.producer_id,
                        marker.producer_epoch,
                        marker.committed,
                        marker.coordinator_epoch,
                    )
                    for tp in marker.partitions
                }
            )
        await asyncio.gather(
            *(
                self.wait_for_acks(tp, r, timeout_s)
                for results in appended
                for tp, r in results.items()
            )
        )
        answers: list[dict[TopicPartition, ErrorCode]] = []
        for marker, results in zip(markers, appended, strict=True):
            codes: dict[TopicPartition, ErrorCode] = {}
            for tp, r in results.items():
                code = ErrorCode(r.error_code)
                if code is ErrorCode.none and tp.topic == GROUP_METADATA_TOPIC:
                    try:
                        self.on_txn_marker(tp, marker.producer_id, marker.committed)
                    except Exception:
                        log.exception("completing transactional offsets on %s failed", tp)
                        code = ErrorCode.unknown_server_error
                codes[tp] = code
            answers.append(codes)
        return answers

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

    # fetch

    def read(
        self,
        requests: Iterable[FetchPartitionRequest],
        max_bytes: int,
        isolation_level: int,
        replica_id: int = -1,
        from_follower: bool = False,
    ) -> tuple[list[FetchPartitionResponse], int]:
        """Read each partition in order until max_bytes; returns the responses and bytes read.

        `from_follower`: a consumer that may read from a follower, below its high watermark
        (KIP-392; Kafka allows it to consumers that send their rack, Fetch v11+)."""
        responses: list[FetchPartitionResponse] = []
        total = 0
        for req in requests:
            resp = FetchPartitionResponse(req.tp)
            responses.append(resp)
            partition = self.partitions.get(req.tp)
            if partition is None:
                resp.error_code = self._not_hosted(req.tp).value
                continue
            if not partition.is_leader and not (from_follower and partition.leader_id >= 0):
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
            if replica_id >= 0 and req.fetch_offset <= plog.log_end_offset:
                partition.update_follower_fetch_state(
                    replica_id, req.fetch_offset, req.log_start_offset
                )
            resp.high_watermark = partition.high_watermark
            resp.last_stable_offset = partition.last_stable_offset
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
                # Kafka answers an out-of-range fetch with no offsets at all.
                resp.error_code = ErrorCode.offset_out_of_range.value
                resp.high_watermark = resp.last_stable_offset = resp.log_start_offset = -1
                continue
            if budget <= 0 and total > 0:
                continue
            resp.records = data.records
            if data.records:
                partition.records_read(req.fetch_offset, replica_id)
                if isolation_level == READ_COMMITTED and replica_id < 0:
                    resp.aborted_transactions = [
                        (t.producer_id, t.first_offset)
                        for t in plog.collect_aborted_txns(req.fetch_offset, data.next_offset)
                    ]
            if data.next_offset > data.first_batch_offset >= 0:
                resp.messages = data.next_offset - data.first_batch_offset
            total += len(data.records)
        return responses, total

    def quiet(self, req: FetchPartitionRequest, replica_id: int) -> tuple[int, int, int] | None:
        """For a partition of a follower's fetch session that this fetch did not name: its
        (high watermark, last stable offset, log start offset) if the follower has the
        leader's whole log and is in the ISR, so that a read would find nothing; the follower
        is noted caught up now. None: it must be read (``read``), to move its state or to
        answer with records or an error."""
        partition = self.partitions.get(req.tp)
        if (
            partition is None
            or not partition.is_leader
            or (0 <= req.current_leader_epoch != partition.leader_epoch)
            or not partition.follower_at_end(replica_id, req.fetch_offset)
        ):
            return None
        return (
            partition.high_watermark,
            partition.last_stable_offset,
            partition.log.log_start_offset,
        )

    async def wait_for_data(
        self,
        tps: list[TopicPartition],
        timeout_s: float,
        follower: bool = False,
        watched: asyncio.Future[float | None] | None = None,
    ) -> float | None:
        """When one of the partitions had news for a follower's fetch (its log grew) or a
        consumer's (its high watermark moved), as perf_counter time; None at the timeout.
        ``watched``: from ``waiters.watch``, made when the fetch last read the partitions."""
        return await self.waiters.wait(tps, timeout_s, follower, watched)

    # DeleteRecords

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
                partition = self.partitions.get(tp)
                if fut not in done:
                    fut.cancel()
                    results[tp] = (ErrorCode.request_timed_out, results[tp][1])
                elif fut.result() or partition is None:
                    results[tp] = (ErrorCode(fut.result() or self._not_hosted(tp)), -1)
                else:
                    results[tp] = (ErrorCode.none, partition.low_watermark())
        return results

    # DescribeProducers

    def active_producers(self, tp: TopicPartition) -> list[ProducerStateEntry]:
        """The producer state of a partition this broker leads (Kafka's activeProducerState);
        KafkaApiError otherwise."""
        return list(self.leader_partition(tp).log.producer_state.producers.values())

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

    def shutdown(self) -> None:
        for partition in self.partitions.values():
            partition.fail_waiters(ErrorCode.not_leader_or_follower)
        self.waiters.notify_all()
