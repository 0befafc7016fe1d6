"""Full disks: a ballast file fills a broker's data directory until writes fail with ENOSPC;
healing deletes it.

Only a data directory on a small tmpfs of its own qualifies (the campaign mounts one per
broker when it runs as root): filling a shared file system would starve everything else on
the machine. While the disk is full the broker must refuse produces with KAFKA_STORAGE_ERROR,
keep serving fetches, and take writes again once the ballast is gone, without a restart."""

from __future__ import annotations

import contextlib
import errno
import os
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from chaos.faults.base import Environment

BALLAST_NAME = ".chaos-ballast"
# A tmpfs larger than this is not the campaign's own: never fill it.
MAX_FILL_BYTES = 1 << 30
_CHUNK = 1 << 20


def mount_of(path: Path, mounts_file: Path = Path("/proc/self/mounts")) -> tuple[str, str] | None:
    """(mount point, file system type) of the mount that holds ``path``."""
    try:
        lines = mounts_file.read_text().splitlines()
    except OSError:
        return None
    target = os.path.realpath(path)
    best: tuple[str, str] | None = None
    for line in lines:
        fields = line.split()
        if len(fields) < 3:
            continue
        # /proc/mounts escapes spaces and the like as octal (\040).
        point = fields[1].encode().decode("unicode_escape")
        inside = target == point or target.startswith(point.rstrip("/") + "/")
        if inside and (best is None or len(point) >= len(best[0])):
            best = (point, fields[2])
    return best


def fillable(path: Path) -> bool:
    """Whether ``path`` lies on a tmpfs small enough to be the campaign's own."""
    mount = mount_of(path)
    if mount is None or mount[1] != "tmpfs" or not path.is_dir():
        return False
    stats = os.statvfs(path)
    return stats.f_blocks * stats.f_frsize <= MAX_FILL_BYTES


def fill(ballast: Path) -> int:
    """Append zeros to ``ballast`` until the file system is full; the bytes it holds."""
    written = 0
    fd = os.open(ballast, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        chunk = bytes(_CHUNK)
        size = _CHUNK
        while size:
            try:
                written += os.write(fd, chunk[:size])
            except OSError as exc:
                if exc.errno != errno.ENOSPC:
                    raise
                # Finer pieces fill the last pages too, so the broker's next write fails.
                size //= 16
    finally:
        os.close(fd)
    return written


@dataclass
class DiskFull:
    broker: int
    ballast: Path
    kind: str = "disk-full"
    filled_bytes: int = 0
    free_after_bytes: int = 0
    healed: bool = field(default=False)

    def describe(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "broker": self.broker,
            "ballast_bytes": self.filled_bytes,
            "free_bytes_after_fill": self.free_after_bytes,
        }

    def heal(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.ballast.unlink()
        self.healed = True


class DiskFullKind:
    """Fill one broker's data directory (chosen at random among those that qualify)."""

    name = "disk-full"

    def _candidates(self, env: Environment) -> list[int]:
        return [b for b in env.brokers if fillable(env.data_dir(b))]

    def applicable(self, env: Environment) -> bool:
        return bool(self._candidates(env))

    def inject(self, env: Environment, rng: random.Random) -> DiskFull:
        candidates = self._candidates(env)
        if not candidates:
            raise RuntimeError("no broker's data directory is a tmpfs of its own")
        broker = rng.choice(candidates)
        data_dir = env.data_dir(broker)
        fault = DiskFull(broker, data_dir / BALLAST_NAME)
        fault.filled_bytes = fill(fault.ballast)
        stats = os.statvfs(data_dir)
        fault.free_after_bytes = stats.f_bavail * stats.f_frsize
        return fault


KINDS = [DiskFullKind()]
