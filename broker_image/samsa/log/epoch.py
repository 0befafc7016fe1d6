"""LeaderEpochCache: which leader epoch started at which offset, per partition log.

Kafka's LeaderEpochFileCache, backing OffsetForLeaderEpoch and follower truncation.
Changes are held in memory and written to `leader-epoch-checkpoint` by `flush()`; the log
flushes it before advancing its recovery point, and recovery re-derives any later epochs
from the batches' partitionLeaderEpoch, so nothing is lost by deferring the write.
"""

from __future__ import annotations

import bisect
import itertools
import logging
from pathlib import Path
from typing import NamedTuple

from samsa.log.checkpoint import CorruptCheckpointError, read_checkpoint, write_checkpoint

log = logging.getLogger(__name__)

UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1


class EpochEntry(NamedTuple):
    epoch: int
    start_offset: int


class LeaderEpochCache:
    """Ordered (epoch, start offset) entries; both columns strictly increase."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self._entries: list[EpochEntry] = []
        self._dirty = False
        if path is not None:
            self._load(path)

    def _load(self, path: Path) -> None:
        try:
            rows = read_checkpoint(path, 2)
            entries = [EpochEntry(int(e), int(o)) for e, o in rows or []]
        except (CorruptCheckpointError, ValueError) as exc:
            log.warning("ignoring leader epoch checkpoint %s: %s", path, exc)
            self._dirty = True
            return
        for prev, cur in itertools.pairwise(entries):
            if cur.epoch <= prev.epoch or cur.start_offset < prev.start_offset:
                log.warning("ignoring leader epoch checkpoint %s: entries out of order", path)
                self._dirty = True
                return
        self._entries = entries

    @property
    def entries(self) -> list[EpochEntry]:
        return list(self._entries)

    @property
    def latest_entry(self) -> EpochEntry | None:
        return self._entries[-1] if self._entries else None

    @property
    def latest_epoch(self) -> int | None:
        return self._entries[-1].epoch if self._entries else None

    def assign(self, epoch: int, start_offset: int) -> bool:
        """Record that `epoch` starts at `start_offset`; returns whether anything changed.

        As in Kafka, entries that conflict (an epoch or start offset at or above the new
        one) are dropped first.
        """
        if epoch < 0 or start_offset < 0:
            return False
        latest = self.latest_entry
        if latest is not None and latest.epoch == epoch and start_offset >= latest.start_offset:
            return False
        kept = [e for e in self._entries if e.epoch < epoch and e.start_offset < start_offset]
        if len(kept) != len(self._entries):
            dropped = self._entries[len(kept) :]
            log.info(
                "leader epoch %d at offset %d replaces epoch entries %s in %s",
                epoch,
                start_offset,
                dropped,
                self.path,
            )
        kept.append(EpochEntry(epoch, start_offset))
        self._entries = kept
        self._dirty = True
        return True

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """(epoch, end offset) as OffsetForLeaderEpoch answers: the largest epoch <= the
        requested one, and the start offset of the next epoch (or the log end offset)."""
        if requested_epoch == UNDEFINED_EPOCH or not self._entries:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if requested_epoch == self._entries[-1].epoch:
            return requested_epoch, log_end_offset
        epochs = [e.epoch for e in self._entries]
        higher = bisect.bisect_right(epochs, requested_epoch)
        if higher >= len(self._entries):
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if higher == 0:
            # Older than anything we know: the data is gone, point at our first epoch.
            return requested_epoch, self._entries[0].start_offset
        return self._entries[higher - 1].epoch, self._entries[higher].start_offset

    def epoch_for_offset(self, offset: int) -> int | None:
        """The epoch whose range holds `offset`."""
        starts = [e.start_offset for e in self._entries]
        i = bisect.bisect_right(starts, offset) - 1
        return self._entries[i].epoch if i >= 0 else None

    def truncate_from_end(self, end_offset: int) -> None:
        """Drop entries starting at or after `end_offset` (the log was truncated there)."""
        if end_offset < 0:
            return
        kept = [e for e in self._entries if e.start_offset < end_offset]
        if len(kept) != len(self._entries):
            self._entries = kept
            self._dirty = True

    def truncate_from_start(self, start_offset: int) -> None:
        """Drop entries wholly below `start_offset`; the one spanning it now starts there."""
        below = [e for e in self._entries if e.start_offset <= start_offset]
        if not below:
            return
        last = below[-1]
        rest = self._entries[len(below) :]
        updated = [EpochEntry(last.epoch, start_offset), *rest]
        if updated != self._entries:
            self._entries = updated
            self._dirty = True

    def clear(self) -> None:
        if self._entries:
            self._entries = []
            self._dirty = True

    def flush(self) -> None:
        """Write the checkpoint if anything changed since the last write."""
        if self._dirty and self.path is not None:
            write_checkpoint(self.path, (f"{e.epoch} {e.start_offset}" for e in self._entries))
        self._dirty = False
