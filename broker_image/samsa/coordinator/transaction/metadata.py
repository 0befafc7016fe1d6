"""One transactional id's state (Kafka's TransactionMetadata): its producer id and epoch, the
transaction's state and partitions, and the two-step transitions the coordinator makes.

A transition is prepared (``prepare_*``: validated, and the state it leads to set pending),
written to __transaction_state, and only then completed (``complete_transition``). While one
is pending every other request on the id gets CONCURRENT_TRANSACTIONS. Pure logic, no I/O.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from samsa.metadata.model import TopicPartition
from samsa.protocol.errors import ErrorCode

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
MAX_EPOCH = 2**15 - 1


class TransactionState(enum.IntEnum):
    """Kafka's TransactionState, with its ids as written in TransactionLogValue."""

    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def kafka_name(self) -> str:
        """As DescribeTransactions and ListTransactions name it (``TransactionState.name``)."""
        return _NAMES[self]

    @classmethod
    def from_kafka_name(cls, name: str) -> TransactionState | None:
        for state, kafka in _NAMES.items():
            if kafka == name:
                return state
        return None


_NAMES = {
    TransactionState.EMPTY: "Empty",
    TransactionState.ONGOING: "Ongoing",
    TransactionState.PREPARE_COMMIT: "PrepareCommit",
    TransactionState.PREPARE_ABORT: "PrepareAbort",
    TransactionState.COMPLETE_COMMIT: "CompleteCommit",
    TransactionState.COMPLETE_ABORT: "CompleteAbort",
    TransactionState.DEAD: "Dead",
    TransactionState.PREPARE_EPOCH_FENCE: "PrepareEpochFence",
}

_S = TransactionState
_VALID_PREVIOUS: dict[TransactionState, frozenset[TransactionState]] = {
    _S.EMPTY: frozenset({_S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT}),
    _S.ONGOING: frozenset({_S.ONGOING, _S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT}),
    _S.PREPARE_COMMIT: frozenset({_S.ONGOING}),
    _S.PREPARE_ABORT: frozenset({_S.ONGOING, _S.PREPARE_EPOCH_FENCE}),
    _S.COMPLETE_COMMIT: frozenset({_S.PREPARE_COMMIT}),
    _S.COMPLETE_ABORT: frozenset({_S.PREPARE_ABORT}),
    _S.DEAD: frozenset({_S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT}),
    _S.PREPARE_EPOCH_FENCE: frozenset({_S.ONGOING}),
}


class IllegalTransitionError(RuntimeError):
    """A transition the state machine does not allow: a coordinator bug, never client input."""


@dataclass(frozen=True)
class TxnTransitMetadata:
    """What a prepared transition will make of the metadata once it is written."""

    producer_id: int
    last_producer_id: int
    producer_epoch: int
    last_producer_epoch: int
    txn_timeout_ms: int
    txn_state: TransactionState
    topic_partitions: frozenset[TopicPartition]
    txn_start_timestamp_ms: int
    txn_last_update_timestamp_ms: int


