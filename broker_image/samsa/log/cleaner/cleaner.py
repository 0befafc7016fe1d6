"""Cleaner: compacts one log (Kafka's Cleaner), as a generator of small steps.

One clean: build the offset map (key -> last offset) over the dirty section, then rewrite
every inactive segment below the map's end in groups of at most segment.bytes, each group
into one `.cleaned` segment that is fsynced and swapped in (samsa.log.swap).  A record is
kept if it is the latest of its key in the map (or beyond the map), unless it is a tombstone
whose delete horizon has passed.  A batch that keeps every record is copied byte for byte;
one that loses records is rebuilt (samsa.protocol.record_filter); one that loses them all is
dropped, unless it is a producer's last batch or the last batch of the cleaning round, which
stay as empty batches, as in Kafka.

Tombstones follow KIP-534: the first clean that keeps a tombstone stamps its batch with a
delete horizon (now + delete.retention.ms); a clean after the horizon drops it.

Transactions, as Kafka's cleaner: the cleanable range ends at the last stable offset, so
every transaction in it is decided.  The batches of aborted transactions (named by the
segments' `.txnindex`) are neither mapped nor kept (an empty batch stays where a producer's
last batch was).  A marker stays while a batch of its transaction was read in this clean;
once none was, it is stamped with a delete horizon (now + delete.retention.ms), so that
consumers part way through the transaction still see it, and a clean after the horizon
drops it.  The cleaned segment keeps the aborted transactions index entries of the abort
markers it keeps.

`clean` yields None between batches, Offload(fn) for blocking work (the fsync of a cleaned
segment) that the caller may run in a thread, and OnLoop(fn) for what must run where the log
is owned, the event loop: the last check and the swap, as one step, and reading producer
state.  The caller sends back True when it let other work run (after which the cleaner checks
that its log and segments are still there), a step's result, or throws its exception in.  So
the generator may run on the loop in slices, or in a thread of its own.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Generator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from samsa.log.cleaner.cleaner_manager import LogToClean, segments_overlapping
from samsa.log.cleaner.offset_map import OffsetMap
from samsa.log.log import Log
from samsa.log.segment import CLEANED_SUFFIX, LogSegment
from samsa.log.swap import CrashHook, discard_cleaned, swap_in
from samsa.log.txn_index import AbortedTxn
from samsa.protocol.control import read_end_txn_marker
from samsa.protocol.record_batch import (
    BatchHeader,
    CorruptRecordError,
    batch_crc_ok,
    read_batch_header,
)
from samsa.protocol.record_filter import (
    RecordSpan,
    batch_body,
    delete_horizon,
    empty_batch,
    parse_records,
    rebuild_batch,
    record_keys,
)
from samsa.wall_clock import wall_clock_ms

log = logging.getLogger(__name__)

INT32_MAX = 2**31 - 1


class Offload(NamedTuple):
    """Blocking work the driver may run off the event loop; its result is sent back."""

    fn: Callable[[], object]


class OnLoop(NamedTuple):
    """Work on the live log that the driver must run on the event loop; its result is sent
    back (or its exception thrown in)."""

    fn: Callable[[], object]


Step = Offload | OnLoop | None
# Sent back into the generator: after a None step, whether other work ran meanwhile.
Steps = Generator[Step, Any, Any]
# Raises LogCleaningAbortedError if cleaning must stop (aborted, log deleted).
CheckDone = Callable[[], None]
# The same, and also if any of the given segments changed under the cleaner.
CheckSegments = Callable[[Sequence[LogSegment]], None]
# The last offset of each active producer's last data batch (pid -> offset).
ActiveProducers = Callable[[Log], Mapping[int, int]]


class LogCleaningAbortedError(Exception):
    """The log changed under the cleaner (deleted, truncated, retention) or cleaning was
    aborted; nothing was swapped in by the step that raised it."""


@dataclass
class CleanerStats:
    """Kafka's CleanerStats: what one clean read, kept and took."""

    map_bytes_read: int = 0
    map_messages_read: int = 0
    bytes_read: int = 0
    bytes_written: int = 0
    messages_read: int = 0
    messages_written: int = 0
    invalid_messages: int = 0
    buffer_utilization: float = 0.0
    start: float = field(default_factory=time.monotonic)
    map_done: float | None = None
    end: float | None = None

    @property
    def elapsed_s(self) -> float:
        return (self.end or time.monotonic()) - self.start

    @property
    def recopy_ratio(self) -> float:
        return self.bytes_written / self.bytes_read if self.bytes_read else 0.0


