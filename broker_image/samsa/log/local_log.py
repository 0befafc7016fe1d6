"""LocalLog: one partition's segments on local disk, its offsets, and the reads over them.

The read half of Kafka's LocalLog: the segments sorted by base offset, the log start and
end offsets and the recovery point, and what is read across segments without changing
anything: fetches of stored batches, batch headers, offsets by timestamp, and the aborted
transactions a read_committed fetch is told of.  Log (samsa.log.log) extends it with all
that writes: appends, rolls, truncation, retention, flushes.
"""

from __future__ import annotations

import bisect
import logging
from collections.abc import Callable, Iterator
from pathlib import Path

from samsa.config.topic import LogConfig
from samsa.log.errors import OffsetOutOfRangeError
from samsa.log.info import FetchDataInfo
from samsa.log.segment import LogSegment
from samsa.log.txn_index import AbortedTxn, collect_aborted
from samsa.protocol.control import EndTxnMarker, read_end_txn_marker
from samsa.protocol.record_batch import BatchHeader, CorruptRecordError

log = logging.getLogger(__name__)


def parse_partition_dir(name: str) -> tuple[str, int]:
    """`<topic>-<partition>` -> (topic, partition); topics may contain '-'."""
    topic, sep, partition = name.rpartition("-")
    if not sep or not topic or not partition.isdigit():
        raise ValueError(f"{name!r} is not a <topic>-<partition> directory name")
    return topic, int(partition)


