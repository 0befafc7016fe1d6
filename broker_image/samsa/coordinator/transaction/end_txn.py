"""EndTxn and the markers (Kafka's endTransaction and the completion after its markers): the
decision, PrepareCommit or PrepareAbort, is written first and the client answered; then the
markers go to every partition of the transaction, in the background, and CompleteCommit or
CompleteAbort is written. Until then the transactional id's next request gets
CONCURRENT_TRANSACTIONS. The coordinator's own aborts (a fence at InitProducerId, a timeout)
come through here too, with the bumped epoch.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from samsa.coordinator.transaction.markers import TxnMarkerEntry, write_txn_markers
from samsa.coordinator.transaction.metadata import (
    NO_PRODUCER_EPOCH,
    TransactionMetadata,
    TransactionState,
    TxnTransitMetadata,
)
from samsa.coordinator.transaction.state_manager import CoordinatorEpochAndMetadata
from samsa.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from samsa.coordinator.transaction.coordinator import TransactionCoordinator

log = logging.getLogger(__name__)

_S = TransactionState


async def end_transaction(
    coordinator: TransactionCoordinator,
    transactional_id: str,
    producer_id: int,
    producer_epoch: int,
    committed: bool,
    from_client: bool,
) -> ErrorCode:
    """Commit or abort the transaction; answered once the decision is durable. A client
    (``from_client``) must send the current epoch, the coordinator's own abort the bumped one."""
    if not transactional_id:
        return ErrorCode.invalid_request
    state = coordinator.state_manager.get_transaction_state(transactional_id)
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
        transit = metadata.prepare_abort_or_commit(next_state, coordinator.clock.now_ms())
    elif s is _S.COMPLETE_COMMIT:
        return ErrorCode.none if committed else _invalid_state(metadata, committed)
    elif s is _S.COMPLETE_ABORT:
        return ErrorCode.none if not committed else _invalid_state(metadata, committed)
    elif s is _S.PREPARE_COMMIT:
        return (
            ErrorCode.concurrent_transactions if committed else _invalid_state(metadata, committed)
        )
    elif s is _S.PREPARE_ABORT:
        return (
            ErrorCode.concurrent_transactions
            if not committed
            else _invalid_state(metadata, committed)
        )
    else:
        if metadata.pending_state is _S.PREPARE_EPOCH_FENCE:
            metadata.pending_state = None
        return _invalid_state(metadata, committed)

    error = await coordinator.state_manager.append_transaction_to_log(
        transactional_id, coordinator_epoch, transit
    )
    if error is not ErrorCode.none:
        if is_epoch_fence:
            metadata.has_failed_epoch_fence = True
        return error
    # Durable: now the markers. The state is read again, as it may have moved meanwhile.
    state = coordinator.state_manager.get_transaction_state(transactional_id)
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
        return _invalid_state(metadata, committed)
    complete = metadata.prepare_complete(coordinator.clock.now_ms())
    coordinator.spawn(
        complete_transaction(coordinator, metadata, coordinator_epoch, committed, complete)
    )
    return ErrorCode.none


async def complete_transaction(
    coordinator: TransactionCoordinator,
    metadata: TransactionMetadata,
    coordinator_epoch: int,
    committed: bool,
    transit: TxnTransitMetadata,
) -> None:
    """Write the markers, then CompleteCommit/CompleteAbort (retried until it is durable
    or this broker stops coordinating the id)."""
    txn_id = metadata.transactional_id

    def still_coordinator() -> bool:
        state = coordinator.state_manager.get_transaction_state(txn_id)
        return (
            coordinator.is_active
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
        coordinator.markers,
        entry,
        still_coordinator,
        metadata.topic_partitions.discard,
        coordinator.config.marker_retry_backoff_ms / 1000,
        coordinator.config.request_timeout_ms / 1000,
    )
    if not done:
        return
    while still_coordinator():
        error = await coordinator.state_manager.append_transaction_to_log(
            txn_id, coordinator_epoch, transit, keep_pending_on_error=True
        )
        if error is ErrorCode.none:
            log.debug("transaction of %s completed (%s)", txn_id, transit.txn_state.kafka_name)
            return
        if error in (ErrorCode.not_coordinator, ErrorCode.coordinator_load_in_progress):
            return
        await asyncio.sleep(coordinator.config.marker_retry_backoff_ms / 1000)


def _invalid_state(metadata: TransactionMetadata, committed: bool) -> ErrorCode:
    log.info(
        "EndTxn(%s) of %s in state %s: INVALID_TXN_STATE",
        "commit" if committed else "abort",
        metadata.transactional_id,
        metadata.state.kafka_name,
    )
    return ErrorCode.invalid_txn_state