def group_segments_by_size(
    segments: Sequence[LogSegment], max_size: int, max_index_size: int, first_uncleanable: int
) -> list[list[LogSegment]]:
    """Consecutive segments whose log and index data each fit one segment (Kafka's
    groupSegmentsBySize), and whose offsets stay within an int32 of the group's base."""
    groups: list[list[LogSegment]] = []
    i = 0
    while i < len(segments):
        group = [segments[i]]
        log_size = segments[i].size
        index_size = _index_bytes(segments[i].offset_index.path)
        time_size = _index_bytes(segments[i].time_index.path)
        i += 1
        while i < len(segments):
            s = segments[i]
            last = (
                segments[i + 1].base_offset - 1 if i + 1 < len(segments) else first_uncleanable - 1
            )
            if (
                log_size + s.size > max_size
                or index_size + _index_bytes(s.offset_index.path) > max_index_size
                or time_size + _index_bytes(s.time_index.path) > max_index_size
                or (s.size and last - group[0].base_offset > INT32_MAX)
            ):
                break
            group.append(s)
            log_size += s.size
            index_size += _index_bytes(s.offset_index.path)
            time_size += _index_bytes(s.time_index.path)
            i += 1
        groups.append(group)
    return groups


def _index_bytes(path: os.PathLike[str]) -> int:
    try:
        return os.path.getsize(path)
    except FileNotFoundError:
        return 0


def _no_crash(point: str) -> None:
    pass


class _ProducerLastOffsets:
    """The offset that ends each producer's last batch: such batches are never dropped
    whole, so that a producer's sequence numbers and epoch outlive its records (Kafka keeps
    the last batch of every active producer; the idempotent producer relies on it).

    Without a producer-state provider every producer id seen in the log counts, found by a
    header walk of the whole log, done only once a batch with a producer id turns up."""

    def __init__(self, provider: ActiveProducers | None, log_: Log) -> None:
        self._provider = provider
        self._log = log_
        self.offsets: Mapping[int, int] | None = None

    def load(self, check: CheckSegments) -> Steps:
        if self._provider is not None:
            provider, log_ = self._provider, self._log
            self.offsets = yield OnLoop(lambda: provider(log_))
            return
        last: dict[int, int] = {}
        for segment in self._log.segments:
            for _, h, _ in segment.iter_batches():
                # Data batches only, as Kafka's lastDataOffset: a marker is not one.
                if h.producer_id >= 0 and not h.is_control:
                    last[h.producer_id] = h.last_offset
                if (yield None):
                    check(())
        self.offsets = last


@dataclass
class _Round:
    """What every step of one clean shares."""

    log: Log
    now: int
    stats: CleanerStats
    producers: _ProducerLastOffsets
    upper_bound: int  # the first uncleanable offset
    check: CheckSegments
    txns: _TxnsRead = field(default_factory=lambda: _TxnsRead())


@dataclass
class _TxnsRead:
    """What a clean has read of transactions so far, in offset order (Kafka's
    CleanedTransactionMetadata): whether each marker's transaction still has batches."""

    # (producer id, abort marker offset) of aborted transactions with a batch read.
    aborted_seen: set[tuple[int, int]] = field(default_factory=set)
    # Producers with a batch of a committed transaction read since their last marker.
    committed_seen: set[int] = field(default_factory=set)
    # Offsets of the abort markers kept: their index entries go to the cleaned segment.
    kept_abort_markers: set[int] = field(default_factory=set)


def _aborted_ranges(txns: Sequence[AbortedTxn]) -> dict[int, list[tuple[int, int]]]:
    """Producer id -> (first offset, marker offset) of each of its aborted transactions."""
    ranges: dict[int, list[tuple[int, int]]] = {}
    for t in txns:
        ranges.setdefault(t.producer_id, []).append((t.first_offset, t.last_offset))
    return ranges