class TransactionMetadata:
    def __init__(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        txn_timeout_ms: int,
        state: TransactionState = _S.EMPTY,
        topic_partitions: set[TopicPartition] | None = None,
        txn_start_timestamp_ms: int = -1,
        txn_last_update_timestamp_ms: int = -1,
        last_producer_id: int = NO_PRODUCER_ID,
        last_producer_epoch: int = NO_PRODUCER_EPOCH,
    ) -> None:
        self.transactional_id = transactional_id
        self.producer_id = producer_id
        self.last_producer_id = last_producer_id
        self.producer_epoch = producer_epoch
        self.last_producer_epoch = last_producer_epoch
        self.txn_timeout_ms = txn_timeout_ms
        self.state = state
        self.topic_partitions: set[TopicPartition] = set(topic_partitions or ())
        self.txn_start_timestamp_ms = txn_start_timestamp_ms
        self.txn_last_update_timestamp_ms = txn_last_update_timestamp_ms
        self.pending_state: TransactionState | None = None
        # A fence whose PrepareAbort write failed already bumped the epoch in memory: the
        # retry must not bump it again (that epoch was never handed to a client).
        self.has_failed_epoch_fence = False

    def __repr__(self) -> str:
        return (
            f"TransactionMetadata({self.transactional_id!r}, pid={self.producer_id}, "
            f"epoch={self.producer_epoch}, {self.state.kafka_name}, "
            f"pending={self.pending_state and self.pending_state.kafka_name}, "
            f"partitions={sorted(self.topic_partitions)})"
        )

    @property
    def pending_transition_in_progress(self) -> bool:
        return self.pending_state is not None

    @property
    def is_producer_epoch_exhausted(self) -> bool:
        # Kafka keeps one epoch spare, for the fence of an ongoing transaction.
        return self.producer_epoch >= MAX_EPOCH - 1

    # ------------------------------------------------------------------ prepare

    def _prepare(
        self,
        state: TransactionState,
        producer_id: int,
        producer_epoch: int,
        last_producer_epoch: int,
        timeout_ms: int,
        partitions: frozenset[TopicPartition],
        start_ms: int,
        update_ms: int,
        last_producer_id: int | None = None,
    ) -> TxnTransitMetadata:
        if self.pending_state is not None:
            raise IllegalTransitionError(
                f"{self.transactional_id}: preparing {state.kafka_name} while "
                f"{self.pending_state.kafka_name} is pending"
            )
        if self.state not in _VALID_PREVIOUS[state]:
            raise IllegalTransitionError(
                f"{self.transactional_id}: {self.state.kafka_name} -> {state.kafka_name}"
            )
        self.pending_state = state
        return TxnTransitMetadata(
            producer_id=producer_id,
            last_producer_id=self.last_producer_id
            if last_producer_id is None
            else last_producer_id,
            producer_epoch=producer_epoch,
            last_producer_epoch=last_producer_epoch,
            txn_timeout_ms=timeout_ms,
            txn_state=state,
            topic_partitions=partitions,
            txn_start_timestamp_ms=start_ms,
            txn_last_update_timestamp_ms=update_ms,
        )

    def prepare_increment_producer_epoch(
        self, timeout_ms: int, expected_epoch: int | None, now_ms: int
    ) -> TxnTransitMetadata | ErrorCode:
        """InitProducerId on an idle id: the next epoch, or PRODUCER_FENCED for a stale one."""
        if self.is_producer_epoch_exhausted:
            raise IllegalTransitionError(f"{self.transactional_id}: epoch exhausted")
        bumped = self.producer_epoch + 1
        if expected_epoch is None:
            new_epoch, last_epoch = bumped, NO_PRODUCER_EPOCH
        elif self.producer_epoch == NO_PRODUCER_EPOCH or expected_epoch == self.producer_epoch:
            new_epoch, last_epoch = bumped, self.producer_epoch
        elif expected_epoch == self.last_producer_epoch:
            # A retry of a bump already done: answer with the same epoch.
            new_epoch, last_epoch = self.producer_epoch, self.last_producer_epoch
        else:
            return ErrorCode.producer_fenced
        return self._prepare(
            _S.EMPTY,
            self.producer_id,
            new_epoch,
            last_epoch,
            timeout_ms,
            frozenset(),
            -1,
            now_ms,
        )

    def prepare_producer_id_rotation(
        self, new_producer_id: int, timeout_ms: int, now_ms: int, record_last_epoch: bool
    ) -> TxnTransitMetadata:
        """The epoch is spent: a new producer id at epoch 0."""
        return self._prepare(
            _S.EMPTY,
            new_producer_id,
            0,
            self.producer_epoch if record_last_epoch else NO_PRODUCER_EPOCH,
            timeout_ms,
            frozenset(),
            -1,
            now_ms,
            last_producer_id=self.producer_id,
        )

    def prepare_fence_producer_epoch(self) -> TxnTransitMetadata:
        """Bump the epoch of an ongoing transaction (to abort it): never written as such, the
        abort that follows carries the new epoch."""
        if self.producer_epoch >= MAX_EPOCH:
            raise IllegalTransitionError(f"{self.transactional_id}: cannot fence at max epoch")
        bumped = self.producer_epoch if self.has_failed_epoch_fence else self.producer_epoch + 1
        return self._prepare(
            _S.PREPARE_EPOCH_FENCE,
            self.producer_id,
            bumped,
            NO_PRODUCER_EPOCH,
            self.txn_timeout_ms,
            frozenset(self.topic_partitions),
            self.txn_start_timestamp_ms,
            self.txn_last_update_timestamp_ms,
        )

    def prepare_add_partitions(self, added: set[TopicPartition], now_ms: int) -> TxnTransitMetadata:
        start = (
            now_ms
            if self.state in (_S.EMPTY, _S.COMPLETE_ABORT, _S.COMPLETE_COMMIT)
            else self.txn_start_timestamp_ms
        )
        return self._prepare(
            _S.ONGOING,
            self.producer_id,
            self.producer_epoch,
            self.last_producer_epoch,
            self.txn_timeout_ms,
            frozenset(self.topic_partitions | added),
            start,
            now_ms,
        )

    def prepare_abort_or_commit(self, state: TransactionState, now_ms: int) -> TxnTransitMetadata:
        return self._prepare(
            state,
            self.producer_id,
            self.producer_epoch,
            self.last_producer_epoch,
            self.txn_timeout_ms,
            frozenset(self.topic_partitions),
            self.txn_start_timestamp_ms,
            now_ms,
        )

    def prepare_complete(self, now_ms: int) -> TxnTransitMetadata:
        state = _S.COMPLETE_COMMIT if self.state is _S.PREPARE_COMMIT else _S.COMPLETE_ABORT
        return self._prepare(
            state,
            self.producer_id,
            self.producer_epoch,
            self.last_producer_epoch,
            self.txn_timeout_ms,
            frozenset(),
            self.txn_start_timestamp_ms,
            now_ms,
        )

    def prepare_dead(self) -> TxnTransitMetadata:
        """transactional.id.expiration.ms: the id is forgotten (a tombstone is written)."""
        return self._prepare(
            _S.DEAD,
            self.producer_id,
            self.producer_epoch,
            self.last_producer_epoch,
            self.txn_timeout_ms,
            frozenset(),
            self.txn_start_timestamp_ms,
            self.txn_last_update_timestamp_ms,
        )

    # ------------------------------------------------------------------ complete

    def complete_transition(self, transit: TxnTransitMetadata) -> None:
        """The prepared transition is durable: take it on."""
        if self.pending_state is not transit.txn_state:
            raise IllegalTransitionError(
                f"{self.transactional_id}: completing {transit.txn_state.kafka_name} while "
                f"{self.pending_state and self.pending_state.kafka_name} is pending"
            )
        self.producer_id = transit.producer_id
        self.last_producer_id = transit.last_producer_id
        self.producer_epoch = transit.producer_epoch
        self.last_producer_epoch = transit.last_producer_epoch
        self.txn_timeout_ms = transit.txn_timeout_ms
        self.topic_partitions = set(transit.topic_partitions)
        self.txn_start_timestamp_ms = transit.txn_start_timestamp_ms
        self.txn_last_update_timestamp_ms = max(
            self.txn_last_update_timestamp_ms, transit.txn_last_update_timestamp_ms
        )
        self.state = transit.txn_state
        self.pending_state = None
        self.has_failed_epoch_fence = False
