"""The rules a segment's stored batches must pass, and the state rebuilt from those that do.

Kafka's LogSegment.recover, as walks over the batches samsa.log.file_records reads: recovery
checks every batch (magic, CRC, offsets in order and within the segment's reach), indexes
the valid ones and finds where the valid bytes end; an active segment trusted after a clean
shutdown is resumed from its last index entry by the same offset rules.  No file is opened
or cut here: LogSegment applies the results to its files.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

import crc32c

from samsa.log.index import OffsetIndex, TimeIndex
from samsa.protocol.record_batch import ATTRIBUTES_OFFSET, LOG_OVERHEAD, MAGIC_V2, BatchHeader

# The largest offset an index entry can hold relative to its segment's base offset.
INT32_MAX = 2**31 - 1

Batches = Iterable[tuple[int, BatchHeader, memoryview | None]]


def _crc_of(batch: memoryview) -> int:
    return int(crc32c.crc32c(batch[ATTRIBUTES_OFFSET:]))


def invalid_batch(
    h: BatchHeader,
    view: memoryview | None,
    expected: int,
    base_offset: int,
    offset_limit: int | None,
) -> str | None:
    """Why recovery cuts the segment at this batch, or None if it is kept (its CRC is
    checked only when its bytes are given)."""
    if h.magic != MAGIC_V2:
        return f"record magic v{h.magic}"
    if view is not None and _crc_of(view) != h.crc:
        return "a CRC mismatch"
    if h.last_offset_delta < 0 or h.base_offset < expected:
        return f"offset {h.base_offset} out of order (expected >= {expected})"
    if h.base_offset + h.last_offset_delta - base_offset > INT32_MAX:
        return f"offset {h.base_offset} too far from the segment's base offset"
    if offset_limit is not None and h.base_offset + h.last_offset_delta >= offset_limit:
        return f"offset {h.base_offset} overlapping the next segment"
    return None


@dataclass(frozen=True)
class RecoveredBatches:
    """What a recovery walk found: the valid bytes, why it stopped, and the state after."""

    valid: int  # bytes of whole valid batches from the start of the file
    reason: str | None  # why the batch at `valid` is not valid; None if the walk ran out
    max_timestamp: int
    offset_of_max_timestamp: int
    next_offset: int
    last_index_position: int


def index_valid_batches(
    batches: Batches,
    base_offset: int,
    index_interval_bytes: int,
    offset_index: OffsetIndex,
    time_index: TimeIndex,
    offset_limit: int | None,
    on_batch: Callable[[BatchHeader], None] | None,
) -> RecoveredBatches:
    """Walk the batches up to the first invalid one, appending an entry to both (reset)
    indexes every `index_interval_bytes`, and telling `on_batch` of each valid batch."""
    max_ts, offset_of_max = -1, -1
    expected = base_offset
    valid = 0
    last_index_position = 0
    reason: str | None = None
    for pos, h, view in batches:
        reason = invalid_batch(h, view, expected, base_offset, offset_limit)
        if reason is not None:
            break
        last = h.base_offset + h.last_offset_delta
        if h.max_timestamp > max_ts:
            max_ts, offset_of_max = h.max_timestamp, last
        if pos - last_index_position > index_interval_bytes:
            if not offset_index.is_full:
                offset_index.append(last, pos)
            if not time_index.is_full:
                time_index.maybe_append(max_ts, offset_of_max)
            last_index_position = pos
        expected = last + 1
        valid = pos + h.batch_length + LOG_OVERHEAD
        if on_batch is not None:
            on_batch(h)
    return RecoveredBatches(valid, reason, max_ts, offset_of_max, expected, last_index_position)


def trusted_tail(
    batches: Batches, base_offset: int, start: int, max_ts: int, offset_of_max: int
) -> tuple[int, int, int, int]:
    """(next offset, end of the trusted bytes, max timestamp, its offset) of the batches
    from `start` (a batch boundary) on, given the max timestamp known before them."""
    next_offset = base_offset
    end = start
    for pos, h, _ in batches:
        # Offsets the segment cannot hold (behind it, or past what an index's 32-bit
        # relative offset reaches) end the trusted part: recovery cuts the file there.
        last = h.base_offset + h.last_offset_delta
        if h.last_offset_delta < 0 or h.base_offset < next_offset:
            break
        if last - base_offset > INT32_MAX:
            break
        if h.max_timestamp > max_ts:
            max_ts, offset_of_max = h.max_timestamp, h.base_offset + h.last_offset_delta
        next_offset = h.base_offset + h.last_offset_delta + 1
        end = pos + h.batch_length + LOG_OVERHEAD
    return next_offset, end, max_ts, offset_of_max
