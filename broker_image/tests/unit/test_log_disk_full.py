"""The log's files on a full disk (a real tmpfs, filled): every write that cannot complete
fails with ENOSPC and leaves the files as they were, so nothing read later is corrupt."""

from __future__ import annotations

import errno
from collections.abc import Iterator
from pathlib import Path

import pytest
from disk_support import PAGE, Ballast, small_tmpfs

from samsa.config.topic import LogConfig
from samsa.log import Log
from samsa.log.checkpoint import OffsetCheckpointFile
from samsa.log.producer_state import AppendOrigin
from samsa.log.txn_index import AbortedTxn
from samsa.protocol.control import build_end_txn_marker
from samsa.protocol.records import build_batch


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
