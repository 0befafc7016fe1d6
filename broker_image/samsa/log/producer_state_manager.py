"""ProducerStateManager: the idempotent producers of one partition, their snapshots, and
rebuilding their state from the log (Kafka's ProducerStateManager).

The Log calls it at five points: before a leader append (`prepare_leader_append`, which may
refuse the append or name the batch it duplicates), after any append (`complete_append`,
`append_replicated`), when a segment rolls (`take_snapshot`), when the log is truncated
(`truncate_to`, `truncate_fully`), and when retention deletes segments
(`delete_snapshots_below`).  The broker expires idle producers on a schedule
(`remove_expired_producers`, producer.id.expiration.ms).

On start-up the state is the latest snapshot at or below the recovery point (everything below
it is known to be on disk) plus the batches after it, replayed up to the log end offset.  Only
batch headers are read (producer id, epoch, base sequence, last offset delta, max timestamp),
never records.  So a compacted segment rebuilds the same state as the original did, provided
the log cleaner keeps each producer's last batch, if need be as an empty batch (header only),
as Kafka's cleaner does: `last_data_offsets()` names those batches.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import NamedTuple

from samsa.log.producer_snapshot import (
    CorruptSnapshotError,
    fsync_file,
    list_snapshots,
    read_snapshot,
    remove_temporary_files,
    snapshot_path,
    write_snapshot,
)
from samsa.log.producer_state import (
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    AppendOrigin,
    BatchMetadata,
    InvalidProducerRecordError,
    ProducerAppendInfo,
    ProducerStateEntry,
    in_sequence,
    increment_sequence,
)
from samsa.protocol.errors import ErrorCode, KafkaApiError
from samsa.protocol.records import CONTROL_MASK, TRANSACTIONAL_MASK, BatchHeader

log = logging.getLogger(__name__)

# (start, end) -> the headers of the log's batches holding offsets in [start, end).
HeaderSource = Callable[[int, int], Iterable[BatchHeader]]


class Continuation(NamedTuple):
    """The common case, kept cheap: one batch that follows its producer's last one."""

    entry: ProducerStateEntry
    batch: BatchMetadata


PendingUpdates = dict[int, ProducerAppendInfo] | Continuation

_TRANSACTIONAL_OR_CONTROL = TRANSACTIONAL_MASK | CONTROL_MASK


def _refuse_transactional_or_control(h: BatchHeader) -> None:
    """Kafka's rules for client batches, with no transactions on this broker."""
    if h.is_control:
        raise KafkaApiError(ErrorCode.invalid_record, "Clients may not write control batches")
    raise KafkaApiError(
        ErrorCode.transactional_id_authorization_failed,
        "Transactional batches need a transactional id; this broker has no transactions",
    )


