"""Transaction partition verification (KIP-890 part 1): which partitions of a Produce ask the
transaction coordinator first, and how its answer becomes the partition's Produce error.

A leader that gets the first transactional batch of a producer's transaction on a partition
(the producer has no transaction ongoing there at that epoch) asks the coordinator, with
AddPartitionsToTxn v4's verify-only form, whether the partition was added to the transaction;
one that was not is refused and nothing is appended, so a hanging transaction cannot begin
on a partition the coordinator will never write a marker to. The mapping is Kafka's
(AddPartitionsToTxnManager and ReplicaManager.appendRecords, 3.8+).
"""

from __future__ import annotations

import struct
from collections.abc import Awaitable, Callable

from samsa.metadata import TopicPartition
from samsa.protocol.errors import ErrorCode
from samsa.protocol.record_batch import (
    ATTRIBUTES_OFFSET,
    PRODUCER_EPOCH_OFFSET,
    PRODUCER_ID_OFFSET,
    TRANSACTIONAL_MASK,
)
from samsa.replica import ReplicaManager

# (transactional id, producer id, producer epoch, partitions) -> each partition's coordinator
# answer (NONE for the verified ones).
VerifyTransaction = Callable[
    [str, int, int, list[TopicPartition]], Awaitable[dict[TopicPartition, ErrorCode]]
]

# The last Produce version whose clients do not know TRANSACTION_ABORTABLE (Kafka's
# DEFAULT_ERROR operation): they get INVALID_TXN_STATE instead.
LAST_DEFAULT_ERROR_PRODUCE_VERSION = 10
NOT_ADDED = "Partition was not added to the transaction"
# Retriable coordinator errors older clients may not retry on a Produce: Kafka answers
# NOT_ENOUGH_REPLICAS, which they retry without refreshing metadata.
_RETRIABLE = frozenset(
    {
        ErrorCode.network_exception,
        ErrorCode.coordinator_load_in_progress,
        ErrorCode.coordinator_not_available,
        ErrorCode.not_coordinator,
        ErrorCode.concurrent_transactions,
    }
)
_PID = struct.Struct(">qh")


def transactional_producer(records: bytes | memoryview | None) -> tuple[int, int] | None:
    """(producer id, epoch) of a transactional first batch, else None."""
    if records is None or len(records) < PRODUCER_EPOCH_OFFSET + 2:
        return None
    if not records[ATTRIBUTES_OFFSET + 1] & TRANSACTIONAL_MASK:
        return None
    pid, epoch = _PID.unpack_from(records, PRODUCER_ID_OFFSET)
    return pid, epoch


def needs_verification(
    replica_manager: ReplicaManager, tp: TopicPartition, producer_id: int, producer_epoch: int
) -> bool:
    """Kafka's UnifiedLog.hasOngoingTransaction, negated, on a partition led here: a
    partition this broker does not lead gets its error from the append itself."""
    partition = replica_manager.get_partition(tp)
    if partition is None or not partition.is_leader:
        return False
    state = partition.log.producer_state
    if producer_id in state.ongoing_txns:
        entry = state.last_entry(producer_id)
        return entry is None or entry.producer_epoch != producer_epoch
    return True


def produce_error(code: ErrorCode, produce_version: int) -> tuple[ErrorCode, str | None]:
    """The Produce partition error (and message) for a coordinator's verification answer."""
    if code is ErrorCode.producer_fenced:
        code = ErrorCode.invalid_producer_epoch
    elif (
        code is ErrorCode.transaction_abortable
        and produce_version <= LAST_DEFAULT_ERROR_PRODUCE_VERSION
    ):
        code = ErrorCode.invalid_txn_state
    if code in _RETRIABLE:
        return (
            ErrorCode.not_enough_replicas,
            "Unable to verify the partition has been added to the transaction. "
            f"Underlying error: {code.name.upper()}",
        )
    if code is ErrorCode.invalid_txn_state:
        return code, NOT_ADDED
    return code, None


def refusals(
    answers: dict[TopicPartition, ErrorCode], produce_version: int
) -> dict[TopicPartition, tuple[ErrorCode, str | None]]:
    """The partitions the coordinator did not verify, with their Produce errors."""
    return {
        tp: produce_error(code, produce_version)
        for tp, code in answers.items()
        if code is not ErrorCode.none
    }
