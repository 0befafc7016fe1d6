"""Fault injection is off by default: with none of samsa.faults' variables set, no hook is
active and a broker's clock is the system clock; each variable, set, switches its hook on."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from kafka_support import wait_until

from samsa import faults, wall_clock


def test_no_hook_is_active_by_default() -> None:
    # The test process sets none of the variables: were one leaked into it (or into the
    # broker's environment it stands for), this fails.
    assert faults.active() == {}
    # A clock offset read while an earlier test in this process set the variable lasts no
    # longer than one re-read interval.
    time.sleep(faults.REREAD_S)
    assert faults.clock_offset_ms() == 0
    assert faults.cleaner_crash_hook() is None
    assert abs(wall_clock.wall_clock_ms() - time.time() * 1000) < 1_000


def test_each_variable_switches_its_hook_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the test above checks for can be seen: a hook that is on reports it."""
    offset = tmp_path / "offset"
    offset.write_text("3600000")
    monkeypatch.setenv(faults.CLOCK_OFFSET_FILE_ENV, str(offset))
    monkeypatch.setenv(faults.CLEANER_CRASH_POINT_ENV, "swapped")
    assert faults.active() == {
        faults.CLOCK_OFFSET_FILE_ENV: str(offset),
        faults.CLEANER_CRASH_POINT_ENV: "swapped",
    }
    assert faults.cleaner_crash_hook() is not None
    wait_until(lambda: faults.clock_offset_ms() == 3_600_000, 5, what="the offset to be read")
    offset.write_text("0")
    monkeypatch.delenv(faults.CLOCK_OFFSET_FILE_ENV)
    wait_until(lambda: faults.clock_offset_ms() == 0, 5, what="the offset to be dropped")


def test_every_variable_is_listed() -> None:
    assert set(faults.ENV_VARS) == {"SAMSA_CLOCK_OFFSET_FILE", "SAMSA_TEST_CLEANER_CRASH_POINT"}


def test_an_unknown_crash_point_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(faults.CLEANER_CRASH_POINT_ENV, "nowhere")
    with pytest.raises(ValueError, match=faults.CLEANER_CRASH_POINT_ENV):
        faults.cleaner_crash_hook()
