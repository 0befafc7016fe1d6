"""Idempotent producers' state in one partition: Kafka's ProducerStateEntry and
ProducerAppendInfo, and the checks a leader makes before it appends.

For each producer id the partition remembers its epoch and the metadata of its last five
batches (first and last sequence, last offset, offset delta, max timestamp).  Before a leader
writes anything, every batch of the request is checked against it:

- a batch with the sequence range of one of those five is a retry of a batch already
  appended: it is answered with the offset it got then and is not appended again;
- an epoch older than the producer's is INVALID_PRODUCER_EPOCH (Kafka 2.7+; older brokers
  said PRODUCER_FENCED);
- a new epoch must start at sequence 0, and within an epoch each batch must follow the last
  one: otherwise OUT_OF_ORDER_SEQUENCE_NUMBER;
- a producer the partition has no state for (new, or expired) may start at any sequence
  (KIP-360, Kafka 2.5+): brokers no longer answer UNKNOWN_PRODUCER_ID on produce.

Transactions (KIP-98): a producer's first transactional batch opens its ongoing transaction
at that batch's offset; a non-transactional batch while one is open is INVALID_TXN_STATE.
A transaction marker (a control batch, written by the leader for WriteTxnMarkers) closes it:
an epoch older than the producer's is INVALID_PRODUCER_EPOCH, a coordinator epoch older
than the last marker's is TRANSACTION_COORDINATOR_FENCED, and no sequence is checked.

Replicated batches, and batches replayed from the log on recovery, update the state without
these checks: the leader made them.  Pure logic: no I/O here (see producer_snapshot for the
files, producer_state_manager for the whole partition).
"""

from __future__ import annotations

import enum
import logging
from collections import deque
from collections.abc import Iterable
from typing import NamedTuple

from samsa.protocol.errors import ErrorCode, KafkaApiError

log = logging.getLogger(__name__)

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_TIMESTAMP = -1
# Kafka's ProducerStateEntry.NUM_BATCHES_TO_RETAIN: a producer has at most five requests in
# flight per partition, so any retry it sends is one of its last five batches.
NUM_BATCHES_TO_RETAIN = 5
INT32_MAX = 2**31 - 1


class InvalidProducerEpochError(KafkaApiError):
    """A batch from an epoch older than the producer's current one."""

    def __init__(self, message: str) -> None:
        super().__init__(ErrorCode.invalid_producer_epoch, message)


class OutOfOrderSequenceError(KafkaApiError):
    """A batch whose first sequence does not follow the producer's last one."""

    def __init__(self, message: str) -> None:
        super().__init__(ErrorCode.out_of_order_sequence_number, message)


class InvalidTxnStateError(KafkaApiError):
    """A non-transactional batch from a producer with a transaction open."""

    def __init__(self, message: str) -> None:
        super().__init__(ErrorCode.invalid_txn_state, message)


class TransactionCoordinatorFencedError(KafkaApiError):
    """A marker from a coordinator epoch older than the producer's last marker's."""

    def __init__(self, message: str) -> None:
        super().__init__(ErrorCode.transaction_coordinator_fenced, message)


class InvalidProducerRecordError(KafkaApiError):
    """A batch with a producer id but no sequence number (Kafka's LogValidator rule)."""

    def __init__(self, message: str) -> None:
        super().__init__(ErrorCode.invalid_record, message)


class AppendOrigin(enum.Enum):
    """Who is appending decides how much is checked (Kafka's AppendOrigin)."""

    CLIENT = "client"  # a produce request to the leader: epoch and sequence checked
    COORDINATOR = "coordinator"  # a transaction marker: epochs checked, no sequence
    REPLICATION = "replication"  # a follower, or recovery replaying the log: taken as is


def increment_sequence(sequence: int, increment: int) -> int:
    """Sequences wrap from INT32_MAX to 0 (Kafka's DefaultRecordBatch.incrementSequence)."""
    if sequence > INT32_MAX - increment:
        return increment - (INT32_MAX - sequence) - 1
    return sequence + increment


def decrement_sequence(sequence: int, decrement: int) -> int:
    if sequence < decrement:
        return INT32_MAX - (decrement - sequence) + 1
    return sequence - decrement


def in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == INT32_MAX)


class BatchMetadata(NamedTuple):
    """One appended batch as the producer state remembers it (Kafka's BatchMetadata)."""

    last_seq: int
    last_offset: int
    offset_delta: int
    timestamp: int

    @property
    def first_seq(self) -> int:
        return decrement_sequence(self.last_seq, self.offset_delta)

    @property
    def first_offset(self) -> int:
        return self.last_offset - self.offset_delta


class CompletedTxn(NamedTuple):
    """A transaction a marker just closed (Kafka's CompletedTxn): its first offset, the
    marker's offset, and whether it was aborted."""

    producer_id: int
    first_offset: int
    last_offset: int
    is_aborted: bool


