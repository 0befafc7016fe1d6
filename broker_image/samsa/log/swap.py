"""Swapping a cleaned segment in for the segments it replaces, crash-safely, as Kafka does.

The cleaner writes `<base>.log.cleaned` (and its indexes) and fsyncs it.  Renaming it to
`<base>.log.swap` is the commit: from then on a restart finishes the swap instead of undoing
it.  The old segments are then deleted and the `.swap` files renamed to their live names.

At start-up (`complete_interrupted_swaps`): `.cleaned` files are an unfinished clean and are
deleted (the old segments are intact); a `<base>.log.swap` replaces every segment whose base
offset lies in [base, the swap's next offset) (Kafka's LogLoader rule), and its indexes are
rebuilt from the log rather than trusted.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from samsa.log.checkpoint import fsync_dir
from samsa.log.segment import (
    CLEANED_SUFFIX,
    INDEX_SUFFIX,
    SWAP_SUFFIX,
    TIME_INDEX_SUFFIX,
    LogSegment,
)
from samsa.log.txn_index import TXN_INDEX_SUFFIX
from samsa.protocol.record_batch import BATCH_HEADER_SIZE, MIN_BATCH_LENGTH, read_batch_header

if TYPE_CHECKING:
    from samsa.log.log import Log

log = logging.getLogger(__name__)

CrashHook = Callable[[str], None]

_SEGMENT_FILE = re.compile(r"^(\d{20})(\.log|\.index|\.timeindex|\.txnindex)$")
_LOG_SWAP = re.compile(r"^(\d{20})\.log\.swap$")


def _no_crash(point: str) -> None:
    pass


def segment_run(segments: Sequence[LogSegment], old: Sequence[LogSegment]) -> int:
    """Where `old` starts in `segments`, if it is a run of consecutive inactive segments
    there (the same objects); ValueError otherwise."""
    for i, segment in enumerate(segments):
        if segment is old[0]:
            run = segments[i : i + len(old)]
            if len(run) != len(old) or any(a is not b for a, b in zip(run, old, strict=True)):
                break
            if i + len(old) >= len(segments):
                raise ValueError("the active segment cannot be replaced")
            return i
    raise ValueError(f"segments {[s.base_offset for s in old]} are no longer in the log")


def change_file_suffixes(segment: LogSegment, old_suffix: str, new_suffix: str) -> None:
    """Rename the segment's .log (first) and both index files from one suffix to another
    (Kafka's LogSegment.changeFileSuffixes: how a cleaned segment goes from `.cleaned` to
    `.swap` to live), and the txnindex after them.  Open descriptors and maps follow the
    files."""
    for holder, attr in (
        (segment, "log_path"),
        (segment.offset_index, "path"),
        (segment.time_index, "path"),
    ):
        path: Path = getattr(holder, attr)
        name = path.name
        if old_suffix:
            if not name.endswith(old_suffix):
                raise ValueError(f"{path} does not end with {old_suffix}")
            name = name[: -len(old_suffix)]
        target = path.with_name(name + new_suffix)
        os.replace(path, target)
        setattr(holder, attr, target)
    txn = segment.txn_index.path.name
    if old_suffix:
        txn = txn[: -len(old_suffix)]
    segment.txn_index.rename(segment.txn_index.path.with_name(txn + new_suffix))


def swap_in(
    log_: Log, cleaned: LogSegment, old: Sequence[LogSegment], crash_hook: CrashHook = _no_crash
) -> None:
    """Replace `old` (consecutive inactive segments of the log) by `cleaned`, whose
    `.cleaned` files are complete and fsynced.  Synchronous: nothing else touches the log
    between the first rename and the in-memory replacement."""
    segment_run(log_.segments, old)
    dir = log_.dir
    change_file_suffixes(cleaned, CLEANED_SUFFIX, SWAP_SUFFIX)
    fsync_dir(dir)
    crash_hook("swap")
    for n, segment in enumerate(old):
        segment.delete()
        if n == 0:
            crash_hook("deleting")
    change_file_suffixes(cleaned, SWAP_SUFFIX, "")
    fsync_dir(dir)
    crash_hook("swapped")
    log_.replace_segments(cleaned, old)


def discard_cleaned(segment: LogSegment) -> None:
    """Abandon a cleaned segment that was not swapped in: close it and delete its files,
    unless the swap was already committed (then a restart finishes it)."""
    if not segment.log_path.name.endswith(CLEANED_SUFFIX):
        log.error("swapping %s in failed after it was committed", segment.log_path)
        return
    segment.close_handles()
    paths = (
        segment.log_path,
        segment.offset_index.path,
        segment.time_index.path,
        segment.txn_index.path,
    )
    for path in paths:
        if path.name.endswith(CLEANED_SUFFIX):
            path.unlink(missing_ok=True)


def _next_offset(path: Path) -> int | None:
    """One past the last offset of the complete batches in a segment file (headers only)."""
    last = None
    with open(path, "rb") as f:
        fd = f.fileno()
        pos = 0
        while True:
            head = os.pread(fd, BATCH_HEADER_SIZE, pos)
            if len(head) < BATCH_HEADER_SIZE:
                break
            h = read_batch_header(head)
            if h.batch_length < MIN_BATCH_LENGTH:
                break
            last = h.next_offset
            pos += h.size
    return last


def complete_interrupted_swaps(dir: Path) -> None:
    """Roll back unfinished cleans and finish committed swaps in one partition directory."""
    names = sorted(p.name for p in dir.iterdir())
    for name in names:
        if name.endswith(CLEANED_SUFFIX):
            log.info("removing leftover file %s", dir / name)
            (dir / name).unlink(missing_ok=True)
    for name in names:
        match = _LOG_SWAP.match(name)
        if not match:
            continue
        base = int(match.group(1))
        swap = dir / name
        end = max(_next_offset(swap) or base, base + 1)
        for other in sorted(p.name for p in dir.iterdir()):
            seg = _SEGMENT_FILE.match(other)
            if seg and base <= int(seg.group(1)) < end:
                log.warning("removing %s: replaced by %s", dir / other, swap)
                (dir / other).unlink(missing_ok=True)
        final = dir / name[: -len(SWAP_SUFFIX)]
        log.warning("completing interrupted swap: renaming %s to %s", swap, final.name)
        os.replace(swap, final)
    for name in names:
        if name.endswith(TXN_INDEX_SUFFIX + SWAP_SUFFIX):
            # Aborted transactions cannot be rebuilt from the log below the recovery point.
            os.replace(dir / name, dir / name[: -len(SWAP_SUFFIX)])
        elif name.endswith((INDEX_SUFFIX + SWAP_SUFFIX, TIME_INDEX_SUFFIX + SWAP_SUFFIX)):
            # The log it indexes was swapped in above (or never was): rebuild from the log.
            (dir / name).unlink(missing_ok=True)
    if any(_LOG_SWAP.match(n) for n in names):
        fsync_dir(dir)


__all__ = [
    "CrashHook",
    "complete_interrupted_swaps",
    "discard_cleaned",
    "segment_run",
    "swap_in",
]