def _abort_marker_of(h: BatchHeader, aborted: Mapping[int, list[tuple[int, int]]]) -> int | None:
    """The offset of the abort marker ending the aborted transaction `h` is part of."""
    if not aborted or not h.is_transactional or h.is_control:
        return None
    for first, last in aborted.get(h.producer_id, ()):
        if first <= h.base_offset < last:
            return last
    return None


def _in_aborted_txn(h: BatchHeader, aborted: Mapping[int, list[tuple[int, int]]]) -> bool:
    return _abort_marker_of(h, aborted) is not None


class _Unchanged:
    """Whether the segments a clean reads are as they were when it began.

    Between slices the log may change: retention deletes segments from the front (harmless:
    what the clean would have dropped goes anyway), and truncation (a follower's, after a
    leader change) cuts it from the back, possibly below the high watermark.  A truncation
    into the cleanable range shrinks or removes its last segment, and the offset map may
    then name offsets that are gone: so that segment, and those being read, must be present
    at their original sizes, or the clean stops before it swaps anything in."""

    def __init__(self, log_: Log, below: int, check_done: CheckDone) -> None:
        self._log = log_
        segments = [s for s in log_.segments[:-1] if s.base_offset < below]
        self._sizes = {id(s): s.size for s in segments}
        self._last = segments[-1:]
        self._check_done = check_done

    def __call__(self, segments: Sequence[LogSegment]) -> None:
        self._check_done()
        live = {id(s) for s in self._log.segments}
        for s in (*segments, *self._last):
            if id(s) not in live or self._sizes.get(id(s), s.size) != s.size:
                raise LogCleaningAbortedError(
                    f"segment {s.base_offset} of {self._log} was deleted or truncated meanwhile"
                )


