"""Log compaction: how fast the log cleaner cleans, and what it costs the event loop meanwhile.

Each workload writes a compacted log on a temporary directory, then cleans it twice (copies
of the same log) while a 1 ms ticker on the broker's event loop measures how late it wakes
up, the stall a request arriving during cleaning would see: as the broker cleans, in the
cleaner's thread, and as it used to, on the loop in 5 ms slices.
Baselines from the same run: reading the same segment files sequentially, and the machine's
page-cache write ceiling.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
import time
from pathlib import Path

from bench.ceilings import sequential_write_mb_s
from bench.table import Row, percentile
from samsa.config.topic import LogConfig
from samsa.log import LogManager
from samsa.log.cleaner import CleanerConfig, LogCleaner
from samsa.protocol.record_batch import COMPRESSION_NONE, COMPRESSION_ZSTD, build_batch

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


async def _ticker(lags: list[float], done: asyncio.Event) -> None:
    """How late a 1 ms sleep wakes up, again and again until `done`."""
    while not done.is_set():
        t = time.perf_counter()
        await asyncio.sleep(0.001)
        lags.append(time.perf_counter() - t - 0.001)


async def _idle_lags(seconds: float) -> list[float]:
    lags: list[float] = []
    done = asyncio.Event()
    tick = asyncio.create_task(_ticker(lags, done))
    await asyncio.sleep(seconds)
    done.set()
    await tick
    return lags


async def _clean(dir: Path, config: CleanerConfig) -> tuple[float, float, list[float], LogCleaner]:
    """Clean the log with the broker's driver: (seconds, CPU seconds, loop lags, cleaner)."""
    manager = LogManager(dir, LogConfig())
    manager.load_logs(
        {"bench": LogConfig(segment_bytes=16 << 20, retention_ms=-1, cleanup_policy=("compact",))}
    )
    cleaner = LogCleaner(manager, config)
    lags: list[float] = []
    done = asyncio.Event()
    tick = asyncio.create_task(_ticker(lags, done))
    start = time.perf_counter()
    cpu = time.process_time()  # the whole process: the cleaner's thread and the loop
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
    idle = sorted(asyncio.run(_idle_lags(2.0 if quick else 5.0)))
    rows = [
        Row("ceiling", "page-cache write", mb_per_s=sequential_write_mb_s(total)),
        Row(
            "loop lag, no cleaning",
            "the machine's noise",
            p50_ms=_ms(percentile(idle, 0.5)),
            p99_ms=_ms(percentile(idle, 0.99)),
            p999_ms=_ms(percentile(idle, 0.999)),
            note=f"max {_ms(idle[-1] if idle else 0):.1f} ms",
        ),
    ]
    workloads = [
        ("10k keys", 100, 10_000, COMPRESSION_NONE),
        ("unique keys", 100, None, COMPRESSION_NONE),
        ("10k keys, zstd", 1000, 10_000, COMPRESSION_ZSTD),
    ]
    for name, size, keys, codec in workloads:
        with tempfile.TemporaryDirectory(prefix="samsa-bench-cleaner-") as tmp:
            dir = Path(tmp)
            written = dir / "written"
            records = _write_log(written, total, size, keys, codec)
            rows.append(
                Row(
                    f"read segments ({name})",
                    "sequential read",
                    size,
                    mb_per_s=_read_mb_s(written),
                )
            )
            for system, config in (
                ("samsa, cleaner thread", CleanerConfig()),
                ("samsa, on the loop", CleanerConfig(threaded=False, slice_ms=5.0)),
            ):
                copy = dir / "copy"
                shutil.copytree(written, copy)
                seconds, cpu, lags, cleaner = asyncio.run(_clean(copy, config))
                shutil.rmtree(copy)
                rows.append(_row(name, system, size, records, seconds, cpu, lags, cleaner))
    return rows


def _row(
    name: str,
    system: str,
    size: int,
    records: int,
    seconds: float,
    cpu: float,
    lags: list[float],
    cleaner: LogCleaner,
) -> Row:
    stats = cleaner.totals
    return Row(
        f"clean ({name})",
        system,
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


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else seconds * 1000
