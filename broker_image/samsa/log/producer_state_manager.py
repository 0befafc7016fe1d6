"""ProducerStateManager: the idempotent producers of one partition, their snapshots, and
rebuilding their state from the log (Kafka's ProducerStateManager).

It also follows transactions: which producers have one ongoing and from which offset, and
the completed ones whose markers the high watermark has not passed yet; together they give
the last stable offset.  An aborted transaction is written to the aborted transactions index
(through `txn_index`, which the Log points at its segments' `.txnindex` files) when its
marker is appended, replicated or replayed.

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
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import NamedTuple, Protocol

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
    CompletedTxn,
    InvalidProducerRecordError,
    ProducerAppendInfo,
    ProducerStateEntry,
    in_sequence,
    increment_sequence,
)
from samsa.log.txn_index import AbortedTxn
from samsa.protocol.control import EndTxnMarker
from samsa.protocol.errors import ErrorCode, KafkaApiError
from samsa.protocol.record_batch import CONTROL_MASK, TRANSACTIONAL_MASK, BatchHeader

log = logging.getLogger(__name__)

# (start, end) -> the headers of the log's batches holding offsets in [start, end).
HeaderSource = Callable[[int, int], Iterable[BatchHeader]]


class Continuation(NamedTuple):
    """The common case, kept cheap: one batch that follows its producer's last one."""

    entry: ProducerStateEntry
    batch: BatchMetadata


class Pending(NamedTuple):
    """What one append changes: each producer's updated entry, and the transactions it
    opened (producer id, first offset) and closed, in log order."""

    infos: dict[int, ProducerAppendInfo]
    events: list[tuple[int, int] | CompletedTxn]


PendingUpdates = Pending | Continuation

# (index of the batch in the append, its header) -> the marker of that control batch.
MarkerSource = Callable[[int, BatchHeader], EndTxnMarker | None]


def no_markers(i: int, h: BatchHeader) -> EndTxnMarker | None:
    return None