class Cleaner:
    """Cleans one log at a time with one offset map."""

    def __init__(
        self,
        offset_map: OffsetMap,
        *,
        io_buffer_size: int = 512 * 1024,
        active_producers: ActiveProducers | None = None,
        now_ms: Callable[[], int] = wall_clock_ms,
        crash_hook: CrashHook = _no_crash,
    ) -> None:
        self.offset_map = offset_map
        self.io_buffer_size = io_buffer_size
        self.active_producers = active_producers
        self.now_ms = now_ms
        self.crash_hook = crash_hook
        self.current: CleanerStats | None = None
        self._unchanged: _Unchanged | None = None
        # The aborted transactions of the log being cleaned, by producer.
        self._aborted: dict[int, list[tuple[int, int]]] = {}

    def check_unchanged(self) -> None:
        """LogCleaningAbortedError if the log of the latest clean changed under it."""
        if self._unchanged is not None:
            self._unchanged(())

    def clean(self, to_clean: LogToClean, check_done: CheckDone) -> Steps:
        """Clean the log; returns (the first offset not cleaned, CleanerStats)."""
        plog = to_clean.log
        now = self.now_ms()
        stats = self.current = CleanerStats()
        check = self._unchanged = _Unchanged(plog, to_clean.first_uncleanable_offset, check_done)
        self._aborted = {}
        if any(s.txn_index.entries for s in plog.segments):
            upper = to_clean.first_uncleanable_offset
            txns = yield OnLoop(lambda: plog.collect_aborted_txns(plog.log_start_offset, upper))
            self._aborted = _aborted_ranges(txns)
        yield from self._build_offset_map(
            plog, to_clean.first_dirty_offset, to_clean.first_uncleanable_offset, stats, check
        )
        end_offset = self.offset_map.latest_offset + 1
        stats.map_done = time.monotonic()
        segments = [s for s in plog.segments[:-1] if s.base_offset < end_offset]
        groups = group_segments_by_size(
            segments,
            plog.config.segment_bytes,
            plog.config.segment_index_bytes,
            to_clean.first_uncleanable_offset,
        )
        log.info(
            "cleaning %s: offsets below %d, %d segments in %d groups, %d keys mapped",
            plog,
            end_offset,
            len(segments),
            len(groups),
            self.offset_map.size,
        )
        round_ = _Round(
            plog,
            now,
            stats,
            _ProducerLastOffsets(self.active_producers, plog),
            to_clean.first_uncleanable_offset,
            check,
        )
        for group in groups:
            yield from self._clean_segments(round_, group)
        stats.buffer_utilization = self.offset_map.utilization
        stats.end = time.monotonic()
        return end_offset, stats

    # -- the offset map ---------------------------------------------------------------------

    def _build_offset_map(
        self, plog: Log, start: int, end: int, stats: CleanerStats, check: CheckSegments
    ) -> Steps:
        self.offset_map.clear()
        dirty = segments_overlapping(plog, start, end)
        for i, segment in enumerate(dirty):
            following = dirty[i + 1].base_offset if i + 1 < len(dirty) else end
            full = yield from self._map_segment(segment, start, following, stats, check)
            if full:
                log.info(
                    "offset map full for %s: segment %d mapped up to offset %d",
                    plog,
                    segment.base_offset,
                    self.offset_map.latest_offset,
                )
                return

    def _map_segment(
        self,
        segment: LogSegment,
        start: int,
        following: int,
        stats: CleanerStats,
        check: CheckSegments,
    ) -> Steps:
        """Map the keys of one dirty segment; True if the map filled up part way."""
        found = segment.translate_offset(start)
        position = found[0] if found is not None else segment.size
        offset_map = self.offset_map
        put = offset_map.put
        for _, h, view in segment.iter_batches(position, self.io_buffer_size):
            if h.last_offset >= start:
                if not h.is_control and not _in_aborted_txn(h, self._aborted):
                    base = h.base_offset
                    _check_crc(view, h)
                    for delta, key in record_keys(batch_body(view, h), h.records_count):
                        if key is not None and base + delta >= start and not put(key, base + delta):
                            return True
                    stats.map_messages_read += h.records_count
                offset_map.update_latest_offset(h.last_offset)
            stats.map_bytes_read += h.size
            if (yield None):
                check((segment,))
        # Offsets missing at the end of the segment (compacted away) count as mapped too.
        offset_map.update_latest_offset(following - 1)
        return False

    # -- rewriting --------------------------------------------------------------------------

    def _clean_segments(self, round_: _Round, group: list[LogSegment]) -> Steps:
        """Clean `group` into one `.cleaned` segment and swap it in."""
        plog = round_.log
        cleaned = LogSegment.create(
            plog.dir, group[0].base_offset, plog.config, round_.now, suffix=CLEANED_SUFFIX
        )
        try:
            for segment in group:
                yield from self._clean_into(round_, segment, cleaned, group)
            kept_markers = round_.txns.kept_abort_markers
            for segment in group:
                for txn in segment.txn_index.entries:
                    if txn.last_offset in kept_markers:
                        cleaned.txn_index.append(txn)
            cleaned.seal()
            # Kafka keeps the last source segment's modification time on the cleaned one.
            mtime = group[-1].log_path.stat().st_mtime_ns
            os.utime(cleaned.log_path, ns=(mtime, mtime))
            self.crash_hook("cleaned")
            yield Offload(cleaned.flush)

            def commit() -> None:
                round_.check(group)
                swap_in(plog, cleaned, group, self.crash_hook)

            yield OnLoop(commit)
        except BaseException:
            discard_cleaned(cleaned)
            raise
        log.debug(
            "swapped cleaned segment %d in for %s of %s",
            cleaned.base_offset,
            [s.base_offset for s in group],
            plog,
        )

    def _clean_into(
        self, round_: _Round, source: LogSegment, dest: LogSegment, group: Sequence[LogSegment]
    ) -> Steps:
        out: list[bytes | memoryview] = []
        headers: list[BatchHeader] = []
        pending = 0
        producers, stats = round_.producers, round_.stats
        retention = round_.log.config.delete_retention_ms
        for _, h, view in source.iter_batches(0, self.io_buffer_size):
            if h.producer_id >= 0 and producers.offsets is None:
                yield from producers.load(round_.check)
            last_of_producer = (
                h.producer_id >= 0
                and producers.offsets is not None
                and producers.offsets.get(h.producer_id) == h.last_offset
            )
            # Kafka also keeps the last batch of the round, so its offsets survive.
            retain_empty = last_of_producer or h.next_offset == round_.upper_bound
            if h.is_control:
                kept = _filter_marker(view, h, round_, retention, retain_empty)
            else:
                if h.is_transactional and h.producer_id >= 0:
                    marker_at = _abort_marker_of(h, self._aborted)
                    if marker_at is not None:
                        round_.txns.aborted_seen.add((h.producer_id, marker_at))
                    else:
                        round_.txns.committed_seen.add(h.producer_id)
                kept = self._filter_batch(view, h, round_.now, retention, retain_empty, stats)
            if kept is not None:
                out.append(kept)
                headers.append(h if kept is view else read_batch_header(kept))
                pending += len(kept)
                if pending >= self.io_buffer_size:
                    self._write(dest, out, headers, stats)
                    out, headers, pending = [], [], 0
            if (yield None):
                round_.check(group)
        if out:
            self._write(dest, out, headers, stats)

    def _write(
        self,
        dest: LogSegment,
        out: list[bytes | memoryview],
        headers: list[BatchHeader],
        stats: CleanerStats,
    ) -> None:
        dest.append(list(out), headers)
        stats.bytes_written += sum(len(b) for b in out)
        stats.messages_written += sum(h.records_count for h in headers)
        self.crash_hook("cleaning")

    def _filter_batch(
        self,
        view: memoryview,
        h: BatchHeader,
        now: int,
        delete_retention_ms: int,
        retain_empty: bool,
        stats: CleanerStats,
    ) -> bytes | memoryview | None:
        """The batch as it stays in the log: itself, rebuilt, empty, or None (dropped)."""
        stats.bytes_read += h.size
        stats.messages_read += h.records_count
        if h.is_control:
            return view
        if _in_aborted_txn(h, self._aborted):
            if retain_empty:
                return view if h.records_count == 0 else empty_batch(h)
            return None
        body, spans = _body_and_records(view, h)
        offset_map = self.offset_map
        latest = offset_map.latest_offset
        lookup = offset_map.get
        horizon = delete_horizon(h)
        retain_deletes = horizon is None or now < horizon
        base = h.base_offset
        kept = []
        tombstones = False
        for r in spans:
            _, _, _, _, offset_delta, key, has_value = r
            offset = base + offset_delta
            if offset > latest:
                keep = True
            elif key is None:
                # Kafka drops keyless records from compacted logs (they are refused at
                # produce time, but a topic may have been switched to compaction).
                stats.invalid_messages += 1
                keep = False
            else:
                keep = offset >= lookup(key) and (has_value or retain_deletes)
            if keep:
                kept.append(r)
                if not has_value:
                    tombstones = True
        set_horizon = tombstones and horizon is None
        if kept and len(kept) == len(spans) and not set_horizon:
            return view
        if kept:
            return rebuild_batch(h, body, kept, now + delete_retention_ms if set_horizon else None)
        if retain_empty:
            return view if h.records_count == 0 else empty_batch(h)
        return None


