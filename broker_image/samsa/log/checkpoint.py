"""Kafka's checkpoint text files, written atomically: offsets per partition, epochs per log.

Format: a version line ("0"), a count line, then that many space-separated entries.
Writes go to `<name>.tmp`, are fsynced, renamed over the target, and the directory is
fsynced, so a crash leaves either the old file or the new one.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path

CHECKPOINT_VERSION = 0
TMP_SUFFIX = ".tmp"

RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
REPLICATION_OFFSET_CHECKPOINT = "replication-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"


class CorruptCheckpointError(ValueError):
    """A checkpoint file that does not parse; the message names the file and the problem."""


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_checkpoint(path: Path, lines: Iterable[str]) -> None:
    """Atomically replace `path` with the version line, the count and `lines`."""
    entries = list(lines)
    text = f"{CHECKPOINT_VERSION}\n{len(entries)}\n" + "".join(f"{line}\n" for line in entries)
    tmp = path.with_name(path.name + TMP_SUFFIX)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        try:
            write_all(fd, text.encode())
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError:
        # A full disk: the old checkpoint stays, and no half-written one is left to rename.
        tmp.unlink(missing_ok=True)
        raise
    os.replace(tmp, path)
    fsync_dir(path.parent)


def write_all(fd: int, data: bytes) -> None:
    """os.write until every byte is written: a nearly full disk takes a short write first,
    and only the next write fails (ENOSPC)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def read_checkpoint(path: Path, fields: int) -> list[list[str]] | None:
    """The entries of `path` split into `fields` parts; None if the file does not exist."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise CorruptCheckpointError(f"{path}: unreadable: {exc}") from exc
    lines = text.splitlines()
    if len(lines) < 2:
        raise CorruptCheckpointError(f"{path}: missing version or count line")
    if lines[0].strip() != str(CHECKPOINT_VERSION):
        raise CorruptCheckpointError(f"{path}: unknown version {lines[0].strip()!r}")
    try:
        count = int(lines[1])
    except ValueError:
        raise CorruptCheckpointError(f"{path}: bad count line {lines[1]!r}") from None
    body = [line for line in lines[2:] if line.strip()]
    if count != len(body):
        raise CorruptCheckpointError(f"{path}: expected {count} entries, found {len(body)}")
    entries = [line.split() for line in body]
    for entry in entries:
        if len(entry) != fields:
            raise CorruptCheckpointError(f"{path}: malformed entry {' '.join(entry)!r}")
    return entries


class OffsetCheckpointFile:
    """`topic partition offset` lines: recovery points, replication offsets, log starts."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def write(self, offsets: Mapping[tuple[str, int], int]) -> None:
        write_checkpoint(
            self.path,
            (
                f"{topic} {partition} {offset}"
                for (topic, partition), offset in sorted(offsets.items())
            ),
        )

    def read(self) -> dict[tuple[str, int], int] | None:
        """The offsets, or None if there is no file; CorruptCheckpointError if malformed."""
        entries = read_checkpoint(self.path, 3)
        if entries is None:
            return None
        out: dict[tuple[str, int], int] = {}
        for topic, partition, offset in entries:
            try:
                out[(topic, int(partition))] = int(offset)
            except ValueError:
                raise CorruptCheckpointError(
                    f"{self.path}: malformed entry {topic} {partition} {offset}"
                ) from None
        return out
