"""The log's files on a full disk (a real tmpfs, filled): every write that cannot complete
fails with ENOSPC and leaves the files as they were, so nothing read later is corrupt."""

from __future__ import annotations

import errno
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from cleaner_support import Clock, compacted_log, read_all, view, with_config
from disk_support import PAGE, Ballast, small_tmpfs

from samsa.config.topic import LogConfig
from samsa.log import CLEAN_SHUTDOWN_FILE, Log, LogManager
from samsa.log.checkpoint import OffsetCheckpointFile
from samsa.log.producer_state import AppendOrigin
from samsa.log.txn_index import AbortedTxn
from samsa.protocol.control import build_end_txn_marker
from samsa.protocol.record_batch import (
    build_batch,
    decode_records,
    set_base_offset,
    set_partition_leader_epoch,
)


@pytest.fixture
def disk() -> Iterator[Path]:
    with small_tmpfs("4m") as point:
        yield point


def test_a_checkpoint_that_does_not_fit_leaves_the_old_one(disk: Path) -> None:
    checkpoint = OffsetCheckpointFile(disk / "recovery-point-offset-checkpoint")
    old = {(f"topic-{i:03d}", 0): i for i in range(10)}
    checkpoint.write(old)
    ballast = Ballast(disk / "ballast")
    ballast.fill()
    # One free page: the new file's first 4 KiB fit, the rest does not (a short write).
    ballast.free_pages(1)
    new = {(f"topic-{i:03d}", p): i * 1000 for i in range(300) for p in range(2)}
    with pytest.raises(OSError) as raised:
        checkpoint.write(new)
    assert raised.value.errno == errno.ENOSPC
    assert checkpoint.read() == old
    ballast.remove()
    checkpoint.write(new)
    assert checkpoint.read() == new


def test_an_abort_marker_that_fits_but_its_index_entry_does_not(disk: Path) -> None:
    """The marker fits in the .log's last page, but the segment's first aborted transaction
    needs a new .txnindex page: the append still succeeds as a whole (the marker is in the
    log), the entry is served from memory, and the next flush writes it."""
    config = LogConfig(segment_bytes=1 << 20, retention_ms=-1)
    plog = Log.open(disk / "t-0", config)
    plog.append_as_leader(txn(1, 0), 0)  # 0-1
    assert plog.segments[-1].size % PAGE < PAGE - 200, "room for the marker in the last page"
    ballast = Ballast(disk / "ballast")
    ballast.fill()
    records = build_end_txn_marker(1, 0, False, 3, 1000)
    info = plog.append_as_leader(records, 0, origin=AppendOrigin.COORDINATOR)
    assert info.first_offset == 2
    assert plog.log_end_offset == 3
    plog.producer_state.on_high_watermark(3)
    assert plog.last_stable_offset(3) == 3, "the transaction is over"
    assert plog.collect_aborted_txns(0, 3) == [AbortedTxn(1, 0, 2, 3)]
    with pytest.raises(OSError):
        plog.flush()  # still no room: the recovery point stays where it was
    ballast.remove()
    plog.flush()
    end = plog.log_end_offset
    plog.close()
    again = Log.open(disk / "t-0", config, recovery_point=end, clean_shutdown=True)
    assert again.collect_aborted_txns(0, 3) == [AbortedTxn(1, 0, 2, 3)]
    again.close()


def txn(pid: int, seq: int, n: int = 2) -> bytes:
    return build_batch(
        [(b"k", b"%d-%d" % (pid, seq + i), []) for i in range(n)],
        timestamp_ms=1000,
        producer_id=pid,
        producer_epoch=0,
        base_sequence=seq,
        transactional=True,
    )


def plain(i: int, size: int = 300) -> bytes:
    return build_batch([(None, b"%06d" % i + b"v" * size, [])], timestamp_ms=1000 + i)


def values(plog: Log) -> list[tuple[int, bytes]]:
    """(offset, first bytes of the value) of every record, read back through the log."""
    out: list[tuple[int, bytes]] = []
    offset = plog.log_start_offset
    while offset < plog.log_end_offset:
        records = decode_records(bytes(plog.read(offset, 1 << 20).records))
        out.extend((r.offset, (r.value or b"")[:6]) for r in records)
        offset = records[-1].offset + 1
    return out


