"""LogCleaner: the broker's background compaction of logs with cleanup.policy=compact.

Kafka's LogCleaner runs cleaner threads.  Here cleaning runs on the broker's event loop in
slices: the Cleaner is a generator that stops after every batch, and the driver lets the
loop serve requests whenever a slice has run for `slice_ms`.  A worker thread was the other
choice, and a worse one: cleaning is CPU-bound Python, so a thread would hold the GIL and,
worse, make every socket call of the loop thread wait for the interpreter's 5 ms switch
interval, multiplying request latency, while gaining no parallelism.  Slices bound the
stall a request can see to about one slice (one batch at most), keep cleaning from racing
appends, retention or deletion (each resumed slice first checks that the log and its
segments are still there), and make the swap one synchronous step.  Only the fsync of a
cleaned segment, which releases the GIL, runs in a thread.

After each log is cleaned its first dirty offset goes into `cleaner-offset-checkpoint`.
When no log needs cleaning the cleaner sleeps log.cleaner.backoff.ms.

A test may set SAMSA_TEST_CLEANER_CRASH_POINT to one of CRASH_POINTS: the broker then kills
itself with SIGKILL the first time cleaning reaches that point.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import math
import os
import signal
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from samsa.log.cleaner.cleaner import (
    ActiveProducers,
    Cleaner,
    CleanerStats,
    LogCleaningAbortedError,
    Offload,
    Steps,
)
from samsa.log.cleaner.manager import LogCleanerManager, LogToClean, StableOffset
from samsa.log.cleaner.offset_map import OffsetMap
from samsa.log.log import wall_clock_ms
from samsa.log.manager import LogManager
from samsa.log.swap import CrashHook

log = logging.getLogger(__name__)

CRASH_POINT_ENV = "SAMSA_TEST_CLEANER_CRASH_POINT"
# Where a test may have the broker kill itself: writing a .cleaned segment, after writing
# it, after committing the swap (.swap), after deleting the first replaced segment, and
# after the swap is complete.
CRASH_POINTS = ("cleaning", "cleaned", "swap", "deleting", "swapped")


def crash_hook_from_env() -> CrashHook | None:
    point = os.environ.get(CRASH_POINT_ENV)
    if not point:
        return None
    if point not in CRASH_POINTS:
        raise ValueError(f"{CRASH_POINT_ENV}={point!r}: expected one of {', '.join(CRASH_POINTS)}")

    def crash(at: str) -> None:
        if at == point:
            log.warning("%s=%s: killing the broker", CRASH_POINT_ENV, point)
            os.kill(os.getpid(), signal.SIGKILL)

    return crash


@dataclass(frozen=True)
class CleanerConfig:
    """The log.cleaner.* broker settings (Kafka's CleanerConfig)."""

    enable: bool = True
    backoff_ms: int = 15_000
    dedupe_buffer_size: int = 128 * 1024 * 1024
    io_buffer_load_factor: float = 0.9
    io_buffer_size: int = 512 * 1024
    max_io_bytes_per_second: float = math.inf
    # Not a Kafka setting: how long cleaning may hold the event loop at a time.
    slice_ms: float = 5.0

    @classmethod
    def from_properties(cls, values: Mapping[str, Any]) -> CleanerConfig:
        return cls(
            enable=bool(values.get("log.cleaner.enable", True)),
            backoff_ms=int(values.get("log.cleaner.backoff.ms", 15_000)),
            dedupe_buffer_size=int(values.get("log.cleaner.dedupe.buffer.size", 128 << 20)),
            io_buffer_load_factor=float(values.get("log.cleaner.io.buffer.load.factor", 0.9)),
            io_buffer_size=int(values.get("log.cleaner.io.buffer.size", 512 << 10)),
            max_io_bytes_per_second=float(
                values.get("log.cleaner.io.max.bytes.per.second", math.inf)
            ),
        )


@dataclass
class CleanerTotals:
    """Running totals for metrics (Kafka's LogCleaner gauges, as counters where they add up)."""

    runs: int = 0
    aborted: int = 0
    failed: int = 0
    bytes_read: int = 0
    bytes_written: int = 0
    messages_read: int = 0
    messages_written: int = 0
    last: CleanerStats | None = None


class LogCleaner:
    """Chooses, cleans and checkpoints compacted logs, one at a time."""

    def __init__(
        self,
        log_manager: LogManager,
        config: CleanerConfig | None = None,
        *,
        last_stable: StableOffset | None = None,
        active_producers: ActiveProducers | None = None,
        now_ms: Callable[[], int] = wall_clock_ms,
        crash_hook: CrashHook | None = None,
    ) -> None:
        self.config = config or CleanerConfig()
        self.log_manager = log_manager
        self.manager = LogCleanerManager(log_manager, last_stable)
        self.cleaner = Cleaner(
            OffsetMap(self.config.dedupe_buffer_size, self.config.io_buffer_load_factor),
            io_buffer_size=self.config.io_buffer_size,
            active_producers=active_producers,
            now_ms=now_ms,
            crash_hook=crash_hook or (lambda point: None),
        )
        self.now_ms = now_ms
        self.totals = CleanerTotals()
        self._task: asyncio.Task[None] | None = None
        self._executor: concurrent.futures.ThreadPoolExecutor | None = None
        self._wake = asyncio.Event()

    # -- hooks for the layers above (truncation, partition moves) ---------------------------

    def abort_and_pause(self, topic: str, partition: int) -> None:
        self.manager.abort_and_pause((topic, partition))

    def resume(self, topic: str, partition: int) -> None:
        self.manager.resume((topic, partition))

    def maybe_truncate_checkpoint(self, topic: str, partition: int, offset: int) -> None:
        self.manager.maybe_truncate_checkpoint((topic, partition), offset)

    # -- one clean ---------------------------------------------------------------------------

    def clean_filthiest_log_steps(self) -> Steps:
        """Choose and clean one log; returns whether one was cleaned."""
        to_clean = self.manager.grab_filthiest_compacted_log(self.now_ms())
        if to_clean is None:
            return False
        return (yield from self._clean_steps(to_clean))

    def _clean_steps(self, to_clean: LogToClean) -> Steps:
        tp = to_clean.tp
        end_offset: int | None = None
        try:
            end_offset, stats = yield from self.cleaner.clean(to_clean, self._checker(to_clean))
        except LogCleaningAbortedError as exc:
            self.totals.aborted += 1
            log.info("cleaning of %s-%d aborted: %s", tp[0], tp[1], exc)
            return False
        except Exception:
            self.totals.failed += 1
            self.manager.mark_uncleanable(tp)
            log.exception("cleaning %s-%d failed; it will not be cleaned again", *tp)
            return False
        finally:
            self.manager.done_cleaning(tp, end_offset)
        self._record(to_clean, stats)
        return True

    def _checker(self, to_clean: LogToClean) -> Callable[[], None]:
        tp, plog = to_clean.tp, to_clean.log

        def check() -> None:
            if self.manager.is_aborted(tp):
                raise LogCleaningAbortedError("aborted")
            if self.log_manager.get_log(*tp) is not plog:
                raise LogCleaningAbortedError("the log was deleted")

        return check

    def _record(self, to_clean: LogToClean, stats: CleanerStats) -> None:
        t = self.totals
        t.runs += 1
        t.bytes_read += stats.bytes_read
        t.bytes_written += stats.bytes_written
        t.messages_read += stats.messages_read
        t.messages_written += stats.messages_written
        t.last = stats
        log.info(
            "cleaned %s in %.3f s: %.1f MB read, %.1f MB written (%.0f%%), %d of %d records kept",
            to_clean.log,
            stats.elapsed_s,
            stats.bytes_read / 1e6,
            stats.bytes_written / 1e6,
            100 * stats.recopy_ratio,
            stats.messages_written,
            stats.messages_read,
        )

    # -- drivers -----------------------------------------------------------------------------

    def clean_filthiest_log_now(self) -> bool:
        """Clean one log synchronously (tests, benchmarks, tools)."""
        return bool(drive_sync(self.clean_filthiest_log_steps()))

    async def clean_filthiest_log(self) -> bool:
        """Clean one log on the running loop, in slices."""
        return bool(await self._drive(self.clean_filthiest_log_steps()))

    async def _drive(self, steps: Steps) -> Any:
        slice_s = self.config.slice_ms / 1000
        rate = self.config.max_io_bytes_per_second
        started = time.monotonic()
        slice_start = started
        reply: Any = None
        try:
            while True:
                try:
                    step = steps.send(reply)
                except StopIteration as done:
                    return done.value
                if step is None:
                    now = time.monotonic()
                    reply = now - slice_start >= slice_s
                    if reply:
                        await asyncio.sleep(self._throttle_delay(started, rate))
                        slice_start = time.monotonic()
                else:
                    reply = await self._offload(step)
                    slice_start = time.monotonic()
        finally:
            steps.close()

    def _throttle_delay(self, started: float, rate: float) -> float:
        """Kafka's log.cleaner.io.max.bytes.per.second: how long to wait to stay under it."""
        stats = self.cleaner.current
        if math.isinf(rate) or rate <= 0 or stats is None:
            return 0.0
        done = stats.map_bytes_read + stats.bytes_read + stats.bytes_written
        return max(done / rate - (time.monotonic() - started), 0.0)

    async def _offload(self, step: Offload) -> Any:
        if self._executor is None:
            self._executor = concurrent.futures.ThreadPoolExecutor(1, "log-cleaner")
        future = self._executor.submit(step.fn)
        try:
            return await asyncio.wrap_future(future)
        except asyncio.CancelledError:
            # The thread cannot be stopped: let it finish before the files go.
            concurrent.futures.wait([future])
            raise

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="log-cleaner")

    def wake(self) -> None:
        """Look for work now instead of after the backoff (tests, config changes)."""
        self._wake.set()

    async def _run(self) -> None:
        while True:
            cleaned = False
            try:
                cleaned = await self.clean_filthiest_log()
            except Exception:
                log.exception("the log cleaner failed; retrying after log.cleaner.backoff.ms")
            if cleaned:
                await asyncio.sleep(0)
                continue
            self._wake.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self.config.backoff_ms / 1000)

    async def shutdown(self) -> None:
        """Stop cleaning (an unfinished clean leaves nothing behind) and release the thread."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if self._executor is not None:
            self._executor.shutdown(wait=True)
            self._executor = None


def drive_sync(steps: Steps) -> Any:
    """Run a cleaner generator to the end on this thread, nothing interleaved."""
    reply: Any = None
    while True:
        try:
            step = steps.send(reply)
        except StopIteration as done:
            return done.value
        reply = step.fn() if step is not None else False


__all__ = [
    "CRASH_POINTS",
    "CRASH_POINT_ENV",
    "CleanerConfig",
    "CleanerTotals",
    "LogCleaner",
    "crash_hook_from_env",
    "drive_sync",
]
