"""InitProducerId with a transactional id (Kafka's handleInitProducerId, KIP-98 and KIP-360):
a new id gets a producer id at epoch 0, a known idle one its next epoch (or a new producer id
once the epoch is spent), and an ongoing transaction is first aborted under a bumped epoch,
which fences its producer.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from samsa.coordinator.transaction.end_txn import end_transaction
from samsa.coordinator.transaction.metadata import (
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    TransactionMetadata,
    TransactionState,
    TxnTransitMetadata,
)
from samsa.coordinator.transaction.results import InitProducerIdResult
from samsa.coordinator.transaction.state_manager import CoordinatorEpochAndMetadata
from samsa.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from samsa.coordinator.transaction.coordinator import TransactionCoordinator

log = logging.getLogger(__name__)

_S = TransactionState


async def handle_init_producer_id(
    coordinator: TransactionCoordinator,
    transactional_id: str,
    transaction_timeout_ms: int,
    expected_producer_id: int,
    expected_producer_epoch: int,
) -> InitProducerIdResult:
    if not transactional_id:
        return InitProducerIdResult(ErrorCode.invalid_request)
    if not coordinator.is_active:
        return InitProducerIdResult(ErrorCode.coordinator_not_available)
    if not coordinator.state_manager.validate_transaction_timeout(transaction_timeout_ms):
        return InitProducerIdResult(ErrorCode.invalid_transaction_timeout)
    expected = (
        None
        if expected_producer_id == NO_PRODUCER_ID
        else (expected_producer_id, expected_producer_epoch)
    )
    state = coordinator.state_manager.get_transaction_state(transactional_id)
    if isinstance(state, ErrorCode):
        return InitProducerIdResult(state)
    if state is None:
        try:
            producer_id = await coordinator.generate_producer_id()
        except Exception as exc:
            log.error("cannot generate a producer id: %r", exc)
            return InitProducerIdResult(ErrorCode.coordinator_not_available)
        created = TransactionMetadata(
            transactional_id,
            producer_id,
            NO_PRODUCER_EPOCH,
            transaction_timeout_ms,
            _S.EMPTY,
            txn_last_update_timestamp_ms=coordinator.clock.now_ms(),
        )
        put = coordinator.state_manager.put_if_not_exists(created)
        if isinstance(put, ErrorCode):
            return InitProducerIdResult(put)
        state = put
    prepared = await _prepare_init_producer_id(
        coordinator, transactional_id, transaction_timeout_ms, state, expected
    )
    if isinstance(prepared, ErrorCode):
        return InitProducerIdResult(prepared)
    transit = prepared
    if transit.txn_state is _S.PREPARE_EPOCH_FENCE:
        error = await end_transaction(
            coordinator,
            transactional_id,
            transit.producer_id,
            transit.producer_epoch,
            committed=False,
            from_client=False,
        )
        return InitProducerIdResult(
            ErrorCode.concurrent_transactions if error is ErrorCode.none else error
        )
    error = await coordinator.state_manager.append_transaction_to_log(
        transactional_id, state.coordinator_epoch, transit
    )
    if error is not ErrorCode.none:
        return InitProducerIdResult(error)
    return InitProducerIdResult(ErrorCode.none, transit.producer_id, transit.producer_epoch)


async def _prepare_init_producer_id(
    coordinator: TransactionCoordinator,
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
                new_id = await coordinator.generate_producer_id()
            except Exception as exc:
                log.error("cannot generate a producer id: %r", exc)
                return ErrorCode.coordinator_not_available
            if metadata.pending_transition_in_progress:
                return ErrorCode.concurrent_transactions
            return metadata.prepare_producer_id_rotation(
                new_id, timeout_ms, coordinator.clock.now_ms(), expected is not None
            )
        return metadata.prepare_increment_producer_epoch(
            timeout_ms, None if expected is None else expected[1], coordinator.clock.now_ms()
        )
    if metadata.state is _S.ONGOING:
        return metadata.prepare_fence_producer_epoch()
    log.error("transactional id %s in state %s at InitProducerId", transactional_id, metadata)
    return ErrorCode.unknown_server_error
