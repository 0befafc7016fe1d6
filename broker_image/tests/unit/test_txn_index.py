"""The aborted transactions index (`.txnindex`) through a real Log on disk: Kafka's entry
layout, written with abort markers, searched for fetches, truncated with the log, deleted
with its segment, rebuilt after an unclean shutdown, and the LSO carried across restarts."""

from __future__ import annotations

import struct
from pathlib import Path

from samsa.config.topic import LogConfig
from samsa.log import Log
from samsa.log.producer_state import AppendOrigin
from samsa.log.txn_index import (
    ENTRY_SIZE,
    AbortedTxn,
    TransactionIndex,
    collect_aborted,
    decode_entries,
    encode_entries,
)
from samsa.protocol.control import build_end_txn_marker, read_end_txn_marker
from samsa.protocol.record_batch import build_batch, read_batch_header

CONFIG = LogConfig(segment_bytes=600, index_interval_bytes=100, retention_ms=-1)


def txn(pid: int, seq: int, n: int = 2, epoch: int = 0) -> bytes:
    return build_batch(
        [(b"k", b"%d-%d" % (pid, seq + i), []) for i in range(n)],
        timestamp_ms=1000,
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
        transactional=True,
    )


def marker(plog: Log, pid: int, committed: bool, epoch: int = 0) -> int:
    records = build_end_txn_marker(pid, epoch, committed, 3, 1000)
    info = plog.append_as_leader(records, 0, origin=AppendOrigin.COORDINATOR)
    return info.first_offset


def crash(plog: Log) -> None:
    for segment in plog.segments:
        segment.close_handles()


def txn_files(dir: Path) -> list[str]:
    return sorted(p.name for p in dir.glob("*.txnindex"))


def test_entries_are_laid_out_as_kafkas() -> None:
    entry = AbortedTxn(producer_id=7, first_offset=10, last_offset=20, last_stable_offset=21)
    data = encode_entries([entry])
    assert len(data) == ENTRY_SIZE == 34
    assert data == struct.pack(">hqqqq", 0, 7, 10, 20, 21)
    # A torn trailing entry is ignored.
    assert decode_entries(data + data[:10]) == [entry]


def test_control_records_round_trip() -> None:
    data = build_end_txn_marker(5, 2, False, 9, 1234)
    h = read_batch_header(data)
    assert h.is_control and h.is_transactional and h.producer_id == 5 and h.producer_epoch == 2
    assert h.base_sequence == -1 and h.records_count == 1
    got = read_end_txn_marker(data, 0, h)
    assert got is not None and (got.committed, got.coordinator_epoch) == (False, 9)
    # Key: version 0, type 0 (abort); value: version 0, coordinator epoch.
    assert struct.pack(">hh", 0, 0) in data and struct.pack(">hi", 0, 9) in data


def test_collect_stops_at_an_entry_whose_lso_passes_the_upper_bound() -> None:
    entries = [AbortedTxn(1, 0, 5, 6), AbortedTxn(2, 3, 9, 10), AbortedTxn(3, 20, 25, 26)]
    found: list[AbortedTxn] = []
    assert collect_aborted(entries, 4, 8, found)
    assert found == entries[:2]
    found = []
    assert not collect_aborted(entries, 10, 30, found)
    assert found == [entries[2]]


