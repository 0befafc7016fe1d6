"""AddPartitionsToTxn (Kafka's handleAddPartitionsToTransaction; AddOffsetsToTxn comes through
it with the group's __consumer_offsets partition): the transaction begins (Ongoing) or grows;
and its verifyOnly form (KIP-890), which asks whether partitions are in the transaction.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from samsa.coordinator.transaction.metadata import TransactionState
from samsa.metadata.model import TopicPartition
from samsa.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from samsa.coordinator.transaction.coordinator import TransactionCoordinator

_S = TransactionState


async def handle_add_partitions(
    coordinator: TransactionCoordinator,
    transactional_id: str,
    producer_id: int,
    producer_epoch: int,
    partitions: Iterable[TopicPartition],
) -> ErrorCode:
    if not transactional_id:
        return ErrorCode.invalid_request
    if not coordinator.is_active:
        return ErrorCode.coordinator_not_available
    added = {TopicPartition(*tp) for tp in partitions}
    state = coordinator.state_manager.get_transaction_state(transactional_id)
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
    transit = metadata.prepare_add_partitions(added, coordinator.clock.now_ms())
    return await coordinator.state_manager.append_transaction_to_log(
        transactional_id, state.coordinator_epoch, transit
    )


def handle_verify_partitions(
    coordinator: TransactionCoordinator,
    transactional_id: str,
    producer_id: int,
    producer_epoch: int,
    partitions: Iterable[TopicPartition],
) -> dict[TopicPartition, ErrorCode]:
    """Kafka's handleVerifyPartitionsInTransaction: the error of each partition, none if it is
    in the ongoing transaction (``TransactionCoordinator.verify_partitions``)."""
    tps = [TopicPartition(*tp) for tp in partitions]
    state = coordinator.state_manager.get_transaction_state(transactional_id)
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
