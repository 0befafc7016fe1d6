"""Helpers for the log cleaner's unit tests: compacted logs on tmp dirs, read back whole."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path

from samsa.config.topic import LogConfig
from samsa.log import Log, LogManager
from samsa.log.cleaner import CleanerConfig, LogCleaner
from samsa.protocol.record_batch import BatchHeader, Record, decode_records, scan_batches

COMPACTED = LogConfig(
    segment_bytes=1024,
    index_interval_bytes=128,
    segment_index_bytes=4096,
    retention_ms=-1,
    cleanup_policy=("compact",),
    min_cleanable_dirty_ratio=0.0,
    delete_retention_ms=60_000,
)


class Clock:
    def __init__(self, now: int = 1_700_000_000_000) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


def compacted_log(
    dir: Path, clock: Clock, config: LogConfig = COMPACTED, **cleaner: object
) -> tuple[LogManager, Log, LogCleaner]:
    manager = LogManager(dir, config, now_ms=clock)
    plog = manager.get_or_create_log("t", 0, config)
    settings = {"dedupe_buffer_size": 1 << 20, **cleaner}
    return manager, plog, LogCleaner(manager, CleanerConfig(**settings), now_ms=clock)  # type: ignore[arg-type]


def with_config(config: LogConfig = COMPACTED, **changes: object) -> LogConfig:
    return replace(config, **changes)  # type: ignore[arg-type]


def read_batches(plog: Log) -> list[tuple[BatchHeader, bytes]]:
    """Every stored batch from the log start to the log end, in order, as stored."""
    out: list[tuple[BatchHeader, bytes]] = []
    offset = plog.log_start_offset
    while offset < plog.log_end_offset:
        data = plog.read(offset, 1 << 20).records
        if not data:
            break
        assert isinstance(data, bytes)
        for pos, h in scan_batches(data):
            if h.last_offset >= offset:
                out.append((h, data[pos : pos + h.size]))
                offset = h.next_offset
    return out


def read_all(plog: Log) -> list[Record]:
    """Every record of the log, in offset order, as a consumer from the start sees them."""
    out: list[Record] = []
    for _, batch in read_batches(plog):
        out += decode_records(batch)
    offsets = [r.offset for r in out]
    assert offsets == sorted(set(offsets)), "offsets must strictly increase"
    return out


def view(records: Iterable[Record]) -> dict[bytes, bytes]:
    """The table a compacted log stands for: latest value per key, tombstones delete."""
    table: dict[bytes, bytes] = {}
    for r in records:
        if r.key is None:
            continue
        if r.value is None:
            table.pop(r.key, None)
        else:
            table[r.key] = r.value
    return table


def assert_subset_of(cleaned: list[Record], original: list[Record]) -> None:
    """Every kept record is the original record at that offset, unchanged."""
    by_offset = {r.offset: r for r in original}
    for r in cleaned:
        assert by_offset.get(r.offset) == r, f"record at offset {r.offset} changed: {r}"
