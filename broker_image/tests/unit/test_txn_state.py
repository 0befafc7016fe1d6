"""Transactions in one partition's producer state (no files): ongoing transactions, markers,
the last stable offset, and what the aborted transactions index is told."""

from __future__ import annotations

from pathlib import Path

import pytest

from samsa.log.producer_snapshot import decode_snapshot, encode_snapshot
from samsa.log.producer_state import (
    AppendOrigin,
    BatchMetadata,
    InvalidProducerEpochError,
    InvalidTxnStateError,
    ProducerStateEntry,
    TransactionCoordinatorFencedError,
)
from samsa.log.producer_state_manager import ProducerStateManager
from samsa.log.txn_index import AbortedTxn
from samsa.protocol.control import EndTxnMarker
from samsa.protocol.record_batch import CONTROL_MASK, TRANSACTIONAL_MASK, BatchHeader

TXN = TRANSACTIONAL_MASK
MARKER = TRANSACTIONAL_MASK | CONTROL_MASK


def header(pid: int, seq: int, n: int = 1, epoch: int = 0, attributes: int = TXN) -> BatchHeader:
    return BatchHeader(0, 49 + 20 * n, -1, 2, 0, attributes, n - 1, 1000, 1000, pid, epoch, seq, n)


class Index:
    """The aborted transactions index, as the Log's segments would hold it."""

    def __init__(self) -> None:
        self.entries: list[AbortedTxn] = []

    def append_aborted(self, txn: AbortedTxn) -> None:
        self.entries.append(txn)

    def truncate_aborted(self, offset: int) -> None:
        self.entries = [e for e in self.entries if e.last_offset < offset]


class Leader:
    """A leader's producer state with a log end offset, appending as the Log does."""

    def __init__(self, tmp_path: Path) -> None:
        self.state = ProducerStateManager(tmp_path, "t-0")
        self.index = Index()
        self.state.txn_index = self.index
        self.end = 0

    def produce(self, h: BatchHeader) -> int:
        pending = self.state.prepare_leader_append([h], self.end, -1)
        assert not isinstance(pending, BatchMetadata)
        first = self.end
        self.end += h.last_offset_delta + 1
        self.state.complete_append(pending, self.end)
        return first

    def marker(self, pid: int, committed: bool, epoch: int = 0, coordinator_epoch: int = 0) -> int:
        h = header(pid, -1, epoch=epoch, attributes=MARKER)
        pending = self.state.prepare_leader_append(
            [h],
            self.end,
            -1,
            AppendOrigin.COORDINATOR,
            lambda i, h: EndTxnMarker(committed, coordinator_epoch),
        )
        assert not isinstance(pending, BatchMetadata)
        at = self.end
        self.end += 1
        self.state.complete_append(pending, self.end)
        return at

    def lso(self, hw: int | None = None) -> int:
        hw = self.end if hw is None else hw
        self.state.on_high_watermark(hw)
        return self.state.last_stable_offset(hw)


@pytest.fixture
def leader(tmp_path: Path) -> Leader:
    return Leader(tmp_path)


def test_an_open_transaction_holds_the_last_stable_offset_until_its_marker_is_replicated(
    leader: Leader,
) -> None:
    leader.produce(header(-1, -1, epoch=-1, attributes=0))  # offset 0: no producer id
    assert leader.produce(header(7, 0, n=3)) == 1
    leader.produce(header(7, 3, n=2))
    assert leader.state.ongoing_txns == {7: 1}
    assert leader.lso() == 1
    marker_at = leader.marker(7, committed=True)
    assert leader.state.ongoing_txns == {}
    # The marker is not below the high watermark yet: the transaction still holds the LSO.
    assert leader.lso(hw=marker_at) == 1
    assert leader.lso(hw=marker_at + 1) == marker_at + 1
    assert leader.index.entries == [], "a commit is not indexed"
    entry = leader.state.last_entry(7)
    assert entry is not None and entry.current_txn_first_offset == -1


