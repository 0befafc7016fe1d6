"""The transaction coordinator's API (Kafka's TransactionCoordinator): InitProducerId with a
transactional id, AddPartitionsToTxn (and AddOffsetsToTxn through it), EndTxn, the abort of
timed-out transactions, DescribeTransactions and ListTransactions, and becoming and ceasing to
be the coordinator of a __transaction_state partition.

Every state change is prepared synchronously on the event loop, written to the log, and only
then completed; a client is answered once its transition is durable. EndTxn is answered once
PrepareCommit/PrepareAbort is durable: the markers are written afterwards, in the background,
and the transaction then completes (CompleteCommit/CompleteAbort). Until it has, the
transactional id's next request gets CONCURRENT_TRANSACTIONS.

This module holds the lifecycle, the entry points (each request's work runs to its end, shielded
from a client that goes away) and DescribeTransactions and ListTransactions; each request's
steps are in ``init_producer_id``, ``add_partitions`` and ``end_txn`` (with the markers'
completion), the periodic jobs in ``timeouts``, and the storage in ``state_manager``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Coroutine, Iterable
from typing import Any, TypeVar

from samsa.coordinator.timers import AsyncioClock, Clock, TimerHandle
from samsa.coordinator.transaction import end_txn, timeouts
from samsa.coordinator.transaction.add_partitions import (
    handle_add_partitions,
    handle_verify_partitions,
)
from samsa.coordinator.transaction.config import TransactionConfig
from samsa.coordinator.transaction.init_producer_id import handle_init_producer_id
from samsa.coordinator.transaction.markers import MarkerWriter
from samsa.coordinator.transaction.metadata import (
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    TransactionState,
)
from samsa.coordinator.transaction.results import (
    InitProducerIdResult,
    ListTransactionsResult,
    TransactionDescription,
    TransactionListing,
)
from samsa.coordinator.transaction.state_manager import (
    ReplayRecords,
    TransactionStateManager,
    TransactionStore,
)
from samsa.metadata.model import TopicPartition
from samsa.protocol.errors import ErrorCode

log = logging.getLogger(__name__)

T = TypeVar("T")

_S = TransactionState


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
        self.generate_producer_id = generate_producer_id
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
                self.spawn(job())
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
            self.spawn(
                end_txn.complete_transaction(self, metadata, coordinator_epoch, committed, transit)
            )

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
            handle_init_producer_id(
                self,
                transactional_id,
                transaction_timeout_ms,
                expected_producer_id,
                expected_producer_epoch,
            )
        )

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
            handle_add_partitions(self, transactional_id, producer_id, producer_epoch, partitions)
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
        return handle_verify_partitions(
            self, transactional_id, producer_id, producer_epoch, partitions
        )

    # ================================================================== EndTxn

    async def end_transaction(
        self, transactional_id: str, producer_id: int, producer_epoch: int, committed: bool
    ) -> ErrorCode:
        """EndTxn from the client."""
        if not self._active:
            return ErrorCode.coordinator_not_available
        return await self._shielded(
            end_txn.end_transaction(
                self, transactional_id, producer_id, producer_epoch, committed, from_client=True
            )
        )

    # ================================================================== timeouts

    async def abort_timed_out_transactions(self) -> int:
        """Abort every transaction left Ongoing past its transaction.timeout.ms, fencing its
        producer (``timeouts``); returns how many."""
        return await timeouts.abort_timed_out_transactions(self)

    async def remove_expired_transactional_ids(self) -> int:
        """Forget ids idle for transactional.id.expiration.ms (``timeouts``); returns how many."""
        return await timeouts.remove_expired_transactional_ids(self)

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
        task: asyncio.Task[T] = self.spawn(coro)
        return await asyncio.shield(task)

    def spawn(self, coro: Awaitable[Any]) -> asyncio.Task[Any]:
        task: asyncio.Task[Any] = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._task_done)
        return task

    def _task_done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("transaction coordinator task failed", exc_info=task.exception())
