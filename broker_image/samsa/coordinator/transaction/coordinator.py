"""The transaction coordinator's API (Kafka's TransactionCoordinator): InitProducerId with a
transactional id, AddPartitionsToTxn (and AddOffsetsToTxn through it), EndTxn, the abort of
timed-out transactions, DescribeTransactions and ListTransactions, and becoming and ceasing to
be the coordinator of a __transaction_state partition.

Every state change is prepared synchronously on the event loop, written to the log, and only
then completed; a client is answered once its transition is durable. EndTxn is answered once
PrepareCommit/PrepareAbort is durable: the markers are written afterwards, in the background,
and the transaction then completes (CompleteCommit/CompleteAbort). Until it has, the
transactional id's next request gets CONCURRENT_TRANSACTIONS.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Coroutine, Iterable
from dataclasses import dataclass
from typing import Any, TypeVar

from samsa.coordinator.timers import AsyncioClock, Clock, TimerHandle
from samsa.coordinator.transaction.config import TransactionConfig
from samsa.coordinator.transaction.markers import MarkerWriter, TxnMarkerEntry, write_txn_markers
from samsa.coordinator.transaction.metadata import (
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    TransactionMetadata,
    TransactionState,
    TxnTransitMetadata,
)
from samsa.coordinator.transaction.state_manager import (
    CoordinatorEpochAndMetadata,
    ReplayRecords,
    TransactionStateManager,
    TransactionStore,
)
from samsa.metadata.model import TopicPartition
from samsa.protocol.errors import ErrorCode

log = logging.getLogger(__name__)

T = TypeVar("T")

_S = TransactionState


@dataclass(frozen=True)
class InitProducerIdResult:
    error: ErrorCode
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH


@dataclass(frozen=True)
class TransactionDescription:
    transactional_id: str
    error: ErrorCode
    state: str = ""
    timeout_ms: int = 0
    start_time_ms: int = -1
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH
    partitions: tuple[TopicPartition, ...] = ()


@dataclass(frozen=True)
class TransactionListing:
    transactional_id: str
    producer_id: int
    state: str


@dataclass(frozen=True)
class ListTransactionsResult:
    error: ErrorCode
    unknown_state_filters: tuple[str, ...] = ()
    transactions: tuple[TransactionListing, ...] = ()


class TransactionCoordinator:
    def __init__(
        self,
        config: TransactionConfig,
        store: TransactionStore,
        generate_producer_id: Callable[[], Awaitable[int]],
        markers: MarkerWriter,
        *,
        clock: Clock | None = None,
    ) -> None:
        self.config = config
        self.clock: Clock = clock or AsyncioClock()
        self.state_manager = TransactionStateManager(config, store, self.clock.now_ms)
        self._generate_producer_id = generate_producer_id
        self.markers = markers
        self._active = False
        self._tasks: set[asyncio.Task[Any]] = set()
        self._timers: list[TimerHandle | None] = [None, None]

    # ================================================================== lifecycle

    def start(self, enable_timeouts: bool = True) -> None:
        """Answer requests; abort timed-out transactions and expire idle transactional ids
        on their intervals."""
        self._active = True
        if enable_timeouts:
            self._schedule(
                0,
                self.config.abort_timed_out_transaction_cleanup_interval_ms,
                self.abort_timed_out_transactions,
            )
            self._schedule(
                1,
                self.config.remove_expired_transactional_ids_cleanup_interval_ms,
                self.remove_expired_transactional_ids,
            )

    def _schedule(self, slot: int, interval_ms: int, job: Callable[[], Awaitable[Any]]) -> None:
        def run() -> None:
            if self._active:
                self._spawn(job())
                self._schedule(slot, interval_ms, job)

        self._timers[slot] = self.clock.call_later(interval_ms, run)

    async def shutdown(self) -> None:
        self._active = False
        for i, timer in enumerate(self._timers):
            if timer is not None:
                timer.cancel()
                self._timers[i] = None
        for partition in list(self.state_manager.cache) + list(self.state_manager.loading):
            self.state_manager.unload_partition(partition)
        # Marker writes may wait a request timeout for a leader that is gone; the next
        # coordinator of these ids writes them again, so they are not waited for.
        for task in list(self._tasks):
            task.cancel()
        await self.wait_idle()

    async def wait_idle(self) -> None:
        """Wait for background work (marker writes, completions, timeouts) started so far."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    @property
    def is_active(self) -> bool:
        return self._active

    def partition_for(self, transactional_id: str) -> int:
        return self.state_manager.partition_for(transactional_id)

    async def load_partition(
        self, partition: int, coordinator_epoch: int, records: ReplayRecords
    ) -> None:
        """Become the coordinator of a __transaction_state partition (this broker now leads it,
        at leader epoch ``coordinator_epoch``); transactions found prepared get their markers
        written and are completed."""
        prepared = await self.state_manager.load_partition(partition, coordinator_epoch, records)
        if prepared is None:
            return
        entry = self.state_manager.cache.get(partition)
        log.info(
            "loaded __transaction_state-%d at coordinator epoch %d: %d transactional ids, "
            "%d transactions to complete",
            partition,
            coordinator_epoch,
            len(entry.metadata) if entry is not None else 0,
            len(prepared),
        )
        now = self.clock.now_ms()
        for metadata in prepared:
            committed = metadata.state is _S.PREPARE_COMMIT
            transit = metadata.prepare_complete(now)
            self._spawn(self._complete(metadata, coordinator_epoch, committed, transit))

    def unload_partition(self, partition: int) -> None:
        """Stop coordinating a partition's transactional ids (this broker became a follower):
        marker writes in flight for them stop at their next round."""
        n = self.state_manager.unload_partition(partition)
        log.info("unloaded __transaction_state-%d: %d transactional ids", partition, n)

    # ================================================================== InitProducerId

    async def init_producer_id(
        self,
        transactional_id: str,
        transaction_timeout_ms: int,
        expected_producer_id: int = NO_PRODUCER_ID,
        expected_producer_epoch: int = NO_PRODUCER_EPOCH,
    ) -> InitProducerIdResult:
        """InitProducerId with a transactional id (KIP-98; KIP-360's expected id and epoch).

        A new id gets a producer id at epoch 0; a known one the next epoch, which fences its
        older producer. An ongoing transaction is aborted first, and the client is told
        CONCURRENT_TRANSACTIONS until that abort completes (it retries)."""
        return await self._shielded(
            self._init_producer_id(
                transactional_id,
                transaction_timeout_ms,
                expected_producer_id,
                expected_producer_epoch,
            )
        )

    async def _init_producer_id(
        self,
        transactional_id: str,
        transaction_timeout_ms: int,
        expected_producer_id: int,
        expected_producer_epoch: int,
    ) -> InitProducerIdResult:
        if not transactional_id:
            return InitProducerIdResult(ErrorCode.invalid_request)
        if not self._active:
            return InitProducerIdResult(ErrorCode.coordinator_not_available)
        if not self.state_manager.validate_transaction_timeout(transaction_timeout_ms):
            return InitProducerIdResult(ErrorCode.invalid_transaction_timeout)
        expected = (
            None
            if expected_producer_id == NO_PRODUCER_ID
            else (expected_producer_id, expected_producer_epoch)
        )
        state = self.state_manager.get_transaction_state(transactional_id)
        if isinstance(state, ErrorCode):
            return InitProducerIdResult(state)
        if state is None:
            try:
                producer_id = await self._generate_producer_id()
            except Exception as exc:
                log.error("cannot generate a producer id: %r", exc)
                return InitProducerIdResult(ErrorCode.coordinator_not_available)
            created = TransactionMetadata(
                transactional_id,
                producer_id,
                NO_PRODUCER_EPOCH,
                transaction_timeout_ms,
                _S.EMPTY,
                txn_last_update_timestamp_ms=self.clock.now_ms(),
            )
            put = self.state_manager.put_if_not_exists(created)
            if isinstance(put, ErrorCode):
                return InitProducerIdResult(put)
            state = put
        prepared = await self._prepare_init_producer_id(
            transactional_id, transaction_timeout_ms, state, expected
        )
        if isinstance(prepared, ErrorCode):
            return InitProducerIdResult(prepared)
        transit = prepared
        if transit.txn_state is _S.PREPARE_EPOCH_FENCE:
            error = await self._end_transaction(
                transactional_id,
                transit.producer_id,
                transit.producer_epoch,
                committed=False,
                from_client=False,
            )
            return InitProducerIdResult(
                ErrorCode.concurrent_transactions if error is ErrorCode.none else error
            )
        error = await self.state_manager.append_transaction_to_log(
            transactional_id, state.coordinator_epoch, transit
        )
        if error is not ErrorCode.none:
            return InitProducerIdResult(error)
        return InitProducerIdResult(ErrorCode.none, transit.producer_id, transit.producer_epoch)

    async def _prepare_init_producer_id(
        self,
        transactional_id: str,
        timeout_ms: int,
        state: CoordinatorEpochAndMetadata,
        expected: tuple[int, int] | None,
    ) -> TxnTransitMetadata | ErrorCode:
        metadata = state.metadata

        def valid_producer_id(pid: int, epoch: int) -> bool:
            # A just-created id, the current producer id, or a retry after its epoch ran out.
            return (
                metadata.producer_epoch == NO_PRODUCER_EPOCH
                or pid == metadata.producer_id
                or (pid == metadata.last_producer_id and epoch >= 2**15 - 2)
            )

        if metadata.pending_transition_in_progress:
            return ErrorCode.concurrent_transactions
        if expected is not None and not valid_producer_id(*expected):
            return ErrorCode.producer_fenced
        if metadata.state in (_S.PREPARE_ABORT, _S.PREPARE_COMMIT):
            return ErrorCode.concurrent_transactions
        if metadata.state in (_S.COMPLETE_ABORT, _S.COMPLETE_COMMIT, _S.EMPTY):
            if metadata.is_producer_epoch_exhausted and (
                expected is None or expected[1] == metadata.producer_epoch
            ):
                try:
                    new_id = await self._generate_producer_id()
                except Exception as exc:
                    log.error("cannot generate a producer id: %r", exc)
                    return ErrorCode.coordinator_not_available
                if metadata.pending_transition_in_progress:
                    return ErrorCode.concurrent_transactions
                return metadata.prepare_producer_id_rotation(
                    new_id, timeout_ms, self.clock.now_ms(), expected is not None
                )
            return metadata.prepare_increment_producer_epoch(
                timeout_ms, None if expected is None else expected[1], self.clock.now_ms()
            )
        if metadata.state is _S.ONGOING:
            return metadata.prepare_fence_producer_epoch()
        log.error("transactional id %s in state %s at InitProducerId", transactional_id, metadata)
        return ErrorCode.unknown_server_error

    # ================================================================== AddPartitionsToTxn

    async def add_partitions(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Iterable[TopicPartition],
    ) -> ErrorCode:
        """AddPartitionsToTxn (and AddOffsetsToTxn, with the group's __consumer_offsets
        partition): the transaction begins (Ongoing) or grows."""
        return await self._shielded(
            self._add_partitions(transactional_id, producer_id, producer_epoch, partitions)
        )

    async def _add_partitions(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Iterable[TopicPartition],
    ) -> ErrorCode:
        if not transactional_id:
            return ErrorCode.invalid_request
        if not self._active:
            return ErrorCode.coordinator_not_available
        added = {TopicPartition(*tp) for tp in partitions}
        state = self.state_manager.get_transaction_state(transactional_id)
        if isinstance(state, ErrorCode):
            return state
        if state is None:
            return ErrorCode.invalid_producer_id_mapping
        metadata = state.metadata
        if metadata.producer_id != producer_id:
            return ErrorCode.invalid_producer_id_mapping
        if metadata.producer_epoch != producer_epoch:
            return ErrorCode.producer_fenced
        if metadata.pending_transition_in_progress:
            return ErrorCode.concurrent_transactions
        if metadata.state in (_S.PREPARE_COMMIT, _S.PREPARE_ABORT):
            return ErrorCode.concurrent_transactions
        if metadata.state is _S.ONGOING and added <= metadata.topic_partitions:
            return ErrorCode.none
        transit = metadata.prepare_add_partitions(added, self.clock.now_ms())
        return await self.state_manager.append_transaction_to_log(
            transactional_id, state.coordinator_epoch, transit
        )

    def verify_partitions(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Iterable[TopicPartition],
    ) -> dict[TopicPartition, ErrorCode]:
        """AddPartitionsToTxn v4's verifyOnly (KIP-890): are these partitions in the ongoing
        transaction? TRANSACTION_ABORTABLE for those that are not, as Kafka 3.8+ answers (the
        partition's leader turns it into INVALID_TXN_STATE for older producers)."""
        tps = [TopicPartition(*tp) for tp in partitions]
        state = self.state_manager.get_transaction_state(transactional_id)
        if isinstance(state, ErrorCode):
            return dict.fromkeys(tps, state)
        if state is None or state.metadata.producer_id != producer_id:
            return dict.fromkeys(tps, ErrorCode.invalid_producer_id_mapping)
        metadata = state.metadata
        if metadata.producer_epoch != producer_epoch:
            return dict.fromkeys(tps, ErrorCode.producer_fenced)
        if metadata.state in (_S.PREPARE_COMMIT, _S.PREPARE_ABORT):
            return dict.fromkeys(tps, ErrorCode.concurrent_transactions)
        ongoing = metadata.state is _S.ONGOING
        return {
            tp: ErrorCode.none
            if ongoing and tp in metadata.topic_partitions
            else ErrorCode.transaction_abortable
            for tp in tps
        }

    # ================================================================== EndTxn

    async def end_transaction(
        self, transactional_id: str, producer_id: int, producer_epoch: int, committed: bool
    ) -> ErrorCode:
        """EndTxn from the client."""
        if not self._active:
            return ErrorCode.coordinator_not_available
        return await self._shielded(
            self._end_transaction(
                transactional_id, producer_id, producer_epoch, committed, from_client=True
            )
        )

    async def _end_transaction(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        committed: bool,
        from_client: bool,
    ) -> ErrorCode:
        if not transactional_id:
            return ErrorCode.invalid_request
        state = self.state_manager.get_transaction_state(transactional_id)
        if isinstance(state, ErrorCode):
            return state
        if state is None:
            return ErrorCode.invalid_producer_id_mapping
        metadata = state.metadata
        coordinator_epoch = state.coordinator_epoch
        is_epoch_fence = False
        if metadata.producer_id != producer_id:
            return ErrorCode.invalid_producer_id_mapping
        # Clients must send the current epoch; the coordinator's own abort (a fence) carries
        # the bumped one.
        if (from_client and producer_epoch != metadata.producer_epoch) or (
            producer_epoch < metadata.producer_epoch
        ):
            return ErrorCode.producer_fenced
        if (
            metadata.pending_transition_in_progress
            and metadata.pending_state is not _S.PREPARE_EPOCH_FENCE
        ):
            return ErrorCode.concurrent_transactions
        s = metadata.state
        if s is _S.ONGOING:
            next_state = _S.PREPARE_COMMIT if committed else _S.PREPARE_ABORT
            if next_state is _S.PREPARE_ABORT and metadata.pending_state is _S.PREPARE_EPOCH_FENCE:
                # The fence's epoch goes into the abort written to the log.
                is_epoch_fence = True
                metadata.pending_state = None
                metadata.producer_epoch = producer_epoch
                metadata.last_producer_epoch = NO_PRODUCER_EPOCH
            transit = metadata.prepare_abort_or_commit(next_state, self.clock.now_ms())
        elif s is _S.COMPLETE_COMMIT:
            return ErrorCode.none if committed else self._invalid_state(metadata, committed)
        elif s is _S.COMPLETE_ABORT:
            return ErrorCode.none if not committed else self._invalid_state(metadata, committed)
        elif s is _S.PREPARE_COMMIT:
            return (
                ErrorCode.concurrent_transactions
                if committed
                else self._invalid_state(metadata, committed)
            )
        elif s is _S.PREPARE_ABORT:
            return (
                ErrorCode.concurrent_transactions
                if not committed
                else self._invalid_state(metadata, committed)
            )
        else:
            if metadata.pending_state is _S.PREPARE_EPOCH_FENCE:
                metadata.pending_state = None
            return self._invalid_state(metadata, committed)

        error = await self.state_manager.append_transaction_to_log(
            transactional_id, coordinator_epoch, transit
        )
        if error is not ErrorCode.none:
            if is_epoch_fence:
                metadata.has_failed_epoch_fence = True
            return error
        # Durable: now the markers. The state is read again, as it may have moved meanwhile.
        state = self.state_manager.get_transaction_state(transactional_id)
        if not isinstance(state, CoordinatorEpochAndMetadata):
            return state if isinstance(state, ErrorCode) else ErrorCode.not_coordinator
        if state.coordinator_epoch != coordinator_epoch:
            return ErrorCode.not_coordinator
        metadata = state.metadata
        if metadata.producer_id != producer_id:
            return ErrorCode.invalid_producer_id_mapping
        if metadata.producer_epoch != producer_epoch:
            return ErrorCode.producer_fenced
        if metadata.pending_transition_in_progress:
            return ErrorCode.concurrent_transactions
        expected = _S.PREPARE_COMMIT if committed else _S.PREPARE_ABORT
        if metadata.state is not expected:
            return self._invalid_state(metadata, committed)
        complete = metadata.prepare_complete(self.clock.now_ms())
        self._spawn(self._complete(metadata, coordinator_epoch, committed, complete))
        return ErrorCode.none

    def _invalid_state(self, metadata: TransactionMetadata, committed: bool) -> ErrorCode:
        log.info(
            "EndTxn(%s) of %s in state %s: INVALID_TXN_STATE",
            "commit" if committed else "abort",
            metadata.transactional_id,
            metadata.state.kafka_name,
        )
        return ErrorCode.invalid_txn_state

    async def _complete(
        self,
        metadata: TransactionMetadata,
        coordinator_epoch: int,
        committed: bool,
        transit: TxnTransitMetadata,
    ) -> None:
        """Write the markers, then CompleteCommit/CompleteAbort (retried until it is durable
        or this broker stops coordinating the id)."""
        txn_id = metadata.transactional_id

        def still_coordinator() -> bool:
            state = self.state_manager.get_transaction_state(txn_id)
            return (
                self._active
                and isinstance(state, CoordinatorEpochAndMetadata)
                and state.coordinator_epoch == coordinator_epoch
                and state.metadata is metadata
            )

        entry = TxnMarkerEntry(
            metadata.producer_id,
            metadata.producer_epoch,
            coordinator_epoch,
            committed,
            tuple(sorted(metadata.topic_partitions)),
        )
        done = await write_txn_markers(
            self.markers,
            entry,
            still_coordinator,
            metadata.topic_partitions.discard,
            self.config.marker_retry_backoff_ms / 1000,
            self.config.request_timeout_ms / 1000,
        )
        if not done:
            return
        while still_coordinator():
            error = await self.state_manager.append_transaction_to_log(
                txn_id, coordinator_epoch, transit, keep_pending_on_error=True
            )
            if error is ErrorCode.none:
                log.debug("transaction of %s completed (%s)", txn_id, transit.txn_state.kafka_name)
                return
            if error in (ErrorCode.not_coordinator, ErrorCode.coordinator_load_in_progress):
                return
            await asyncio.sleep(self.config.marker_retry_backoff_ms / 1000)

    # ================================================================== timeouts

    async def abort_timed_out_transactions(self) -> int:
        """Abort every transaction left Ongoing past its transaction.timeout.ms, bumping the
        epoch so that its producer is fenced (Kafka's abortTimedOutTransactions)."""
        now = self.clock.now_ms()
        aborted = 0
        for metadata in self.state_manager.timed_out_transactions(now):
            if metadata.pending_transition_in_progress or metadata.state is not _S.ONGOING:
                continue
            transit = metadata.prepare_fence_producer_epoch()
            log.info(
                "aborting the transaction of %s (producer %d epoch %d): timed out after %d ms",
                metadata.transactional_id,
                metadata.producer_id,
                metadata.producer_epoch,
                metadata.txn_timeout_ms,
            )
            error = await self._end_transaction(
                metadata.transactional_id,
                transit.producer_id,
                transit.producer_epoch,
                committed=False,
                from_client=False,
            )
            if error is ErrorCode.none:
                aborted += 1
            else:
                log.info("abort of timed-out %s: %s", metadata.transactional_id, error.name)
        return aborted

    async def remove_expired_transactional_ids(self) -> int:
        """transactional.id.expiration.ms: forget ids with no transaction for that long."""
        removed = 0
        for metadata in self.state_manager.expired_transactional_ids(self.clock.now_ms()):
            state = self.state_manager.get_transaction_state(metadata.transactional_id)
            if not isinstance(state, CoordinatorEpochAndMetadata) or state.metadata is not metadata:
                continue
            transit = metadata.prepare_dead()
            error = await self.state_manager.append_transaction_to_log(
                metadata.transactional_id, state.coordinator_epoch, transit
            )
            if error is ErrorCode.none:
                removed += 1
        if removed:
            log.info("expired %d transactional ids (transactional.id.expiration.ms)", removed)
        return removed

    # ================================================================== admin

    def describe(self, transactional_id: str) -> TransactionDescription:
        if not self._active:
            return TransactionDescription(transactional_id, ErrorCode.coordinator_not_available)
        state = self.state_manager.get_transaction_state(transactional_id)
        if isinstance(state, ErrorCode):
            return TransactionDescription(transactional_id, state)
        if state is None:
            return TransactionDescription(transactional_id, ErrorCode.transactional_id_not_found)
        m = state.metadata
        return TransactionDescription(
            transactional_id,
            ErrorCode.none,
            m.state.kafka_name,
            m.txn_timeout_ms,
            m.txn_start_timestamp_ms,
            m.producer_id,
            m.producer_epoch,
            tuple(sorted(m.topic_partitions)),
        )

    def list_transactions(
        self,
        states: Iterable[str] = (),
        producer_ids: Iterable[int] = (),
        min_duration_ms: int = -1,
    ) -> ListTransactionsResult:
        """ListTransactions of the ids this broker coordinates; empty filters match all."""
        if not self._active:
            return ListTransactionsResult(ErrorCode.coordinator_not_available)
        if self.state_manager.is_loading():
            return ListTransactionsResult(ErrorCode.coordinator_load_in_progress)
        wanted_states: set[TransactionState] = set()
        unknown: list[str] = []
        for name in states:
            s = TransactionState.from_kafka_name(name)
            if s is None:
                unknown.append(name)
            else:
                wanted_states.add(s)
        wanted_pids = set(producer_ids)
        now = self.clock.now_ms()
        out = []
        for m in sorted(self.state_manager.all_transactions(), key=lambda m: m.transactional_id):
            if states and m.state not in wanted_states:
                continue
            if wanted_pids and m.producer_id not in wanted_pids:
                continue
            # KIP-994: running longer than the filter (Kafka compares the start timestamp,
            # whatever the state).
            if min_duration_ms >= 0 and now - m.txn_start_timestamp_ms <= min_duration_ms:
                continue
            out.append(TransactionListing(m.transactional_id, m.producer_id, m.state.kafka_name))
        return ListTransactionsResult(ErrorCode.none, tuple(unknown), tuple(out))

    # ================================================================== helpers

    async def _shielded(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run a request's work to its end even if its client goes away: a transition left
        pending, or a decision written without its markers, would hold the transactional id
        in CONCURRENT_TRANSACTIONS for good."""
        task: asyncio.Task[T] = self._spawn(coro)
        return await asyncio.shield(task)

    def _spawn(self, coro: Awaitable[Any]) -> asyncio.Task[Any]:
        task: asyncio.Task[Any] = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._task_done)
        return task

    def _task_done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("transaction coordinator task failed", exc_info=task.exception())