class LocalLog:
    """The segments of one partition and its offsets, read without changing them."""

    def __init__(
        self,
        dir: Path,
        config: LogConfig,
        segments: list[LogSegment],
        log_end_offset: int,
        log_start_offset: int,
        recovery_point: int,
        now_ms: Callable[[], int],
    ) -> None:
        self._dir = dir
        self.topic, self.partition = parse_partition_dir(dir.name)
        self._config = config
        self._segments = segments
        self._bases = [s.base_offset for s in segments]  # for bisect
        self._next_offset = log_end_offset
        self._log_start_offset = log_start_offset
        self._recovery_point = recovery_point
        self._now_ms = now_ms

    # -- properties ------------------------------------------------------------------------

    @property
    def dir(self) -> Path:
        return self._dir

    @property
    def config(self) -> LogConfig:
        return self._config

    @property
    def log_start_offset(self) -> int:
        return self._log_start_offset

    @property
    def log_end_offset(self) -> int:
        """The offset the next appended record gets."""
        return self._next_offset

    @property
    def recovery_point(self) -> int:
        """Everything below this offset has been fsynced."""
        return self._recovery_point

    @property
    def unflushed_messages(self) -> int:
        return self._next_offset - self._recovery_point

    @property
    def segments(self) -> list[LogSegment]:
        return list(self._segments)

    @property
    def active_segment(self) -> LogSegment:
        return self._segments[-1]

    @property
    def size_in_bytes(self) -> int:
        return sum(s.size for s in self._segments)

    def update_config(self, config: LogConfig) -> None:
        self._config = config
        for segment in self._segments:
            segment.index_interval_bytes = config.index_interval_bytes

    # -- read ------------------------------------------------------------------------------

    def read(
        self,
        fetch_offset: int,
        max_bytes: int,
        max_offset: int | None = None,
        min_one_message: bool = True,
        zero_copy: bool = False,
    ) -> FetchDataInfo:
        """Stored bytes of whole batches from the one holding `fetch_offset`.

        At most max_bytes (but the first batch whole if min_one_message), only batches
        that end below max_offset, all from one segment.
        """
        if fetch_offset < self._log_start_offset or fetch_offset > self._next_offset:
            raise OffsetOutOfRangeError(
                f"offset {fetch_offset} is outside [{self._log_start_offset}, "
                f"{self._next_offset}] of {self.topic}-{self.partition}"
            )
        end = self._next_offset if max_offset is None else min(max_offset, self._next_offset)
        if fetch_offset >= end:
            return FetchDataInfo(fetch_offset, b"")
        segments = self._segments
        bases = self._bases
        i = bisect.bisect_right(bases, fetch_offset) - 1
        while 0 <= i < len(segments):
            upper = bases[i + 1] if i + 1 < len(bases) else self._next_offset
            if bases[i] >= end:
                break
            bound = max_offset if max_offset is not None and max_offset < upper else None
            info = segments[i].read(fetch_offset, max_bytes, bound, min_one_message, zero_copy)
            if info is not None:
                if info.records and info.next_offset <= info.first_batch_offset:
                    # A segment loaded at start-up and read to its end does not know its own
                    # next offset: the next segment starts there.
                    info.next_offset = upper if bound is None else min(upper, bound)
                return info
            i += 1
        return FetchDataInfo(fetch_offset, b"")

    def batch_headers(self, start: int, end: int | None = None) -> Iterator[BatchHeader]:
        """Headers of the batches holding offsets in [start, end) (default: to the log end),
        read from the segments without their records."""
        stop = self._next_offset if end is None else end
        first = max(bisect.bisect_right(self._bases, start) - 1, 0)
        for segment in self._segments[first:]:
            if segment.base_offset >= stop:
                return
            for h in segment.batch_headers(start):
                if h.base_offset >= stop:
                    return
                yield h

    def offset_for_timestamp(self, timestamp_ms: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record with a timestamp >= `timestamp_ms`."""
        for segment in self._segments:
            if segment.max_timestamp_so_far >= timestamp_ms:
                found = segment.find_offset_by_timestamp(timestamp_ms, self._log_start_offset)
                if found is not None:
                    return found
        return None

    def latest_timestamp_offset(self) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record carrying the log's largest timestamp."""
        best: LogSegment | None = None
        for segment in self._segments:
            if best is None or segment.max_timestamp_so_far > best.max_timestamp_so_far:
                best = segment
        if best is None or best.max_timestamp_so_far < 0:
            return None
        return best.find_max_timestamp_record()

    # -- aborted transactions ------------------------------------------------------------

    def collect_aborted_txns(self, fetch_offset: int, upper_bound: int) -> list[AbortedTxn]:
        """The aborted transactions overlapping [fetch_offset, upper_bound): their markers
        are at or after fetch_offset, so the search starts at its segment."""
        found: list[AbortedTxn] = []
        first = max(bisect.bisect_right(self._bases, fetch_offset) - 1, 0)
        for segment in self._segments[first:]:
            if collect_aborted(segment.txn_index.entries, fetch_offset, upper_bound, found):
                break
        return found

    def append_aborted(self, txn: AbortedTxn) -> None:
        """The producer state closed an aborted transaction: index it in the segment that
        holds its marker."""
        i = max(bisect.bisect_right(self._bases, txn.last_offset) - 1, 0)
        self._segments[i].txn_index.append(txn)

    def truncate_aborted(self, offset: int) -> None:
        """Forget the aborted transactions whose markers are at or above `offset` (the
        producer state replays them from there)."""
        first = max(bisect.bisect_right(self._bases, offset) - 1, 0)
        for segment in self._segments[first:]:
            segment.txn_index.truncate_to(offset)

    def _stored_marker(self, i: int, h: BatchHeader) -> EndTxnMarker | None:
        """The marker of a stored control batch, read from its segment (replays only)."""
        j = bisect.bisect_right(self._bases, h.base_offset) - 1
        if j < 0:
            return None
        segment = self._segments[j]
        found = segment.translate_offset(h.base_offset)
        if found is None or found[1].base_offset != h.base_offset:
            return None
        try:
            return read_end_txn_marker(segment.read_batch(found[0], found[1]), 0, found[1])
        except CorruptRecordError as exc:
            log.warning("%s-%d: unreadable transaction marker: %s", self.topic, self.partition, exc)
            return None