class ProducerStateEntry:
    """One producer id's epoch, its last five batches (oldest first), the first offset of
    its ongoing transaction (-1: none) and the coordinator epoch of its last marker."""

    __slots__ = (
        "batches",
        "coordinator_epoch",
        "current_txn_first_offset",
        "last_timestamp",
        "producer_epoch",
        "producer_id",
    )

    def __init__(
        self,
        producer_id: int,
        producer_epoch: int = NO_PRODUCER_EPOCH,
        batches: Iterable[BatchMetadata] = (),
        last_timestamp: int = NO_TIMESTAMP,
        current_txn_first_offset: int = -1,
        coordinator_epoch: int = -1,
    ) -> None:
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.batches: deque[BatchMetadata] = deque(batches, maxlen=NUM_BATCHES_TO_RETAIN)
        self.last_timestamp = last_timestamp
        self.current_txn_first_offset = current_txn_first_offset
        self.coordinator_epoch = coordinator_epoch

    @property
    def is_empty(self) -> bool:
        return not self.batches

    @property
    def first_seq(self) -> int:
        return self.batches[0].first_seq if self.batches else NO_SEQUENCE

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else NO_SEQUENCE

    @property
    def last_data_offset(self) -> int:
        return self.batches[-1].last_offset if self.batches else -1

    def maybe_update_producer_epoch(self, producer_epoch: int) -> bool:
        """A new epoch forgets the old epoch's batches."""
        if self.producer_epoch == producer_epoch:
            return False
        self.batches.clear()
        self.producer_epoch = producer_epoch
        return True

    def add_batch(
        self, producer_epoch: int, last_seq: int, last_offset: int, offset_delta: int, ts: int
    ) -> None:
        self.maybe_update_producer_epoch(producer_epoch)
        self.batches.append(BatchMetadata(last_seq, last_offset, offset_delta, ts))
        self.last_timestamp = ts

    def update(self, other: ProducerStateEntry) -> None:
        """Take on what an append added (`other` holds only the new batches)."""
        self.maybe_update_producer_epoch(other.producer_epoch)
        self.batches.extend(other.batches)
        self.last_timestamp = other.last_timestamp
        self.current_txn_first_offset = other.current_txn_first_offset
        self.coordinator_epoch = other.coordinator_epoch

    def find_duplicate_batch(
        self, producer_epoch: int, first_seq: int, last_seq: int
    ) -> BatchMetadata | None:
        """The remembered batch with exactly this epoch and sequence range, if any."""
        if producer_epoch != self.producer_epoch:
            return None
        for batch in self.batches:
            if batch.last_seq == last_seq and batch.first_seq == first_seq:
                return batch
        return None

    def copy(self) -> ProducerStateEntry:
        return ProducerStateEntry(
            self.producer_id,
            self.producer_epoch,
            self.batches,
            self.last_timestamp,
            self.current_txn_first_offset,
            self.coordinator_epoch,
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ProducerStateEntry):
            return NotImplemented
        return (
            self.producer_id == other.producer_id
            and self.producer_epoch == other.producer_epoch
            and list(self.batches) == list(other.batches)
            and self.last_timestamp == other.last_timestamp
            and self.current_txn_first_offset == other.current_txn_first_offset
            and self.coordinator_epoch == other.coordinator_epoch
        )

    def __repr__(self) -> str:
        return (
            f"ProducerStateEntry(producer_id={self.producer_id}, "
            f"epoch={self.producer_epoch}, batches={list(self.batches)}, "
            f"last_timestamp={self.last_timestamp}, "
            f"txn_first_offset={self.current_txn_first_offset}, "
            f"coordinator_epoch={self.coordinator_epoch})"
        )