@pytest.mark.parametrize("pages_free", [0, 1, 2])
def test_appends_and_rolls_on_a_full_disk_fail_whole_and_resume(
    disk: Path, pages_free: int
) -> None:
    """Every append meets the full disk at a different step (the batch, a roll's index
    trim, its producer snapshot, the new segment): each fails with ENOSPC or succeeds
    whole, and once there is room the log takes appends again and reads back in order."""
    config = LogConfig(segment_bytes=2000, index_interval_bytes=200, retention_ms=-1)
    plog = Log.open(disk / "t-0", config)
    acked = []
    for i in range(20):
        plog.append_as_leader(plain(i), 0)
        acked.append((len(acked), b"%06d" % i))
    ballast = Ballast(disk / "ballast")
    ballast.fill()
    ballast.free_pages(pages_free)
    failures = 0
    for i in range(20, 60):
        try:
            plog.append_as_leader(plain(i), 0)
        except OSError as exc:
            assert exc.errno == errno.ENOSPC
            failures += 1
        else:
            acked.append((len(acked), b"%06d" % i))
        assert values(plog) == acked
    assert failures
    assert list((disk / "t-0").glob("*.tmp")) == [], "a failed write left a temporary file"
    ballast.remove()
    for i in range(60, 80):
        plog.append_as_leader(plain(i), 0)
        acked.append((len(acked), b"%06d" % i))
    assert values(plog) == acked
    plog.flush()
    end = plog.log_end_offset
    plog.close()
    for clean in (True, False):
        again = Log.open(
            disk / "t-0", config, recovery_point=end if clean else 0, clean_shutdown=clean
        )
        assert values(again) == acked
        again.close()


def replicated(offset: int, epoch: int, pid: int = 5, seq: int = 0) -> bytearray:
    """A leader's stored batch as a follower fetches it: offsets and epoch already set."""
    batch = bytearray(
        build_batch(
            [(None, b"%06d" % offset + b"f" * 200, [])],
            timestamp_ms=1000 + offset,
            producer_id=pid,
            producer_epoch=0,
            base_sequence=seq,
        )
    )
    set_base_offset(batch, 0, offset)
    set_partition_leader_epoch(batch, 0, epoch)
    return batch


def test_a_follower_truncates_and_a_leader_takes_an_epoch_on_a_full_disk(disk: Path) -> None:
    """Truncation and a new epoch write the epoch checkpoint; on a full disk that write
    waits for the next flush rather than leave the log half-truncated (the producer state
    still ahead of the log) or a leadership half-taken."""
    config = LogConfig(segment_bytes=1 << 20, index_interval_bytes=100, retention_ms=-1)
    plog = Log.open(disk / "t-0", config)
    for offset in range(10):
        plog.append_as_follower(replicated(offset, epoch=0 if offset < 5 else 1, seq=offset))
    ballast = Ballast(disk / "ballast")
    ballast.fill()
    assert plog.truncate_to(5)
    assert plog.log_end_offset == 5
    assert plog.leader_epoch_cache.latest_epoch == 0
    assert plog.producer_state.producers[5].last_seq == 4, "the producer state went back too"
    plog.assign_epoch(2, 5)  # this broker becomes leader at epoch 2
    assert plog.end_offset_for_epoch(0) == (0, 5)
    with pytest.raises(OSError):
        plog.flush()
    ballast.remove()
    plog.append_as_follower(replicated(5, epoch=2, seq=5))
    plog.flush()
    plog.close()
    again = Log.open(disk / "t-0", config, recovery_point=6, clean_shutdown=True)
    assert [offset for offset, _ in values(again)] == list(range(6))
    assert again.end_offset_for_epoch(0) == (0, 5)
    assert again.leader_epoch_cache.latest_epoch == 2
    again.close()