def test_a_torn_index_file_keeps_its_whole_entries(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000000.txnindex"
    entry = AbortedTxn(1, 0, 5, 6)
    path.write_bytes(encode_entries([entry]) + b"\0\0\0")
    index = TransactionIndex(path, load=True)
    assert index.entries == [entry]
    assert path.stat().st_size == ENTRY_SIZE


def test_abort_markers_are_indexed_and_found_for_fetches(tmp_path: Path) -> None:
    plog = Log.open(tmp_path / "t-0", CONFIG)
    plog.append_as_leader(txn(1, 0), 0)  # 0-1
    plog.append_as_leader(txn(2, 0), 0)  # 2-3
    assert plog.last_stable_offset(plog.log_end_offset) == 0
    assert marker(plog, 1, committed=False) == 4
    assert plog.last_stable_offset(5) == 2
    assert marker(plog, 2, committed=True) == 5
    assert plog.collect_aborted_txns(0, 6) == [AbortedTxn(1, 0, 4, 2)]
    assert plog.collect_aborted_txns(5, 6) == []
    assert txn_files(plog.dir) == ["00000000000000000000.txnindex"]
    plog.producer_state.on_high_watermark(6)
    assert plog.last_stable_offset(6) == 6
    plog.close()


def test_the_index_survives_a_clean_restart_and_is_rebuilt_after_a_crash(tmp_path: Path) -> None:
    plog = Log.open(tmp_path / "t-0", CONFIG)
    expected = []
    for i in range(6):
        first = plog.append_as_leader(txn(i, 0, n=3), 0).first_offset
        at = marker(plog, i, committed=i % 2 == 0)
        if i % 2:
            expected.append(AbortedTxn(i, first, at, at + 1))
    plog.append_as_leader(txn(99, 0), 0)  # left open
    assert len(plog.segments) > 2, "the aborted transactions span several segments"
    assert plog.collect_aborted_txns(0, plog.log_end_offset) == expected
    open_at = plog.log_end_offset - 2
    plog.flush()
    plog.close()

    plog = Log.open(
        tmp_path / "t-0", CONFIG, recovery_point=plog.log_end_offset, clean_shutdown=True
    )
    assert plog.collect_aborted_txns(0, plog.log_end_offset) == expected
    assert plog.last_stable_offset(plog.log_end_offset) == open_at
    end = plog.log_end_offset
    crash(plog)

    # A crash with nothing flushed: every index file is lost; recovery replays the log.
    for name in txn_files(tmp_path / "t-0"):
        (tmp_path / "t-0" / name).unlink()
    for snapshot in (tmp_path / "t-0").glob("*.snapshot"):
        snapshot.unlink()
    plog = Log.open(tmp_path / "t-0", CONFIG, recovery_point=0)
    assert plog.log_end_offset == end
    assert plog.collect_aborted_txns(0, plog.log_end_offset) == expected
    assert plog.last_stable_offset(plog.log_end_offset) == open_at, "the open one still holds"
    plog.close()


def test_truncation_and_retention_take_the_entries_with_them(tmp_path: Path) -> None:
    plog = Log.open(tmp_path / "t-0", CONFIG)
    plog.append_as_leader(txn(1, 0), 0)
    at = marker(plog, 1, committed=False)
    plog.append_as_leader(txn(2, 0), 0)
    second = marker(plog, 2, committed=False)
    assert [e.last_offset for e in plog.collect_aborted_txns(0, plog.log_end_offset)] == [
        at,
        second,
    ]
    plog.truncate_to(second)
    assert [e.last_offset for e in plog.collect_aborted_txns(0, plog.log_end_offset)] == [at]
    assert plog.last_stable_offset(plog.log_end_offset) == at + 1, "producer 2's is open again"
    # Retention: once every segment holding an entry is gone, so is its file.
    for _ in range(20):
        plog.append_as_leader(build_batch([(None, b"x" * 50, [])]), 0)
    marker(plog, 2, committed=True)
    plog.maybe_increment_log_start_offset(plog.log_end_offset - 1)
    plog.delete_old_segments()
    assert plog.collect_aborted_txns(plog.log_start_offset, plog.log_end_offset) == []
    assert txn_files(plog.dir) == []
    plog.close()


def test_a_follower_tracks_transactions_from_the_batches_it_replicates(tmp_path: Path) -> None:
    leader = Log.open(tmp_path / "l" / "t-0", CONFIG)
    leader.append_as_leader(txn(1, 0), 0)
    leader.append_as_leader(txn(2, 0), 0)
    marker(leader, 1, committed=False)
    leader.append_as_leader(txn(3, 0), 0)
    marker(leader, 2, committed=True)
    follower = Log.open(tmp_path / "f" / "t-0", CONFIG)
    offset = 0
    while offset < leader.log_end_offset:
        data = leader.read(offset, 300).records
        assert isinstance(data, bytes)
        offset = follower.append_as_follower(data).last_offset + 1
    end = leader.log_end_offset
    assert follower.collect_aborted_txns(0, end) == leader.collect_aborted_txns(0, end)
    assert follower.collect_aborted_txns(0, end) == [AbortedTxn(1, 0, 4, 2)]
    assert follower.last_stable_offset(end) == leader.last_stable_offset(end) == 5
    assert follower.producer_state.ongoing_txns == {3: 5}


def test_a_read_of_a_reopened_segment_knows_where_it_ends(tmp_path: Path) -> None:
    # The fetch path bounds its search for aborted transactions with the read's next offset.
    plog = Log.open(tmp_path / "t-0", CONFIG)
    while len(plog.segments) < 2:
        plog.append_as_leader(txn(1, plog.log_end_offset, n=3), 0)
    second = plog.segments[1].base_offset
    plog.flush()
    plog.close()
    plog = Log.open(tmp_path / "t-0", CONFIG, recovery_point=second, clean_shutdown=True)
    assert plog.read(0, 1 << 20).next_offset == second
    plog.close()
