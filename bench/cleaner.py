"""Log compaction: how fast the log cleaner cleans, and what it costs the event loop meanwhile.

Each workload writes a compacted log on a temporary directory, then cleans it on an asyncio
loop with the broker's slice driver while a 1 ms ticker on the same loop measures how late
it wakes up: that lateness is the stall a request arriving during cleaning would see.
Baselines from the same run: reading the same segment files sequentially, and the machine's
page-cache write ceiling.
"""

from __future__ import annotations

import asyncio
import os
import tempfile
import time
from pathlib import Path

from bench.ceilings import sequential_write_mb_s
from bench.table import Row, percentile
from samsa.config.topic import LogConfig
from samsa.log import LogManager
from samsa.log.cleaner import CleanerConfig, LogCleaner
from samsa.protocol.records import COMPRESSION_NONE, COMPRESSION_ZSTD, build_batch

RECORDS_PER_BATCH = 100


def _write_log(dir: Path, total_bytes: int, size: int, keys: int | None, codec: int) -> int:
    """A compacted log of about `total_bytes` of `size`-byte values; returns records written."""
    config = LogConfig(
        segment_bytes=16 << 20,
        retention_ms=-1,
        cleanup_policy=("compact",),
        min_cleanable_dirty_ratio=0.0,
    )
    manager = LogManager(dir, config)
    plog = manager.get_or_create_log("bench", 0, config)
    n = 0
    while plog.size_in_bytes < total_bytes:
        records = []
        for _ in range(RECORDS_PER_BATCH):
            key = b"key-%09d" % (n % keys if keys else n)
            # Hex of random bytes: compresses about 2:1, like much real text.
            records.append((key, os.urandom(size // 2).hex().encode(), ()))
            n += 1
        plog.append_as_leader(build_batch(records, timestamp_ms=n, compression=codec), 0)
    plog.roll()
    manager.shutdown()
    return n


def _read_mb_s(dir: Path) -> float:
    files = sorted((dir / "bench-0").glob("*.log"))
    total = 0
    start = time.perf_counter()
    for path in files:
        with open(path, "rb", buffering=0) as f:
            while chunk := f.read(1 << 20):
                total += len(chunk)
    return total / (time.perf_counter() - start) / 1e6


async def _clean(dir: Path) -> tuple[float, float, list[float], LogCleaner]:
    """Clean the log with the broker's driver: (seconds, CPU seconds, loop lags, cleaner)."""
    manager = LogManager(dir, LogConfig())
    manager.load_logs(
        {"bench": LogConfig(segment_bytes=16 << 20, retention_ms=-1, cleanup_policy=("compact",))}
    )
    cleaner = LogCleaner(manager, CleanerConfig())
    lags: list[float] = []
    done = asyncio.Event()

    async def ticker() -> None:
        while not done.is_set():
            t = time.perf_counter()
            await asyncio.sleep(0.001)
            lags.append(time.perf_counter() - t - 0.001)

    tick = asyncio.create_task(ticker())
    start = time.perf_counter()
    cpu = time.process_time()
    assert await cleaner.clean_filthiest_log()
    seconds = time.perf_counter() - start
    cpu = time.process_time() - cpu
    done.set()
    await tick
    await cleaner.shutdown()
    manager.shutdown()
    return seconds, cpu, sorted(lags), cleaner


def run(quick: bool = False) -> list[Row]:
    total = (16 if quick else 160) << 20
    rows = [
        Row("ceiling", "page-cache write", mb_per_s=sequential_write_mb_s(total)),
    ]
    workloads = [
        ("10k keys", 100, 10_000, COMPRESSION_NONE),
        ("unique keys", 100, None, COMPRESSION_NONE),
        ("10k keys, zstd", 1000, 10_000, COMPRESSION_ZSTD),
    ]
    for name, size, keys, codec in workloads:
        with tempfile.TemporaryDirectory(prefix="samsa-bench-cleaner-") as tmp:
            dir = Path(tmp)
            records = _write_log(dir, total, size, keys, codec)
            rows.append(
                Row(f"read segments ({name})", "sequential read", size, mb_per_s=_read_mb_s(dir))
            )
            seconds, cpu, lags, cleaner = asyncio.run(_clean(dir))
            stats = cleaner.totals
            rows.append(
                Row(
                    f"clean ({name})",
                    "samsa",
                    size,
                    records / seconds,
                    stats.bytes_read / 1e6 / seconds,
                    _ms(percentile(lags, 0.5)),
                    _ms(percentile(lags, 0.99)),
                    _ms(percentile(lags, 0.999)),
                    cpu * 1000 / (stats.bytes_read / 1e6),
                    note=(
                        f"{stats.bytes_read / 1e6:.0f} MB -> {stats.bytes_written / 1e6:.1f} MB; "
                        f"loop lag max {_ms(lags[-1] if lags else 0):.1f} ms"
                    ),
                )
            )
    return rows


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else seconds * 1000
