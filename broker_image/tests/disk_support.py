"""A small tmpfs of a test's own, and a ballast file that fills it: a full disk for real.

Mounting needs root; tests skip without it. Every mount is unmounted when the block ends."""

from __future__ import annotations

import contextlib
import errno
import os
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

PAGE = 4096


@contextlib.contextmanager
def small_tmpfs(size: str = "8m") -> Iterator[Path]:
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    point = Path(tempfile.mkdtemp(prefix="samsa-tmpfs-"))
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(point)], check=True)
    try:
        yield point
    finally:
        # A broker thread may still be closing its files: retry the unmount a little.
        for _ in range(50):
            if subprocess.run(["umount", str(point)], capture_output=True).returncode == 0:
                break
            subprocess.run(["sleep", "0.1"], check=True)
        else:
            subprocess.run(["umount", "-l", str(point)], check=True)
        point.rmdir()


class Ballast:
    """A file that takes every free page of its file system, and gives them back."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def fill(self) -> int:
        """Write until ENOSPC; the bytes the ballast holds."""
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            size = 1 << 20
            while size:
                try:
                    os.write(fd, bytes(size))
                except OSError as exc:
                    if exc.errno != errno.ENOSPC:
                        raise
                    size //= 16
            return os.fstat(fd).st_size
        finally:
            os.close(fd)

    def free_pages(self, pages: int) -> None:
        """Give back exactly ``pages`` pages (the ballast is page-aligned once full)."""
        size = self.path.stat().st_size
        os.truncate(self.path, max(size - size % PAGE - pages * PAGE, 0))

    def remove(self) -> None:
        self.path.unlink(missing_ok=True)
