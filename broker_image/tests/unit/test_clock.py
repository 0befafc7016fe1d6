"""The broker's wall clock: system time plus the offset in SAMSA_CLOCK_OFFSET_FILE, re-read
while running; monotonic time is never stepped."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from kafka_support import wait_until

from samsa import clock
from samsa.clock import OffsetClock, read_offset_ms

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
    monkeypatch.setenv(clock.ENV_VAR, str(path))
    wait_until(
        lambda: clock.wall_clock_ms() - time.time() * 1000 > DAY_MS - 60_000,
        5,
        what="wall_clock_ms to be a day ahead",
    )
    before = clock.monotonic_ms()
    assert abs(before - time.monotonic() * 1000) < 60_000
    monkeypatch.delenv(clock.ENV_VAR)
    wait_until(
        lambda: abs(clock.wall_clock_ms() - time.time() * 1000) < 60_000,
        5,
        what="wall_clock_ms to be back without the variable",
    )
