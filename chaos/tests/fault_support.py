"""A small fake of the campaign's environment, and a tmpfs of a test's own, for the fault
kinds' tests."""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import cast

import pytest

from chaos.faults.base import Environment


class FakeEnvironment:
    """Just what the two kinds use: brokers, data directories, clock files."""

    def __init__(self, dirs: dict[int, Path], clocks: Path) -> None:
        self._dirs = dirs
        self._clocks = clocks

    @property
    def brokers(self) -> list[int]:
        return sorted(self._dirs)

    def data_dir(self, broker: int) -> Path:
        return self._dirs[broker]

    def clock_file(self, broker: int) -> Path:
        return self._clocks / f"clock-{broker}"


def fake(dirs: dict[int, Path], clocks: Path) -> Environment:
    """The fake, typed as the environment the kinds are given (they use no more of it)."""
    return cast(Environment, FakeEnvironment(dirs, clocks))


@contextlib.contextmanager
def small_tmpfs(under: Path, size: str = "2m") -> Iterator[Path]:
    """A tmpfs of the test's own (skipped without root), unmounted at the end."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    point = under / "tmpfs"
    point.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(point)], check=True)
    try:
        yield point
    finally:
        subprocess.run(["umount", str(point)], check=True)
