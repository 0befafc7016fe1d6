"""LogCleaner: the broker's background compaction of logs with cleanup.policy=compact.

Kafka's LogCleaner runs cleaner threads, and so does this one: the Cleaner is a generator
that stops after every batch, and a worker thread drives it, letting go of the GIL with
`time.sleep(0)` whenever it has held it for `slice_ms`, so that the event loop waits at most
about that long (the interpreter's own switch interval is 5 ms).  The clean reads inactive
segments and writes a new `.cleaned` one, which nothing else touches; whatever acts on the
live log runs on the loop, handed there by the generator as OnLoop steps: reading producer
state, and the last check (the log and the segments being replaced are still as they were)
together with the swap, so that the loop only hears that a clean has finished.  Checks in
the thread between slices stop a clean early when the log was aborted, deleted or truncated;
a read that fails because a segment went meanwhile is an aborted clean, not a failed one.

With `threaded=False` the same generator runs on the loop in slices instead (the benchmark's
baseline): loop lag is then every slice's length.

After each log is cleaned its first dirty offset goes into `cleaner-offset-checkpoint`.
When no log needs cleaning the cleaner sleeps log.cleaner.backoff.ms.

The crash hook the broker gives the cleaner is samsa.faults' (off unless a test sets it).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import functools
import logging
import math
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from samsa.log.cleaner.cleaner import (
    ActiveProducers,
    Cleaner,
    CleanerStats,
    LogCleaningAbortedError,
    OnLoop,
    Step,
    Steps,
)
from samsa.log.cleaner.cleaner_manager import LogCleanerManager, LogToClean, StableOffset
from samsa.log.cleaner.offset_map import OffsetMap
from samsa.log.errors import out_of_space
from samsa.log.log_manager import LogManager
from samsa.log.swap import CrashHook
from samsa.protocol.record_batch import CorruptRecordError
from samsa.wall_clock import wall_clock_ms

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class CleanerConfig:
    """The log.cleaner.* broker settings (Kafka's CleanerConfig)."""

    enable: bool = True
    backoff_ms: int = 15_000
    dedupe_buffer_size: int = 128 * 1024 * 1024
    io_buffer_load_factor: float = 0.9
    io_buffer_size: int = 512 * 1024
    max_io_bytes_per_second: float = math.inf
    # Not Kafka settings: clean in a thread (else on the loop, in slices), and how long
    # cleaning may hold the GIL (or the loop) at a time.
    threaded: bool = True
    slice_ms: float = 1.0

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
        # Set on shutdown: a clean in the thread stops at its next slice.
        self._stopping = threading.Event()
        log_manager.truncation_listeners.append(self._on_truncated)

    # -- hooks for the layers above (truncation, partition moves) ---------------------------

    def abort_and_pause(self, topic: str, partition: int) -> None:
        self.manager.abort_and_pause((topic, partition))

    def resume(self, topic: str, partition: int) -> None:
        self.manager.resume((topic, partition))

    def maybe_truncate_checkpoint(self, topic: str, partition: int, offset: int) -> None:
        self.manager.maybe_truncate_checkpoint((topic, partition), offset)

    def _on_truncated(self, topic: str, partition: int, offset: int) -> None:
        """A log was cut back to `offset` (a follower's truncation): a clean of it stops
        before it swaps anything more in, and nothing from `offset` on counts as clean."""
        self.abort_and_pause(topic, partition)
        self.maybe_truncate_checkpoint(topic, partition, offset)
        self.resume(topic, partition)

    # -- one clean ---------------------------------------------------------------------------

    def clean_filthiest_log_steps(self) -> Steps:
        """Choose and clean one log; returns whether one was cleaned."""
        to_clean = self.manager.grab_filthiest_compacted_log(self.now_ms())
        if to_clean is None:
            return False
        return (yield from self._clean_steps(to_clean))

    def _clean_steps(self, to_clean: LogToClean) -> Steps:
        try:
            result = yield from self.cleaner.clean(to_clean, self._checker(to_clean))
        except Exception as exc:
            return self._finish(to_clean, None, exc)
        return self._finish(to_clean, result, None)

    def _finish(
        self, to_clean: LogToClean, result: tuple[int, CleanerStats] | None, error: Exception | None
    ) -> bool:
        """The manager's bookkeeping after a clean (on the loop): True if it was cleaned."""
        tp = to_clean.tp
        if isinstance(error, (OSError, ValueError, CorruptRecordError)):
            # A segment deleted or truncated under a clean in the thread fails its reads.
            try:
                self.cleaner.check_unchanged()
            except LogCleaningAbortedError as changed:
                error = changed
        self.manager.done_cleaning(tp, result[0] if result is not None else None)
        if isinstance(error, LogCleaningAbortedError):
            self.totals.aborted += 1
            log.info("cleaning of %s-%d aborted: %s", tp[0], tp[1], error)
            return False
        if isinstance(error, OSError) and out_of_space(error):
            # Kafka takes the log directory offline here; Samsa waits for room: the clean
            # left nothing behind and is tried again after log.cleaner.backoff.ms.
            self.totals.failed += 1
            log.warning("cleaning %s-%d stopped: %s; tried again later", tp[0], tp[1], error)
            return False
        if error is not None:
            self.totals.failed += 1
            self.manager.mark_uncleanable(tp)
            log.error("cleaning %s-%d failed; it will not be cleaned again", *tp, exc_info=error)
            return False
        assert result is not None
        self._record(to_clean, result[1])
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
        """Clean one log: in the cleaner's thread, or on the running loop in slices."""
        if not self.config.threaded:
            return bool(await self._drive(self.clean_filthiest_log_steps()))
        to_clean = self.manager.grab_filthiest_compacted_log(self.now_ms())
        if to_clean is None:
            return False
        steps = self.cleaner.clean(to_clean, self._checker(to_clean))
        loop = asyncio.get_running_loop()
        if self._executor is None:
            self._executor = concurrent.futures.ThreadPoolExecutor(1, "log-cleaner")
        future = self._executor.submit(self._drive_in_thread, steps, loop)
        try:
            result = await asyncio.wrap_future(future)
        except asyncio.CancelledError:
            # The thread stops at its next slice; the loop keeps running its OnLoop steps.
            self._stopping.set()
            with contextlib.suppress(Exception):
                await asyncio.wrap_future(future)
            self.manager.done_cleaning(to_clean.tp, None)
            raise
        except Exception as exc:
            return self._finish(to_clean, None, exc)
        return self._finish(to_clean, result, None)

    async def _drive(self, steps: Steps) -> Any:
        """Run a clean to its end on the loop, letting it serve requests between slices."""
        stepper = self._stepper(steps)
        with contextlib.closing(steps):
            while (step := stepper.next()) is not _DONE:
                if step is None:
                    if stepper.slice_over():
                        await asyncio.sleep(stepper.pause_s())
                elif isinstance(step, OnLoop):
                    stepper.run(step.fn)
                else:
                    try:
                        stepper.ran(await self._offload(step.fn))
                    except Exception as exc:
                        stepper.failed(exc)
            return stepper.value

    def _drive_in_thread(self, steps: Steps, loop: asyncio.AbstractEventLoop) -> Any:
        """Run a clean to its end on the cleaner's thread; OnLoop steps go to ``loop``."""
        stepper = self._stepper(steps)
        with contextlib.closing(steps):
            while (step := stepper.next()) is not _DONE:
                if self._stopping.is_set():
                    stepper.failed(LogCleaningAbortedError("the broker is shutting down"))
                elif step is None:
                    if stepper.slice_over():
                        # Lets the loop thread take the GIL now rather than at the switch
                        # interval (and keeps to log.cleaner.io.max.bytes.per.second).
                        time.sleep(stepper.pause_s())
                elif isinstance(step, OnLoop):
                    stepper.run(functools.partial(self._on_loop, step, loop))
                else:
                    stepper.run(step.fn)
            return stepper.value

    def _stepper(self, steps: Steps) -> _Stepper:
        config = self.config
        return _Stepper(
            steps, config.slice_ms, config.max_io_bytes_per_second, lambda: self.cleaner.current
        )

    def _on_loop(self, step: Step, loop: asyncio.AbstractEventLoop) -> Any:
        assert step is not None
        fn = step.fn
        future: concurrent.futures.Future[Any] = concurrent.futures.Future()

        def run() -> None:
            if future.set_running_or_notify_cancel():
                try:
                    future.set_result(fn())
                except BaseException as exc:
                    future.set_exception(exc)

        loop.call_soon_threadsafe(run)
        while True:
            try:
                return future.result(timeout=0.1)
            except concurrent.futures.TimeoutError:
                # A loop that is shutting down may never run it.
                if self._stopping.is_set() and future.cancel():
                    raise LogCleaningAbortedError("the broker is shutting down") from None

    async def _offload(self, fn: Callable[[], object]) -> Any:
        if self._executor is None:
            self._executor = concurrent.futures.ThreadPoolExecutor(1, "log-cleaner")
        future = self._executor.submit(fn)
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
        self._stopping.set()
        with contextlib.suppress(ValueError):
            self.log_manager.truncation_listeners.remove(self._on_truncated)
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if self._executor is not None:
            self._executor.shutdown(wait=True)
            self._executor = None


_DONE: Any = object()


class _Stepper:
    """One clean's generator, driven step by step: each step's result (or exception) goes
    back in, and between batches it says whether the clean has held the loop (or the GIL)
    for a whole slice."""

    def __init__(
        self,
        steps: Steps,
        slice_ms: float = math.inf,
        max_bytes_per_second: float = math.inf,
        stats: Callable[[], CleanerStats | None] = lambda: None,
    ) -> None:
        self.steps = steps
        self.value: Any = None
        self._reply: Any = None
        self._error: BaseException | None = None
        self._slice_s = slice_ms / 1000
        self._rate = max_bytes_per_second
        self._stats = stats
        self._started = self._slice_start = time.monotonic()

    def next(self) -> Step:
        """The next step, or _DONE once the clean has returned (its result in `value`)."""
        try:
            if self._error is None:
                return self.steps.send(self._reply)
            return self.steps.throw(self._error)
        except StopIteration as done:
            self.value = done.value
            return _DONE
        finally:
            self._reply, self._error = None, None

    def slice_over(self) -> bool:
        self._reply = time.monotonic() - self._slice_start >= self._slice_s
        return bool(self._reply)

    def pause_s(self) -> float:
        """How long to pause: none, or what keeps log.cleaner.io.max.bytes.per.second."""
        self._slice_start = time.monotonic()
        stats = self._stats()
        if math.isinf(self._rate) or self._rate <= 0 or stats is None:
            return 0.0
        done = stats.map_bytes_read + stats.bytes_read + stats.bytes_written
        return max(done / self._rate - (time.monotonic() - self._started), 0.0)

    def run(self, fn: Callable[[], object]) -> None:
        try:
            self.ran(fn())
        except Exception as exc:
            self.failed(exc)

    def ran(self, result: object) -> None:
        self._reply = result
        self._slice_start = time.monotonic()

    def failed(self, error: BaseException) -> None:
        self._error = error
        self._slice_start = time.monotonic()


def drive_sync(steps: Steps) -> Any:
    """Run a cleaner generator to the end on this thread, nothing interleaved."""
    stepper = _Stepper(steps)
    with contextlib.closing(steps):
        while (step := stepper.next()) is not _DONE:
            if step is None:
                stepper.slice_over()
            else:
                stepper.run(step.fn)
        return stepper.value


__all__ = [
    "CleanerConfig",
    "CleanerTotals",
    "LogCleaner",
    "drive_sync",
]
