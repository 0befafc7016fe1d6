"""LogManager: loading a log dir, checkpoints, clean shutdown, deletion, periodic work."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from samsa.config.topic import LogConfig
from samsa.log import CLEAN_SHUTDOWN_FILE, Log, LogManager
from samsa.protocol.record_batch import build_batch

CONFIG = LogConfig(segment_bytes=2048, segment_index_bytes=4096, retention_ms=-1)


class Clock:
    def __init__(self, now: int = 1_000_000) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


def batch(ts: int = 1000) -> bytes:
    return build_batch([(None, b"x" * 50, [])] * 2, timestamp_ms=ts)


def fill(plog: Log, n: int, ts: int = 1000) -> None:
    for _ in range(n):
        plog.append_as_leader(batch(ts), 0)


def manager(tmp_path: Path, clock: Clock | None = None) -> LogManager:
    m = LogManager(tmp_path / "data", CONFIG, now_ms=clock or Clock())
    m.load_logs()
    return m


def crash(m: LogManager) -> None:
    for plog in m.all_logs():
        for segment in plog.segments:
            segment.close_handles()


def test_create_get_and_reload_after_clean_shutdown(tmp_path: Path) -> None:
    m = manager(tmp_path)
    assert m.log_dir == tmp_path / "data"
    a = m.get_or_create_log("orders", 0)
    b = m.get_or_create_log("my-topic", 3, LogConfig(segment_bytes=4096))
    assert m.get_or_create_log("orders", 0) is a
    assert m.get_log("orders", 1) is None
    fill(a, 30)
    fill(b, 5)
    m.shutdown()
    data = tmp_path / "data"
    assert (data / CLEAN_SHUTDOWN_FILE).exists()
    assert (data / "recovery-point-offset-checkpoint").read_text() == (
        "0\n2\nmy-topic 3 10\norders 0 60\n"
    )
    assert (data / "log-start-offset-checkpoint").read_text() == "0\n2\nmy-topic 3 0\norders 0 0\n"

    m2 = manager(tmp_path)
    assert not (data / CLEAN_SHUTDOWN_FILE).exists()
    assert sorted(m2.logs) == [("my-topic", 3), ("orders", 0)]
    a2 = m2.get_log("orders", 0)
    assert a2 is not None and a2.log_end_offset == 60 and a2.recovery_point == 60
    assert len(a2.segments) > 1


def test_unclean_restart_recovers_from_the_recovery_points(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    m = manager(tmp_path)
    plog = m.get_or_create_log("t", 0)
    fill(plog, 30)
    plog.flush(20)
    m.checkpoint_recovery_points()
    fill(plog, 5)
    tail = plog.active_segment.log_path
    crash(m)
    with open(tail, "ab") as f:
        f.write(b"torn write")
    with caplog.at_level(logging.WARNING):
        m2 = manager(tmp_path)
    again = m2.get_log("t", 0)
    assert again is not None
    assert again.log_end_offset == 70
    assert again.recovery_point == 20
    assert str(tail) in caplog.text


def test_missing_recovery_checkpoint_recovers_everything(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    m = manager(tmp_path)
    fill(m.get_or_create_log("t", 0), 10)
    m.shutdown()
    (tmp_path / "data" / "recovery-point-offset-checkpoint").unlink()
    with caplog.at_level(logging.WARNING):
        m2 = manager(tmp_path)
    assert "recovery-point-offset-checkpoint is missing" in caplog.text
    again = m2.get_log("t", 0)
    assert again is not None and again.log_end_offset == 20 and again.recovery_point == 0


def test_corrupt_recovery_checkpoint(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    m = manager(tmp_path)
    fill(m.get_or_create_log("t", 0), 10)
    m.shutdown()
    (tmp_path / "data" / "recovery-point-offset-checkpoint").write_text("0\n9\nt 0\n")
    with caplog.at_level(logging.WARNING):
        m2 = manager(tmp_path)
    assert "every log will be recovered" in caplog.text
    assert m2.get_log("t", 0) is not None


def test_fresh_dir_has_no_warnings(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        m = manager(tmp_path)
    assert m.all_logs() == []
    assert not caplog.records


def test_log_start_offsets_survive_restart(tmp_path: Path) -> None:
    m = manager(tmp_path)
    plog = m.get_or_create_log("t", 0)
    fill(plog, 10)
    plog.maybe_increment_log_start_offset(7)
    m.checkpoint_log_start_offsets()
    m.shutdown()
    again = manager(tmp_path).get_log("t", 0)
    assert again is not None and again.log_start_offset == 7


def test_delete_log(tmp_path: Path) -> None:
    m = manager(tmp_path)
    fill(m.get_or_create_log("t", 0), 3)
    assert m.delete_log("t", 0)
    assert not m.delete_log("t", 0)
    assert m.get_log("t", 0) is None
    assert list((tmp_path / "data").iterdir()) == []
    # A deletion interrupted by a crash is finished at the next start.
    leftover = tmp_path / "data" / "t-1.0123abcd-delete"
    leftover.mkdir()
    (leftover / "00000000000000000000.log").write_bytes(b"x")
    m.shutdown()
    m2 = manager(tmp_path)
    assert not leftover.exists()
    assert m2.all_logs() == []


def test_topic_configs_and_update_config(tmp_path: Path) -> None:
    m = LogManager(tmp_path / "data", CONFIG)
    m.load_logs({"big": LogConfig(segment_bytes=10**6)})
    big = m.get_or_create_log("big", 0)
    other = m.get_or_create_log("other", 0)
    assert big.config.segment_bytes == 10**6
    assert other.config is CONFIG
    small = LogConfig(segment_bytes=300)
    m.update_config("big", small)
    assert big.config is small and other.config is CONFIG
    assert m.get_or_create_log("big", 1).config is small


def test_cleanup_logs(tmp_path: Path) -> None:
    clock = Clock(10**7)
    m = manager(tmp_path, clock)
    timed = m.get_or_create_log("timed", 0, LogConfig(segment_bytes=1024, retention_ms=1000))
    kept = m.get_or_create_log("kept", 0)
    fill(timed, 20, ts=10**7 - 5000)
    fill(kept, 20, ts=0)
    assert m.cleanup_logs() > 0
    assert timed.log_start_offset == timed.log_end_offset == 40
    assert kept.log_start_offset == 0
    fill(timed, 20, ts=0)
    assert m.cleanup_logs(lambda topic, partition: 40) == 0


def test_flush_dirty_logs(tmp_path: Path) -> None:
    clock = Clock(0)
    m = manager(tmp_path, clock)
    by_count = m.get_or_create_log("count", 0, LogConfig(flush_messages=10))
    by_time = m.get_or_create_log("time", 0, LogConfig(flush_ms=1000))
    never = m.get_or_create_log("never", 0)
    fill(by_count, 4)
    fill(by_time, 1)
    fill(never, 1)
    assert m.flush_dirty_logs() == 0
    fill(by_count, 1)
    assert m.flush_dirty_logs() == 1
    assert by_count.recovery_point == 10
    clock.now = 1000
    assert m.flush_dirty_logs() == 1
    assert by_time.recovery_point == 2
    assert never.recovery_point == 0


def test_high_watermark_checkpoint(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    m = manager(tmp_path)
    assert m.read_high_watermarks() == {}
    m.write_high_watermarks({("t", 0): 12, ("t", 1): 3})
    path = tmp_path / "data" / "replication-offset-checkpoint"
    assert path.read_text() == "0\n2\nt 0 12\nt 1 3\n"
    assert m.read_high_watermarks() == {("t", 0): 12, ("t", 1): 3}
    path.write_text("junk")
    with caplog.at_level(logging.WARNING):
        assert m.read_high_watermarks() == {}
    assert "replication-offset-checkpoint" in caplog.text