class TxnIndexSink(Protocol):
    """Where aborted transactions go: the segments' `.txnindex` files."""

    def append_aborted(self, txn: AbortedTxn) -> None: ...

    def truncate_aborted(self, offset: int) -> None: ...


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
        # Producer id -> first offset of its ongoing transaction.
        self.ongoing_txns: dict[int, int] = {}
        # Completed transactions whose markers are not below the high watermark yet.
        self.unreplicated_txns: deque[CompletedTxn] = deque()
        self.txn_index: TxnIndexSink | None = None
        # Producer id -> the token of a Produce waiting for its transaction's verification
        # (KIP-890); any append of that producer (a marker above all) drops it, so a batch
        # verified before its transaction ended is not appended after the marker.
        self.verification_guards: dict[int, object] = {}

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
        self,
        headers: Sequence[BatchHeader],
        first_offset: int,
        log_append_time: int,
        origin: AppendOrigin = AppendOrigin.CLIENT,
        marker_of: MarkerSource = no_markers,
    ) -> PendingUpdates | BatchMetadata | None:
        """Check a leader append whose batches will get offsets from `first_offset` on.

        Returns the BatchMetadata of a batch this append repeats (answer with its offsets
        and append nothing), else the pending updates (None if no batch has a producer id)
        for `complete_append` once the batches are written.  Raises InvalidProducerEpochError,
        OutOfOrderSequenceError, InvalidTxnStateError, TransactionCoordinatorFencedError or
        InvalidProducerRecordError before anything is written.  Control batches come only
        from the coordinator (origin COORDINATOR, `marker_of` reading their markers).
        """
        producers = self.producers
        if len(headers) == 1 and origin is AppendOrigin.CLIENT:
            h = headers[0]
            entry = producers.get(h.producer_id)
            attrs = h.attributes
            if (
                entry is not None
                and h.producer_epoch == entry.producer_epoch
                and h.base_sequence >= 0
                and not attrs & CONTROL_MASK
                and bool(attrs & TRANSACTIONAL_MASK) == (entry.current_txn_first_offset >= 0)
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
        updates: Pending | None = None
        offset = first_offset
        for i, h in enumerate(headers):
            last = offset + h.last_offset_delta
            pid = h.producer_id
            if h.is_control:
                if origin is AppendOrigin.CLIENT:
                    raise KafkaApiError(
                        ErrorCode.invalid_record, "Clients are not allowed to write control records"
                    )
                marker = marker_of(i, h)
                if pid == NO_PRODUCER_ID or marker is None:
                    raise KafkaApiError(
                        ErrorCode.invalid_record, "a control batch without a transaction marker"
                    )
                if updates is None:
                    updates = Pending({}, [])
                info = self._info(updates, pid, origin)
                ts = h.max_timestamp if log_append_time < 0 else log_append_time
                completed = info.append_end_txn_marker(
                    marker.committed, marker.coordinator_epoch, h.producer_epoch, offset, ts
                )
                if completed is not None:
                    updates.events.append(completed)
            elif pid != NO_PRODUCER_ID:
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
                    updates = Pending({}, [])
                info = self._info(updates, pid, origin)
                info.append_data_batch(
                    h.producer_epoch,
                    h.base_sequence,
                    last_seq,
                    h.max_timestamp if log_append_time < 0 else log_append_time,
                    offset,
                    last,
                    h.is_transactional,
                )
                if info.started_txn >= 0:
                    updates.events.append((pid, info.started_txn))
                    info.started_txn = -1
            elif h.is_transactional:
                raise InvalidProducerRecordError("a transactional record batch needs a producer id")
            offset = last + 1
        return updates

    def _info(self, updates: Pending, pid: int, origin: AppendOrigin) -> ProducerAppendInfo:
        info = updates.infos.get(pid)
        if info is None:
            info = updates.infos[pid] = ProducerAppendInfo(
                self.topic_partition,
                pid,
                self.producers.get(pid) or ProducerStateEntry(pid),
                origin,
            )
        return info

    def complete_append(self, updates: PendingUpdates | None, next_offset: int) -> None:
        """The batches checked by `prepare_leader_append` are written: take them on."""
        if isinstance(updates, Continuation):
            entry, batch = updates
            entry.batches.append(batch)
            entry.last_timestamp = batch.timestamp
        elif updates:
            producers = self.producers
            for pid, info in updates.infos.items():
                self.verification_guards.pop(pid, None)
                existing = producers.get(pid)
                if existing is None:
                    producers[pid] = info.updated_entry
                else:
                    existing.update(info.updated_entry)
            for event in updates.events:
                if isinstance(event, CompletedTxn):
                    self._complete_txn(event)
                else:
                    self.ongoing_txns[event[0]] = event[1]
        self.map_end_offset = next_offset
        self._snapshot_current = False

    def _complete_txn(self, txn: CompletedTxn) -> None:
        """Kafka's order: the aborted transactions index first, with the LSO this
        transaction leaves behind, then the transaction leaves the ongoing ones."""
        if txn.is_aborted and self.txn_index is not None:
            self.txn_index.append_aborted(
                AbortedTxn(
                    txn.producer_id,
                    txn.first_offset,
                    txn.last_offset,
                    self._last_stable_offset_after(txn),
                )
            )
        self.ongoing_txns.pop(txn.producer_id, None)
        # Until the marker is below the high watermark the transaction still holds the LSO.
        self.unreplicated_txns.append(txn)

    def _last_stable_offset_after(self, txn: CompletedTxn) -> int:
        others = [first for pid, first in self.ongoing_txns.items() if pid != txn.producer_id]
        return min(others) if others else txn.last_offset + 1

    def append_replicated(
        self,
        headers: Iterable[BatchHeader],
        next_offset: int,
        marker_of: MarkerSource = no_markers,
    ) -> None:
        """Batches appended with the offsets they carry (a follower, or recovery): no checks
        beyond a warning for an epoch going backwards.  `marker_of` reads the marker of a
        control batch."""
        updates = Pending({}, [])
        for i, h in enumerate(headers):
            pid = h.producer_id
            if pid == NO_PRODUCER_ID:
                continue
            info = self._info(updates, pid, AppendOrigin.REPLICATION)
            if h.is_control:
                marker = marker_of(i, h)
                if marker is None:
                    continue
                completed = info.append_end_txn_marker(
                    marker.committed,
                    marker.coordinator_epoch,
                    h.producer_epoch,
                    h.base_offset,
                    h.max_timestamp,
                )
                if completed is not None:
                    updates.events.append(completed)
                continue
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
                h.is_transactional,
            )
            if info.started_txn >= 0:
                updates.events.append((pid, info.started_txn))
                info.started_txn = -1
        self.complete_append(updates, next_offset)

    # -- transactions ----------------------------------------------------------------------

    def on_high_watermark(self, high_watermark: int) -> None:
        """Completed transactions whose markers the high watermark passed stop holding the
        LSO (Kafka's onHighWatermarkUpdated)."""
        unreplicated = self.unreplicated_txns
        while unreplicated and unreplicated[0].last_offset < high_watermark:
            unreplicated.popleft()

    def first_unstable_offset(self) -> int | None:
        """The first offset of the earliest transaction not yet complete and replicated."""
        first: int | None = None
        if self.ongoing_txns:
            first = min(self.ongoing_txns.values())
        for txn in self.unreplicated_txns:
            if first is None or txn.first_offset < first:
                first = txn.first_offset
        return first

    def last_stable_offset(self, high_watermark: int) -> int:
        """min(first unstable offset, high watermark) (Kafka's lastStableOffset)."""
        if not self.ongoing_txns and not self.unreplicated_txns:
            return high_watermark
        self.on_high_watermark(high_watermark)
        first = self.first_unstable_offset()
        return high_watermark if first is None else min(first, high_watermark)

    def remove_expired_producers(self, now_ms: int, expiration_ms: int) -> int:
        """Forget producers idle for expiration_ms (by their last batch's timestamp, as
        Kafka); returns how many went."""
        # A producer with a transaction open stays until the transaction ends (Kafka's rule).
        expired = [
            pid
            for pid, entry in self.producers.items()
            if now_ms - entry.last_timestamp >= expiration_ms and entry.current_txn_first_offset < 0
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
        self,
        log_start: int,
        log_end: int,
        recovery_point: int,
        headers: HeaderSource,
        marker_of: MarkerSource = no_markers,
    ) -> None:
        """Start-up: the latest readable snapshot at or below the recovery point, then the
        log's batches from there to the log end."""
        remove_temporary_files(self._dir)
        # Snapshots beyond the log end outlived a tail that recovery cut off.
        self._delete_snapshots_above(log_end)
        self._reload(min(recovery_point, log_end), log_start, log_end, headers, marker_of)

    def truncate_to(
        self,
        offset: int,
        log_start: int,
        headers: HeaderSource,
        marker_of: MarkerSource = no_markers,
    ) -> None:
        """The log was truncated to `offset` (a follower): rebuild the state as it was there."""
        self._delete_snapshots_above(offset)
        if not self.producers and self.map_end_offset >= offset:
            # Truncation cannot bring producers back: nothing to rebuild.
            self.map_end_offset = offset
            self._snapshot_current = False
            return
        self._reload(offset, log_start, offset, headers, marker_of)

    def truncate_fully(self, offset: int) -> None:
        """The log was emptied and starts again at `offset`."""
        for at in list_snapshots(self._dir):
            self._delete_snapshot(at)
        self.producers = {}
        self.ongoing_txns = {}
        self.unreplicated_txns.clear()
        self.map_end_offset = offset
        self._snapshot_current = False

    def _reload(
        self,
        snapshot_limit: int,
        log_start: int,
        log_end: int,
        headers: HeaderSource,
        marker_of: MarkerSource,
    ) -> None:
        self.producers = {}
        self.ongoing_txns = {}
        self.unreplicated_txns.clear()
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
            self.ongoing_txns = {
                entry.producer_id: entry.current_txn_first_offset
                for entry in entries
                if entry.current_txn_first_offset >= 0
            }
            start = max(at, log_start)
            loaded_at = at
            break
        self.map_end_offset = start
        if start < log_end:
            # The replay writes the aborted transactions it meets again.
            if self.txn_index is not None:
                self.txn_index.truncate_aborted(start)
            self.append_replicated(headers(start, log_end), log_end, marker_of)
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
