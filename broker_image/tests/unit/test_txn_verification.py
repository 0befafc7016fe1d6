"""How a coordinator's verification answer becomes a Produce partition error (Kafka's
AddPartitionsToTxnManager and ReplicaManager.appendRecords mapping, 3.8+)."""

from __future__ import annotations

from samsa.handlers.txn_verification import (
    NOT_ADDED,
    produce_error,
    refusals,
    transactional_producer,
)
from samsa.metadata import TopicPartition
from samsa.protocol.errors import ErrorCode as E
from samsa.protocol.record_batch import build_batch


def test_not_added_is_invalid_txn_state_before_v11_and_transaction_abortable_after() -> None:
    assert produce_error(E.transaction_abortable, 10) == (E.invalid_txn_state, NOT_ADDED)
    assert produce_error(E.transaction_abortable, 11) == (E.transaction_abortable, None)
    assert produce_error(E.invalid_txn_state, 11) == (E.invalid_txn_state, NOT_ADDED)


def test_fenced_is_invalid_producer_epoch_and_retriable_errors_not_enough_replicas() -> None:
    assert produce_error(E.producer_fenced, 9) == (E.invalid_producer_epoch, None)
    for error in (
        E.network_exception,
        E.coordinator_load_in_progress,
        E.coordinator_not_available,
        E.not_coordinator,
        E.concurrent_transactions,
    ):
        code, message = produce_error(error, 11)
        assert code is E.not_enough_replicas
        assert message is not None and error.name.upper() in message


def test_only_refused_partitions_are_kept() -> None:
    a, b = TopicPartition("t", 0), TopicPartition("t", 1)
    assert refusals({a: E.none, b: E.transaction_abortable}, 9) == {
        b: (E.invalid_txn_state, NOT_ADDED)
    }


def test_transactional_producer_reads_the_first_batch() -> None:
    txn = build_batch([(None, b"v", [])], producer_id=7, producer_epoch=3, transactional=True)
    idem = build_batch([(None, b"v", [])], producer_id=7, producer_epoch=3)
    assert transactional_producer(txn) == (7, 3)
    assert transactional_producer(idem) is None
    assert transactional_producer(None) is None
    assert transactional_producer(b"\x00" * 10) is None
