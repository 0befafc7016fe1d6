"""The disk-full and clock-step fault kinds against a small fake environment: a real tmpfs
for the disk (mounted here, as root), real files for the clocks."""

from __future__ import annotations

import errno
import os
import random
from collections.abc import Iterator
from pathlib import Path

import pytest

from chaos.faults import clock, disk
from chaos.faults.clock import MAX_STEP_MS, MIN_STEP_MS, ClockStepKind
from chaos.faults.disk import BALLAST_NAME, DiskFullKind, fillable
from chaos.tests.fault_support import fake, small_tmpfs


@pytest.fixture
def tmpfs(tmp_path: Path) -> Iterator[Path]:
    with small_tmpfs(tmp_path) as point:
        yield point


def _write(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


def test_only_a_small_tmpfs_is_fillable(tmp_path: Path, tmpfs: Path) -> None:
    assert fillable(tmpfs)
    (tmpfs / "data").mkdir()
    assert fillable(tmpfs / "data")
    assert not fillable(tmp_path)  # the test's own directory, on whatever holds /tmp
    env = fake({0: tmp_path / "plain", 1: tmpfs / "data"}, tmp_path)
    (tmp_path / "plain").mkdir()
    assert DiskFullKind().applicable(env)
    assert not DiskFullKind().applicable(fake({0: tmp_path / "plain"}, tmp_path))


def test_disk_full_fills_until_enospc_and_heals(tmp_path: Path, tmpfs: Path) -> None:
    data = tmpfs / "data"
    data.mkdir()
    _write(data / "before", b"x" * 1000)
    env = fake({0: tmp_path / "elsewhere", 3: data}, tmp_path)
    (tmp_path / "elsewhere").mkdir()
    fault = DiskFullKind().inject(env, random.Random(1))
    assert fault.broker == 3  # the only broker whose data directory can be filled
    assert (data / BALLAST_NAME).stat().st_size == fault.filled_bytes > 1_000_000
    assert fault.describe() == {
        "kind": "disk-full",
        "broker": 3,
        "ballast_bytes": fault.filled_bytes,
        "free_bytes_after_fill": 0,
    }
    # What a broker appending a batch would meet.
    with pytest.raises(OSError) as raised:
        _write(data / "segment.log", b"r" * 4096)
    assert raised.value.errno == errno.ENOSPC
    fault.heal()
    fault.heal()  # twice is harmless
    assert not (data / BALLAST_NAME).exists()
    _write(data / "segment.log", b"r" * 4096)
    assert (data / "before").read_bytes() == b"x" * 1000


def test_disk_full_refuses_an_environment_without_a_tmpfs(tmp_path: Path) -> None:
    env = fake({0: tmp_path}, tmp_path)
    assert not DiskFullKind().applicable(env)
    with pytest.raises(RuntimeError):
        DiskFullKind().inject(env, random.Random(0))


def test_clock_steps_go_both_ways_within_bounds() -> None:
    rng = random.Random(7)
    steps = [clock.draw_step_ms(rng) for _ in range(2000)]
    assert all(MIN_STEP_MS <= abs(s) <= MAX_STEP_MS for s in steps)
    assert any(s < 0 for s in steps) and any(s > 0 for s in steps)
    # Log-uniform: seconds-long and hours-long steps both come up.
    assert any(abs(s) < 10_000 for s in steps) and any(abs(s) > 3_600_000 for s in steps)


def test_clock_step_writes_the_broker_offset_file_and_heals_to_zero(tmp_path: Path) -> None:
    env = fake({0: tmp_path, 1: tmp_path, 2: tmp_path}, tmp_path / "clocks")
    kind = ClockStepKind()
    assert kind.applicable(env)
    fault = kind.inject(env, random.Random(3))
    again = kind.inject(env, random.Random(3))
    assert (fault.broker, fault.offset_ms) == (again.broker, again.offset_ms)  # seeded
    path = env.clock_file(fault.broker)
    assert int(path.read_text()) == fault.offset_ms != 0
    assert fault.describe()["direction"] == ("forward" if fault.offset_ms > 0 else "back")
    fault.heal()
    assert int(path.read_text()) == 0
    fault.heal()
    assert int(path.read_text()) == 0
    assert sorted(p.name for p in path.parent.iterdir()) == [path.name]  # no temporary left


def test_every_module_exposes_its_kinds() -> None:
    assert [k.name for k in disk.KINDS] == ["disk-full"]
    assert [k.name for k in clock.KINDS] == ["clock-step"]
