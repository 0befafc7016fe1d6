"""The transaction coordinator's periodic jobs (Kafka's abortTimedOutTransactions and
removeExpiredTransactionalIds): transactions left Ongoing past transaction.timeout.ms are
aborted under a bumped epoch, which fences their producer, and transactional ids idle for
transactional.id.expiration.ms are forgotten (a tombstone is written).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from samsa.coordinator.transaction.end_txn import end_transaction
from samsa.coordinator.transaction.metadata import TransactionState
from samsa.coordinator.transaction.state_manager import CoordinatorEpochAndMetadata
from samsa.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from samsa.coordinator.transaction.coordinator import TransactionCoordinator

log = logging.getLogger(__name__)

_S = TransactionState


async def abort_timed_out_transactions(coordinator: TransactionCoordinator) -> int:
    """Abort every transaction left Ongoing past its transaction.timeout.ms, bumping the
    epoch so that its producer is fenced (Kafka's abortTimedOutTransactions)."""
    now = coordinator.clock.now_ms()
    aborted = 0
    for metadata in coordinator.state_manager.timed_out_transactions(now):
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
        error = await end_transaction(
            coordinator,
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


async def remove_expired_transactional_ids(coordinator: TransactionCoordinator) -> int:
    """transactional.id.expiration.ms: forget ids with no transaction for that long."""
    removed = 0
    for metadata in coordinator.state_manager.expired_transactional_ids(coordinator.clock.now_ms()):
        state = coordinator.state_manager.get_transaction_state(metadata.transactional_id)
        if not isinstance(state, CoordinatorEpochAndMetadata) or state.metadata is not metadata:
            continue
        transit = metadata.prepare_dead()
        error = await coordinator.state_manager.append_transaction_to_log(
            metadata.transactional_id, state.coordinator_epoch, transit
        )
        if error is ErrorCode.none:
            removed += 1
    if removed:
        log.info("expired %d transactional ids (transactional.id.expiration.ms)", removed)
    return removed