class ProducerStateManager:
    """Producer id -> ProducerStateEntry for one partition, covering offsets below
    `map_end_offset`."""

    def __init__(self, dir: Path, topic_partition: str) -> None:
        self._dir = dir
        self.topic_partition = topic_partition
        self.producers: dict[int, ProducerStateEntry] = {}
        self.map_end_offset = 0
        self._unflushed_snapshots: set[int] = set()
        # True while the newest snapshot holds exactly the current state.
        self._snapshot_current = False

    # -- queries ---------------------------------------------------------------------------

    @property
    def is_empty(self) -> bool:
        return not self.producers

    def last_entry(self, producer_id: int) -> ProducerStateEntry | None:
        return self.producers.get(producer_id)

    def last_data_offsets(self) -> dict[int, int]:
        """Producer id -> last offset of its last batch: the batches a cleaner must keep."""
        return {
            pid: entry.last_data_offset
            for pid, entry in self.producers.items()
            if not entry.is_empty
        }

    @property
    def snapshot_offsets(self) -> list[int]:
        return list_snapshots(self._dir)

    # -- appends ---------------------------------------------------------------------------

    def prepare_leader_append(
        self, headers: Sequence[BatchHeader], first_offset: int, log_append_time: int
    ) -> PendingUpdates | BatchMetadata | None:
        """Check a leader append whose batches will get offsets from `first_offset` on.

        Returns the BatchMetadata of a batch this append repeats (answer with its offsets
        and append nothing), else the pending updates (None if no batch has a producer id)
        for `complete_append` once the batches are written.  Raises InvalidProducerEpochError,
        OutOfOrderSequenceError or InvalidProducerRecordError, and refuses transactional and
        control batches (no transactions here), before anything is written.
        """
        producers = self.producers
        if len(headers) == 1:
            h = headers[0]
            entry = producers.get(h.producer_id)
            if (
                entry is not None
                and h.producer_epoch == entry.producer_epoch
                and h.base_sequence >= 0
                and not h.attributes & _TRANSACTIONAL_OR_CONTROL
            ):
                last_seq = increment_sequence(h.base_sequence, h.last_offset_delta)
                duplicate = entry.find_duplicate_batch(h.producer_epoch, h.base_sequence, last_seq)
                if duplicate is not None:
                    return duplicate
                if in_sequence(entry.last_seq, h.base_sequence):
                    ts = h.max_timestamp if log_append_time < 0 else log_append_time
                    last = first_offset + h.last_offset_delta
                    return Continuation(
                        entry, BatchMetadata(last_seq, last, h.last_offset_delta, ts)
                    )
        updates: dict[int, ProducerAppendInfo] | None = None
        offset = first_offset
        for h in headers:
            last = offset + h.last_offset_delta
            pid = h.producer_id
            if h.attributes & _TRANSACTIONAL_OR_CONTROL:
                _refuse_transactional_or_control(h)
            if pid != NO_PRODUCER_ID:
                if h.base_sequence < 0:
                    raise InvalidProducerRecordError(
                        f"Invalid sequence number {h.base_sequence} in a record batch with "
                        f"producer id {pid}"
                    )
                last_seq = increment_sequence(h.base_sequence, h.last_offset_delta)
                entry = producers.get(pid)
                if entry is not None:
                    duplicate = entry.find_duplicate_batch(
                        h.producer_epoch, h.base_sequence, last_seq
                    )
                    if duplicate is not None:
                        return duplicate
                if updates is None:
                    updates = {}
                info = updates.get(pid)
                if info is None:
                    info = updates[pid] = ProducerAppendInfo(
                        self.topic_partition,
                        pid,
                        entry or ProducerStateEntry(pid),
                        AppendOrigin.CLIENT,
                    )
                info.append_data_batch(
                    h.producer_epoch,
                    h.base_sequence,
                    last_seq,
                    h.max_timestamp if log_append_time < 0 else log_append_time,
                    offset,
                    last,
                )
            offset = last + 1
        return updates

    def complete_append(self, updates: PendingUpdates | None, next_offset: int) -> None:
        """The batches checked by `prepare_leader_append` are written: take them on."""
        if isinstance(updates, Continuation):
            entry, batch = updates
            entry.batches.append(batch)
            entry.last_timestamp = batch.timestamp
        elif updates:
            producers = self.producers
            for pid, info in updates.items():
                entry = producers.get(pid)
                if entry is None:
                    producers[pid] = info.updated_entry
                else:
                    entry.update(info.updated_entry)
        self.map_end_offset = next_offset
        self._snapshot_current = False

    def append_replicated(self, headers: Iterable[BatchHeader], next_offset: int) -> None:
        """Batches appended with the offsets they carry (a follower, or recovery): no checks
        beyond a warning for an epoch going backwards."""
        updates: dict[int, ProducerAppendInfo] = {}
        for h in headers:
            pid = h.producer_id
            if pid == NO_PRODUCER_ID or h.is_control:
                continue
            info = updates.get(pid)
            if info is None:
                entry = self.producers.get(pid) or ProducerStateEntry(pid)
                info = updates[pid] = ProducerAppendInfo(
                    self.topic_partition, pid, entry, AppendOrigin.REPLICATION
                )
            last_seq = (
                NO_SEQUENCE
                if h.base_sequence < 0
                else increment_sequence(h.base_sequence, h.last_offset_delta)
            )
            info.append_data_batch(
                h.producer_epoch,
                h.base_sequence,
                last_seq,
                h.max_timestamp,
                h.base_offset,
                h.base_offset + h.last_offset_delta,
            )
        self.complete_append(updates, next_offset)

    def remove_expired_producers(self, now_ms: int, expiration_ms: int) -> int:
        """Forget producers idle for expiration_ms (by their last batch's timestamp, as
        Kafka); returns how many went."""
        expired = [
            pid
            for pid, entry in self.producers.items()
            if now_ms - entry.last_timestamp >= expiration_ms
        ]
        for pid in expired:
            del self.producers[pid]
        if expired:
            self._snapshot_current = False
        return len(expired)

    # -- snapshots -------------------------------------------------------------------------

    def take_snapshot(self, offset: int | None = None, fsync: bool = False) -> None:
        """Write the state as `<map end offset>.snapshot`; `offset` first moves the map end
        offset up (a follower's segment may start beyond the log end)."""
        if offset is not None and offset > self.map_end_offset:
            self.map_end_offset = offset
        at = self.map_end_offset
        write_snapshot(snapshot_path(self._dir, at), self.producers.values(), fsync)
        if fsync:
            self._unflushed_snapshots.discard(at)
        else:
            self._unflushed_snapshots.add(at)
        self._snapshot_current = True

    def snapshot_if_changed(self) -> None:
        """At clean shutdown: a durable snapshot at the log end, unless one is there."""
        if not self._snapshot_current and self.map_end_offset > 0:
            self.take_snapshot(fsync=True)

    def flush_snapshots(self, upto: int) -> None:
        """fsync the snapshots written since the last flush, up to offset `upto`."""
        for offset in sorted(self._unflushed_snapshots):
            if offset > upto:
                break
            path = snapshot_path(self._dir, offset)
            if path.exists():
                fsync_file(path)
            self._unflushed_snapshots.discard(offset)

    def delete_snapshots_below(self, offset: int) -> None:
        """Retention deleted the segments below `offset`: their snapshots go with them."""
        for at in list_snapshots(self._dir):
            if at < offset:
                self._delete_snapshot(at)

    def _delete_snapshots_above(self, offset: int) -> None:
        for at in list_snapshots(self._dir):
            if at > offset:
                self._delete_snapshot(at)

    def _delete_snapshot(self, at: int) -> None:
        snapshot_path(self._dir, at).unlink(missing_ok=True)
        self._unflushed_snapshots.discard(at)

    # -- loading, truncation ---------------------------------------------------------------

    def load(
        self, log_start: int, log_end: int, recovery_point: int, headers: HeaderSource
    ) -> None:
        """Start-up: the latest readable snapshot at or below the recovery point, then the
        log's batches from there to the log end."""
        remove_temporary_files(self._dir)
        # Snapshots beyond the log end outlived a tail that recovery cut off.
        self._delete_snapshots_above(log_end)
        self._reload(min(recovery_point, log_end), log_start, log_end, headers)

    def truncate_to(self, offset: int, log_start: int, headers: HeaderSource) -> None:
        """The log was truncated to `offset` (a follower): rebuild the state as it was there."""
        self._delete_snapshots_above(offset)
        if not self.producers and self.map_end_offset >= offset:
            # Truncation cannot bring producers back: nothing to rebuild.
            self.map_end_offset = offset
            self._snapshot_current = False
            return
        self._reload(offset, log_start, offset, headers)

    def truncate_fully(self, offset: int) -> None:
        """The log was emptied and starts again at `offset`."""
        for at in list_snapshots(self._dir):
            self._delete_snapshot(at)
        self.producers = {}
        self.map_end_offset = offset
        self._snapshot_current = False

    def _reload(
        self, snapshot_limit: int, log_start: int, log_end: int, headers: HeaderSource
    ) -> None:
        self.producers = {}
        start = log_start
        loaded_at = None
        for at in reversed(list_snapshots(self._dir)):
            if at > snapshot_limit:
                continue
            try:
                entries = read_snapshot(snapshot_path(self._dir, at))
            except CorruptSnapshotError as exc:
                log.warning("ignoring producer state snapshot: %s; deleting it", exc)
                self._delete_snapshot(at)
                continue
            self.producers = {entry.producer_id: entry for entry in entries}
            start = max(at, log_start)
            loaded_at = at
            break
        self.map_end_offset = start
        if start < log_end:
            self.append_replicated(headers(start, log_end), log_end)
        self.map_end_offset = log_end
        # A snapshot at the log end (a clean shutdown's) need not be written again.
        self._snapshot_current = loaded_at == log_end
        log.debug(
            "%s: producer state of %d producers loaded from offset %d to %d",
            self.topic_partition,
            len(self.producers),
            start,
            log_end,
        )
