"""Opening a partition directory: leftovers from crashes, segment recovery, log offsets.

Kafka's LogLoader.  The rule is that the broker never refuses to start because of its
own data: a torn or corrupt tail is cut off, later segments are dropped, broken indexes
are rebuilt, and each of these is logged as a warning naming the file.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from samsa.config.topic import LogConfig
from samsa.log.epoch import LeaderEpochCache
from samsa.log.segment import DELETED_SUFFIX, LOG_SUFFIX, LogSegment
from samsa.log.swap import complete_interrupted_swaps
from samsa.protocol.record_batch import BatchHeader

log = logging.getLogger(__name__)

_SEGMENT_FILE = re.compile(r"^(\d{20})(\.log|\.index|\.timeindex|\.txnindex)$")


@dataclass
class LoadedLog:
    segments: list[LogSegment]
    log_end_offset: int
    recovery_point: int
    log_start_offset: int


def _remove_leftovers(dir: Path) -> None:
    """Delete `.deleted` files; roll back unfinished cleans and finish committed swaps."""
    for path in dir.iterdir():
        if path.name.endswith(DELETED_SUFFIX):
            log.info("removing leftover file %s", path)
            path.unlink(missing_ok=True)
    complete_interrupted_swaps(dir)


def _segment_bases(dir: Path) -> list[int]:
    bases: set[int] = set()
    orphans: list[Path] = []
    for path in dir.iterdir():
        match = _SEGMENT_FILE.match(path.name)
        if not match:
            continue
        if match.group(2) == LOG_SUFFIX:
            bases.add(int(match.group(1)))
        else:
            orphans.append(path)
    for path in orphans:
        if int(path.name[:20]) not in bases:
            log.warning("removing index file %s: it has no log file", path)
            path.unlink(missing_ok=True)
    return sorted(bases)


def load_log(
    dir: Path,
    config: LogConfig,
    recovery_point: int,
    log_start_offset: int | None,
    clean_shutdown: bool,
    epoch_cache: LeaderEpochCache,
    now_ms: Callable[[], int],
) -> LoadedLog:
    """Open (and if needed recover) every segment of one partition directory."""
    _remove_leftovers(dir)
    now = now_ms()
    segments = [LogSegment.open(dir, base, config, now) for base in _segment_bases(dir)]

    def assign_epoch(h: BatchHeader) -> None:
        latest = epoch_cache.latest_epoch
        if h.partition_leader_epoch >= 0 and (latest is None or h.partition_leader_epoch > latest):
            epoch_cache.assign(h.partition_leader_epoch, h.base_offset)

    first_unflushed = len(segments)
    if not clean_shutdown:
        first_unflushed = 0
        for i, segment in enumerate(segments):
            if segment.base_offset <= recovery_point:
                first_unflushed = i

    i = 0
    while i < len(segments):
        segment = segments[i]
        limit = segments[i + 1].base_offset if i + 1 < len(segments) else None
        last = i == len(segments) - 1
        if i < first_unflushed:
            problem = segment.check_indexes(limit)
            if problem:
                segment.rebuild_indexes(problem)
                if not last:
                    segment.seal()
            if last and not segment.make_active():
                log.warning("%s does not end on a batch boundary; recovering it", segment.log_path)
                first_unflushed = i
                continue
        else:
            # Recovery rebuilds the indexes anyway; a damaged one is still worth reporting.
            problem = segment.check_indexes(limit)
            if problem:
                log.warning("%s; rebuilding it while recovering %s", problem, segment.log_path)
            valid, dropped, reason = segment.recover(offset_limit=limit, on_batch=assign_epoch)
            if dropped:
                log.warning(
                    "found %s in %s at byte %d; truncated %d bytes",
                    reason,
                    segment.log_path,
                    valid,
                    dropped,
                )
                for later in segments[i + 1 :]:
                    log.warning(
                        "deleting %s: it follows the corruption in %s",
                        later.log_path,
                        segment.log_path,
                    )
                    later.delete()
                del segments[i + 1 :]
                last = True
            if not last:
                segment.seal()
            else:
                segment.make_active()
        i += 1

    log_end_offset = segments[-1].next_offset if segments else 0
    start = segments[0].base_offset if segments else 0
    if log_start_offset is not None:
        start = max(start, log_start_offset)
    if segments and log_end_offset < start:
        log.warning(
            "deleting every segment of %s: its log end offset %d is below its log start "
            "offset %d (were segment files removed?)",
            dir,
            log_end_offset,
            start,
        )
        for segment in segments:
            segment.delete()
        segments = []
        epoch_cache.clear()
    if not segments:
        segments = [LogSegment.create(dir, start, config, now)]
        log_end_offset = start
    epoch_cache.truncate_from_end(log_end_offset)
    epoch_cache.truncate_from_start(start)
    point = log_end_offset if clean_shutdown else min(max(recovery_point, start), log_end_offset)
    return LoadedLog(segments, log_end_offset, point, start)