def _filter_marker(
    view: memoryview, h: BatchHeader, round_: _Round, delete_retention_ms: int, retain_empty: bool
) -> bytes | memoryview | None:
    """A control batch as it stays: kept while its transaction has batches left, then
    stamped with a delete horizon, then dropped (Kafka's onControlBatchRead)."""
    stats, txns = round_.stats, round_.txns
    stats.bytes_read += h.size
    stats.messages_read += h.records_count
    if h.records_count == 0:
        return view if retain_empty else None
    try:
        marker = read_end_txn_marker(view, 0, h)
    except CorruptRecordError:
        marker = None
    if marker is None:
        return view  # a control type this broker does not know: kept as it is
    pid = h.producer_id
    if marker.committed:
        discardable = pid not in txns.committed_seen
        txns.committed_seen.discard(pid)
    else:
        discardable = (pid, h.base_offset) not in txns.aborted_seen
    horizon = delete_horizon(h)
    if discardable and horizon is not None and horizon <= round_.now:
        return empty_batch(h) if retain_empty else None
    if not marker.committed:
        txns.kept_abort_markers.add(h.base_offset)
    if discardable and horizon is None:
        body, spans = _body_and_records(view, h)
        return rebuild_batch(h, body, spans, round_.now + delete_retention_ms)
    return view


def _check_crc(view: memoryview, h: BatchHeader) -> None:
    if not batch_crc_ok(view, 0, h):
        raise CorruptRecordError(f"batch at offset {h.base_offset} fails its CRC check")


def _body_and_records(view: memoryview, h: BatchHeader) -> tuple[bytes, list[RecordSpan]]:
    _check_crc(view, h)
    body = batch_body(view, h)
    return body, parse_records(body, h.records_count)