class ProducerAppendInfo:
    """The batches one append adds for one producer, checked against the producer's state.

    Checks chain: a request's second batch from a producer must follow its first.
    """

    __slots__ = (
        "current_entry",
        "origin",
        "producer_id",
        "started_txn",
        "topic_partition",
        "updated_entry",
    )

    def __init__(
        self,
        topic_partition: str,
        producer_id: int,
        current_entry: ProducerStateEntry,
        origin: AppendOrigin,
    ) -> None:
        self.topic_partition = topic_partition
        self.producer_id = producer_id
        self.current_entry = current_entry
        self.origin = origin
        self.updated_entry = ProducerStateEntry(
            producer_id,
            current_entry.producer_epoch,
            (),
            current_entry.last_timestamp,
            current_entry.current_txn_first_offset,
            current_entry.coordinator_epoch,
        )
        # The first offset of a transaction this append opened (-1: none).
        self.started_txn = -1

    def append_data_batch(
        self,
        producer_epoch: int,
        first_seq: int,
        last_seq: int,
        last_timestamp: int,
        first_offset: int,
        last_offset: int,
        is_transactional: bool = False,
    ) -> None:
        """Check one batch (origin CLIENT) and add it to the pending update."""
        self._check_producer_epoch(producer_epoch, first_offset)
        if self.origin is AppendOrigin.CLIENT:
            self._check_sequence(producer_epoch, first_seq, first_offset)
        updated = self.updated_entry
        updated.add_batch(
            producer_epoch, last_seq, last_offset, last_offset - first_offset, last_timestamp
        )
        if updated.current_txn_first_offset >= 0 and not is_transactional:
            if self.origin is not AppendOrigin.REPLICATION:
                raise InvalidTxnStateError(
                    f"Expected transactional write from producer {self.producer_id} at "
                    f"offset {first_offset} in partition {self.topic_partition}"
                )
        elif updated.current_txn_first_offset < 0 and is_transactional:
            updated.current_txn_first_offset = first_offset
            self.started_txn = first_offset

    def append_end_txn_marker(
        self,
        committed: bool,
        coordinator_epoch: int,
        producer_epoch: int,
        offset: int,
        timestamp: int,
    ) -> CompletedTxn | None:
        """A marker at `offset`: closes the ongoing transaction, if any (Kafka answers a
        marker for a producer with none, and records no completed transaction for it)."""
        self._check_producer_epoch(producer_epoch, offset)
        updated = self.updated_entry
        if updated.coordinator_epoch > coordinator_epoch:
            message = (
                f"Invalid coordinator epoch for producerId {self.producer_id} at offset "
                f"{offset} in partition {self.topic_partition}: {coordinator_epoch} (zombie), "
                f"{updated.coordinator_epoch} (current)"
            )
            if self.origin is not AppendOrigin.REPLICATION:
                raise TransactionCoordinatorFencedError(message)
            log.info("%s", message)
        completed = None
        if updated.current_txn_first_offset >= 0:
            completed = CompletedTxn(
                self.producer_id, updated.current_txn_first_offset, offset, not committed
            )
        updated.maybe_update_producer_epoch(producer_epoch)
        updated.current_txn_first_offset = -1
        updated.coordinator_epoch = coordinator_epoch
        updated.last_timestamp = timestamp
        self.started_txn = -1
        return completed

    def _check_producer_epoch(self, producer_epoch: int, offset: int) -> None:
        current = self.updated_entry.producer_epoch
        if producer_epoch < current:
            message = (
                f"Epoch of producer {self.producer_id} at offset {offset} in "
                f"{self.topic_partition} is {producer_epoch}, which is smaller than the last "
                f"seen epoch {current}"
            )
            if self.origin is AppendOrigin.REPLICATION:
                log.warning("%s", message)
            else:
                raise InvalidProducerEpochError(message)

    def _check_sequence(self, producer_epoch: int, first_seq: int, offset: int) -> None:
        updated = self.updated_entry
        if producer_epoch != updated.producer_epoch:
            if first_seq != 0 and updated.producer_epoch != NO_PRODUCER_EPOCH:
                raise OutOfOrderSequenceError(
                    f"Invalid sequence number for new epoch of producer {self.producer_id} at "
                    f"offset {offset} in {self.topic_partition}: {producer_epoch} (request "
                    f"epoch), {first_seq} (seq. number), {updated.producer_epoch} (current "
                    "producer epoch)"
                )
            return
        current = self.current_entry
        if not updated.is_empty:
            last_seq = updated.last_seq
        elif producer_epoch == current.producer_epoch:
            last_seq = current.last_seq
        else:
            last_seq = NO_SEQUENCE
        # With no epoch known (the producer's batches are gone, or it expired) any sequence goes.
        if current.producer_epoch != NO_PRODUCER_EPOCH and not in_sequence(last_seq, first_seq):
            raise OutOfOrderSequenceError(
                f"Out of order sequence number for producer {self.producer_id} at offset "
                f"{offset} in {self.topic_partition}: {first_seq} (incoming seq. number), "
                f"{last_seq} (current end sequence number)"
            )


__all__ = [
    "NO_PRODUCER_EPOCH",
    "NO_PRODUCER_ID",
    "NO_SEQUENCE",
    "NUM_BATCHES_TO_RETAIN",
    "AppendOrigin",
    "BatchMetadata",
    "CompletedTxn",
    "InvalidProducerEpochError",
    "InvalidProducerRecordError",
    "InvalidTxnStateError",
    "OutOfOrderSequenceError",
    "ProducerAppendInfo",
    "ProducerStateEntry",
    "TransactionCoordinatorFencedError",
    "decrement_sequence",
    "in_sequence",
    "increment_sequence",
]