def test_the_lso_is_the_earliest_of_several_open_transactions(leader: Leader) -> None:
    leader.produce(header(1, 0))
    leader.produce(header(2, 0))
    leader.produce(header(1, 1))
    assert leader.lso() == 0
    leader.marker(1, committed=False)
    assert leader.lso() == 1, "producer 2's transaction from offset 1 is still open"
    # The aborted transaction's LSO is where the next open transaction starts.
    assert leader.index.entries == [AbortedTxn(1, 0, 3, 1)]
    leader.marker(2, committed=False)
    assert leader.lso() == leader.end
    assert leader.index.entries[-1] == AbortedTxn(2, 1, 4, 5)


def test_a_plain_batch_inside_a_transaction_is_invalid_txn_state(leader: Leader) -> None:
    leader.produce(header(7, 0))
    with pytest.raises(InvalidTxnStateError):
        leader.produce(header(7, 1, attributes=0))
    leader.marker(7, committed=True)
    leader.produce(header(7, 1, attributes=0))  # idempotent again once the transaction ended


def test_markers_from_old_producer_or_coordinator_epochs_are_refused(leader: Leader) -> None:
    leader.produce(header(7, 0, epoch=3))
    with pytest.raises(InvalidProducerEpochError):
        leader.marker(7, committed=True, epoch=2)
    leader.marker(7, committed=False, epoch=3, coordinator_epoch=5)
    leader.produce(header(7, 0, epoch=4))
    with pytest.raises(TransactionCoordinatorFencedError):
        leader.marker(7, committed=True, epoch=4, coordinator_epoch=4)
    assert leader.state.ongoing_txns == {7: 2}, "the refused markers changed nothing"
    # A newer epoch's marker (the coordinator fencing a producer) ends the transaction.
    leader.marker(7, committed=False, epoch=5, coordinator_epoch=5)
    assert leader.state.ongoing_txns == {}
    with pytest.raises(InvalidProducerEpochError):
        leader.produce(header(7, 1, epoch=4))


def test_a_marker_without_a_transaction_is_written_and_indexes_nothing(leader: Leader) -> None:
    leader.marker(9, committed=False)
    assert leader.index.entries == []
    assert leader.lso() == leader.end


def test_replicated_markers_close_transactions_without_checks(tmp_path: Path) -> None:
    state = ProducerStateManager(tmp_path, "t-0")
    index = Index()
    state.txn_index = index
    data = header(7, 0, n=2, epoch=3)._replace(base_offset=10)
    stale = header(7, -1, epoch=2, attributes=MARKER)._replace(base_offset=12)
    state.append_replicated(
        [data, stale], 13, lambda i, h: EndTxnMarker(False, 0) if h.is_control else None
    )
    assert index.entries == [AbortedTxn(7, 10, 12, 13)]
    assert state.ongoing_txns == {}


def test_snapshots_carry_open_transactions(leader: Leader) -> None:
    leader.produce(header(7, 0, epoch=2))
    leader.marker(8, committed=True, coordinator_epoch=6)
    entries = decode_snapshot(encode_snapshot(leader.state.producers.values()))
    by_id = {e.producer_id: e for e in entries}
    assert by_id[7].current_txn_first_offset == 0
    assert by_id[8].coordinator_epoch == 6
    assert by_id == leader.state.producers


def test_version_1_snapshots_still_load() -> None:
    # A snapshot written before transactions: version 1, no transaction fields.
    import struct

    import crc32c

    body = struct.pack(">i", 1) + struct.pack(">qhqb", 7, 2, 1000, 1)
    body += struct.pack(">iqiq", 4, 10, 4, 1000)
    data = struct.pack(">hI", 1, crc32c.crc32c(body)) + body
    (entry,) = decode_snapshot(data)
    assert entry == ProducerStateEntry(7, 2, [BatchMetadata(4, 10, 4, 1000)], 1000)
    assert entry.current_txn_first_offset == -1


def test_producers_with_an_open_transaction_do_not_expire(leader: Leader) -> None:
    leader.produce(header(7, 0))
    leader.produce(header(8, 0, attributes=0))
    assert leader.state.remove_expired_producers(now_ms=10**9, expiration_ms=1) == 1
    assert leader.state.last_entry(7) is not None
