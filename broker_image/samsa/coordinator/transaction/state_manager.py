"""The transactions of the __transaction_state partitions this broker leads (Kafka's
TransactionStateManager): the cache of TransactionMetadata per partition with the coordinator
epoch it was loaded at, which partitions are loading, replaying a partition, and writing a
prepared transition to the log before it takes effect.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Protocol

from samsa.coordinator.group_records import RecordFormatError
from samsa.coordinator.group_store import Record, storage_error_code
from samsa.coordinator.offsets_topic import partition_for
from samsa.coordinator.transaction.config import TransactionConfig
from samsa.coordinator.transaction.metadata import (
    TransactionMetadata,
    TransactionState,
    TxnTransitMetadata,
)
from samsa.coordinator.transaction.transaction_log import read_record, transaction_record
from samsa.protocol.errors import ErrorCode

log = logging.getLogger(__name__)

_LOAD_YIELD_EVERY = 1000

ReplayRecords = Iterable[Record] | AsyncIterable[Record]


class TransactionStore(Protocol):
    async def append(self, partition: int, records: list[Record]) -> None:
        """As ``GroupStore.append``: durable on every in-sync replica, or raise."""
        ...


@dataclass
class TxnCacheEntry:
    """A loaded partition: the coordinator epoch (its leader epoch when loaded) and its ids."""

    coordinator_epoch: int
    metadata: dict[str, TransactionMetadata] = field(default_factory=dict)


@dataclass(frozen=True)
class CoordinatorEpochAndMetadata:
    coordinator_epoch: int
    metadata: TransactionMetadata


def coordinator_error(code: ErrorCode) -> ErrorCode:
    """Kafka's mapping of a log append error to the coordinator's (appendTransactionToLog)."""
    if code in (
        ErrorCode.unknown_topic_or_partition,
        ErrorCode.not_enough_replicas,
        ErrorCode.not_enough_replicas_after_append,
        ErrorCode.request_timed_out,
    ):
        return ErrorCode.coordinator_not_available
    if code in (ErrorCode.not_leader_or_follower, ErrorCode.kafka_storage_error):
        return ErrorCode.not_coordinator
    if code in (ErrorCode.message_too_large, ErrorCode.record_list_too_large):
        return ErrorCode.unknown_server_error
    return code


class TransactionStateManager:
    def __init__(
        self, config: TransactionConfig, store: TransactionStore, now_ms: Callable[[], int]
    ) -> None:
        self.config = config
        self.store = store
        self.now_ms = now_ms
        self.cache: dict[int, TxnCacheEntry] = {}
        # partition -> token of the load in progress (an unload drops it: the load is stale).
        self.loading: dict[int, object] = {}

    def partition_for(self, transactional_id: str) -> int:
        """Kafka's ``partitionFor``: the same hash as a group's __consumer_offsets partition."""
        return partition_for(transactional_id, self.config.transaction_state_log_num_partitions)

    def validate_transaction_timeout(self, timeout_ms: int) -> bool:
        return 0 < timeout_ms <= self.config.transaction_max_timeout_ms

    def is_loading(self) -> bool:
        return bool(self.loading)

    # ------------------------------------------------------------------ lookups

    def get_transaction_state(
        self, transactional_id: str
    ) -> ErrorCode | CoordinatorEpochAndMetadata | None:
        """The id's metadata; None if this coordinator has none; an error if it is not (yet)
        this id's coordinator."""
        partition = self.partition_for(transactional_id)
        if partition in self.loading:
            return ErrorCode.coordinator_load_in_progress
        entry = self.cache.get(partition)
        if entry is None:
            return ErrorCode.not_coordinator
        metadata = entry.metadata.get(transactional_id)
        if metadata is None:
            return None
        return CoordinatorEpochAndMetadata(entry.coordinator_epoch, metadata)

    def put_if_not_exists(
        self, metadata: TransactionMetadata
    ) -> ErrorCode | CoordinatorEpochAndMetadata:
        partition = self.partition_for(metadata.transactional_id)
        if partition in self.loading:
            return ErrorCode.coordinator_load_in_progress
        entry = self.cache.get(partition)
        if entry is None:
            return ErrorCode.not_coordinator
        current = entry.metadata.setdefault(metadata.transactional_id, metadata)
        return CoordinatorEpochAndMetadata(entry.coordinator_epoch, current)

    def all_transactions(self) -> list[TransactionMetadata]:
        return [m for entry in self.cache.values() for m in entry.metadata.values()]

    def timed_out_transactions(self, now_ms: int) -> list[TransactionMetadata]:
        """Ongoing transactions past their timeout with no transition in progress."""
        return [
            m
            for m in self.all_transactions()
            if m.state is TransactionState.ONGOING
            and not m.pending_transition_in_progress
            and m.txn_start_timestamp_ms + m.txn_timeout_ms < now_ms
        ]

    def expired_transactional_ids(self, now_ms: int) -> list[TransactionMetadata]:
        """Idle ids not used for transactional.id.expiration.ms."""
        idle = (
            TransactionState.EMPTY,
            TransactionState.COMPLETE_COMMIT,
            TransactionState.COMPLETE_ABORT,
        )
        return [
            m
            for m in self.all_transactions()
            if m.state in idle
            and not m.pending_transition_in_progress
            and m.txn_last_update_timestamp_ms + self.config.transactional_id_expiration_ms
            <= now_ms
        ]

    # ------------------------------------------------------------------ writes

    async def append_transaction_to_log(
        self,
        transactional_id: str,
        coordinator_epoch: int,
        transit: TxnTransitMetadata,
        keep_pending_on_error: bool = False,
    ) -> ErrorCode:
        """Write a prepared transition and, once durable, complete it in the cache.

        On failure the pending state is dropped, so the client may try again, unless
        ``keep_pending_on_error`` (the coordinator retries the write itself)."""
        state = self.get_transaction_state(transactional_id)
        if not isinstance(state, CoordinatorEpochAndMetadata):
            return state if isinstance(state, ErrorCode) else ErrorCode.not_coordinator
        if state.coordinator_epoch != coordinator_epoch:
            return ErrorCode.not_coordinator
        record = transaction_record(transactional_id, transit)
        error = ErrorCode.none
        try:
            await self.store.append(self.partition_for(transactional_id), [record])
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            error = coordinator_error(storage_error_code(exc))
            log.warning(
                "writing %s of transactional id %s failed: %s (%r)",
                transit.txn_state.kafka_name,
                transactional_id,
                error.name,
                exc,
            )
        state = self.get_transaction_state(transactional_id)
        if not isinstance(state, CoordinatorEpochAndMetadata):
            return state if isinstance(state, ErrorCode) else ErrorCode.not_coordinator
        if state.coordinator_epoch != coordinator_epoch:
            # The partition moved away and came back while we wrote: the client must find
            # its coordinator again.
            return ErrorCode.not_coordinator
        metadata = state.metadata
        if error is not ErrorCode.none:
            if not keep_pending_on_error:
                metadata.pending_state = None
            return error
        metadata.complete_transition(transit)
        if transit.txn_state is TransactionState.DEAD:
            entry = self.cache.get(self.partition_for(transactional_id))
            if entry is not None and entry.metadata.get(transactional_id) is metadata:
                del entry.metadata[transactional_id]
        return ErrorCode.none

    # ------------------------------------------------------------------ load / unload

    async def load_partition(
        self, partition: int, coordinator_epoch: int, records: ReplayRecords
    ) -> list[TransactionMetadata] | None:
        """Replay a partition, then serve it; returns the transactions found in
        PrepareCommit/PrepareAbort (their markers must be written again). None if it was
        unloaded meanwhile. Requests for its ids get COORDINATOR_LOAD_IN_PROGRESS until then."""
        token = object()
        self.loading[partition] = token
        self.cache.pop(partition, None)
        loaded: dict[str, TransactionMetadata] = {}
        count = 0

        def apply(key: bytes, value: bytes | None) -> None:
            try:
                record = read_record(key, value)
            except (RecordFormatError, ValueError) as exc:
                log.warning(
                    "__transaction_state-%d: skipping an unreadable record: %s", partition, exc
                )
                return
            if record is None:
                log.warning("__transaction_state-%d: skipping an unknown key", partition)
                return
            txn_id, metadata = record
            if metadata is None:
                loaded.pop(txn_id, None)
            else:
                loaded[txn_id] = metadata

        try:
            if isinstance(records, AsyncIterable):
                async for item in records:
                    apply(*item)
                    if self.loading.get(partition) is not token:
                        return None
            else:
                for item in records:
                    apply(*item)
                    count += 1
                    if count % _LOAD_YIELD_EVERY == 0:
                        await asyncio.sleep(0)
                        if self.loading.get(partition) is not token:
                            return None
        except BaseException:
            if self.loading.get(partition) is token:
                del self.loading[partition]
            raise
        if self.loading.get(partition) is not token:
            return None
        del self.loading[partition]
        self.cache[partition] = TxnCacheEntry(coordinator_epoch, loaded)
        return [
            m
            for m in loaded.values()
            if m.state in (TransactionState.PREPARE_COMMIT, TransactionState.PREPARE_ABORT)
        ]

    def unload_partition(self, partition: int) -> int:
        """Stop coordinating a partition's ids (this broker no longer leads it)."""
        self.loading.pop(partition, None)
        entry = self.cache.pop(partition, None)
        return len(entry.metadata) if entry is not None else 0