def _open_under(path: Path) -> list[str]:
    out = []
    for fd in Path("/proc/self/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith(str(path)):
            out.append(target)
    return out


def test_a_shutdown_on_a_full_disk_closes_every_file_and_recovers_next_time(disk: Path) -> None:
    """A broker stopped while its disk is full cannot flush: it still closes every file (so
    the file system can be unmounted) and leaves no clean-shutdown marker, and the next
    start recovers everything that was appended."""
    config = LogConfig(segment_bytes=2000, index_interval_bytes=200, retention_ms=-1)
    manager = LogManager(disk / "data", config)
    manager.load_logs()
    acked: dict[int, list[tuple[int, bytes]]] = {0: [], 1: []}
    for i in range(30):
        plog = manager.get_or_create_log("t", i % 2, config)
        plog.append_as_leader(plain(i), 0)
        acked[i % 2].append((len(acked[i % 2]), b"%06d" % i))
    ballast = Ballast(disk / "ballast")
    ballast.fill()
    manager.shutdown()
    assert _open_under(disk) == []
    assert not (disk / "data" / CLEAN_SHUTDOWN_FILE).exists()
    ballast.remove()
    again = LogManager(disk / "data", config)
    again.load_logs()
    for p in (0, 1):
        reopened = again.get_log("t", p)
        assert reopened is not None
        assert values(reopened) == acked[p]
    again.shutdown()
    assert (disk / "data" / CLEAN_SHUTDOWN_FILE).exists()


def test_a_clean_that_meets_a_full_disk_is_tried_again_once_there_is_room(disk: Path) -> None:
    """Compaction writes new segments before it frees the old: on a full disk it fails,
    leaves no .cleaned file behind, and cleans the log once space returns, instead of
    marking it uncleanable until the broker restarts."""
    config = with_config(segment_bytes=2048)
    manager, plog, cleaner = compacted_log(disk / "data", Clock(), config)
    # Keys 10 and up are written once, so every cleaned segment keeps records (needs room).
    for i in range(200):
        key = b"k%d" % (i if i < 100 else i % 10)
        plog.append_as_leader(build_batch([(key, b"value-%03d" % i + b"x" * 50, [])]), 0)
    before = read_all(plog)
    ballast = Ballast(disk / "ballast")
    ballast.fill()
    assert not cleaner.clean_filthiest_log_now()
    assert list((disk / "data" / "t-0").glob("*.cleaned")) == []
    assert read_all(plog) == before
    assert ("t", 0) not in cleaner.manager.uncleanable
    ballast.remove()
    assert cleaner.clean_filthiest_log_now()
    after = read_all(plog)
    assert view(after) == view(before) and len(after) < len(before)
    manager.shutdown()


def test_a_roll_cut_short_by_a_full_disk_leaves_the_active_segment_appendable(
    disk: Path,
) -> None:
    """A roll seals the active segment's two indexes one after the other: with room for just
    the first, the roll fails half-way. A smaller batch that still fits the segment must then
    go into it as into any active segment, not find a read-only index after its bytes are
    written (that left them in the file under offsets the log then gave out again)."""
    config = LogConfig(segment_bytes=4096, index_interval_bytes=1, retention_ms=-1)
    plog = Log.open(disk / "t-0", config)
    acked = []
    for i in range(3):
        plog.append_as_leader(plain(i, size=1000), 0)
        acked.append((i, b"%06d" % i))
    ballast = Ballast(disk / "ballast")
    ballast.fill()
    ballast.free_pages(1)
    with pytest.raises(OSError):
        plog.append_as_leader(plain(3, size=1000), 0)  # needs a roll: it fails in the seal
    try:
        plog.append_as_leader(plain(4, size=10), 0)  # fits the segment's last page
        acked.append((3, b"%06d" % 4))
    except OSError as exc:
        assert exc.errno == errno.ENOSPC
    assert values(plog) == acked
    ballast.remove()
    for i in range(5, 12):
        plog.append_as_leader(plain(i, size=1000), 0)
        acked.append((len(acked), b"%06d" % i))
    assert values(plog) == acked
    plog.flush()
    plog.close()
    for clean in (True, False):
        again = Log.open(
            disk / "t-0", config, recovery_point=len(acked) if clean else 0, clean_shutdown=clean
        )
        assert values(again) == acked
        again.close()
