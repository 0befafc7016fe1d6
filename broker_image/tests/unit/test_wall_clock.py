"""The broker's wall clock: system time plus the offset in SAMSA_CLOCK_OFFSET_FILE, re-read
while running; monotonic time is never stepped."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest
from kafka_support import wait_until

from samsa import faults, wall_clock
from samsa.faults import OffsetClock, read_offset_ms

DAY_MS = 86_400_000


def test_no_file_means_no_offset(tmp_path: Path) -> None:
    assert read_offset_ms(None) == 0
    assert read_offset_ms(str(tmp_path / "absent")) == 0
    assert abs(OffsetClock(str(tmp_path / "absent")).now_ms() - time.time() * 1000) < 60_000


def test_a_step_is_seen_while_running(tmp_path: Path) -> None:
    path = tmp_path / "offset"
    c = OffsetClock(str(path), reread_s=0.01)
    assert c.offset_ms == 0
    path.write_text(f"{DAY_MS}\n")
    wait_until(lambda: c.offset_ms == DAY_MS, 5, what="the step forward to be read")
    assert c.now_ms() - time.time() * 1000 > DAY_MS - 60_000
    path.write_text("-3600000")
    wait_until(lambda: c.offset_ms == -3_600_000, 5, what="the step back to be read")
    path.unlink()
    wait_until(lambda: c.offset_ms == 0, 5, what="the removed file to mean no offset")


def test_a_half_written_file_keeps_the_last_offset(tmp_path: Path) -> None:
    path = tmp_path / "offset"
    path.write_text("12-")
    assert read_offset_ms(str(path), previous=500) == 500
    path.write_text("")
    assert read_offset_ms(str(path), previous=500) == 0


def test_the_broker_clock_follows_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "offset"
    path.write_text(str(DAY_MS))
    monkeypatch.setenv(faults.CLOCK_OFFSET_FILE_ENV, str(path))
    wait_until(
        lambda: wall_clock.wall_clock_ms() - time.time() * 1000 > DAY_MS - 60_000,
        5,
        what="wall_clock_ms to be a day ahead",
    )
    before = wall_clock.monotonic_ms()
    assert abs(before - time.monotonic() * 1000) < 60_000
    monkeypatch.delenv(faults.CLOCK_OFFSET_FILE_ENV)
    wait_until(
        lambda: abs(wall_clock.wall_clock_ms() - time.time() * 1000) < 60_000,
        5,
        what="wall_clock_ms to be back without the variable",
    )


def test_a_reread_begun_before_a_step_does_not_undo_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two threads share the clock (an in-process broker's loop and the test, or the loop and
    the cleaner). A re-read that began before a step, and finished late, must not put the old
    offset back after another thread has read the step."""
    fifo = tmp_path / "slow"
    os.mkfifo(fifo)
    stepped = tmp_path / "offset"
    stepped.write_text(str(DAY_MS))
    monkeypatch.setenv(faults.CLOCK_OFFSET_FILE_ENV, str(fifo))
    c = OffsetClock(reread_s=0.2)
    slow = threading.Thread(target=lambda: c.offset_ms)
    slow.start()
    # The slow reader has the pipe open once a writer can open it without blocking.
    writer = wait_until(lambda: _open_writer(fifo), 5, what="the slow re-read to begin")
    monkeypatch.setenv(faults.CLOCK_OFFSET_FILE_ENV, str(stepped))
    # The clock as another thread sees it, sampled for a second while the slow re-read is held
    # open: a fixed window to look through, not a wait for something to happen.
    seen = []
    deadline = time.monotonic() + 1.0
    while time.monotonic() < deadline:
        seen.append(c.offset_ms)
        time.sleep(0.01)
    os.write(writer, b"0")
    os.close(writer)
    slow.join(5)
    assert not slow.is_alive()
    seen.append(c.offset_ms)
    wait_until(lambda: c.offset_ms == DAY_MS, 5, what="the step to be read")
    if DAY_MS in seen:
        assert seen[seen.index(DAY_MS) :] == [DAY_MS] * (len(seen) - seen.index(DAY_MS))


def _open_writer(fifo: Path) -> int | None:
    try:
        return os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
    except OSError:
        return None
