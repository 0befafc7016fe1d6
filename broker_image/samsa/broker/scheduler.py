"""KafkaScheduler: the broker's periodic jobs (retention, checkpoints, flushes, ISR shrinks),
each an asyncio task that runs its job every interval until the broker stops."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

from samsa.log.errors import out_of_space

log = logging.getLogger(__name__)


class KafkaScheduler:
    def __init__(self) -> None:
        self._tasks: list[asyncio.Task[None]] = []

    def schedule(self, interval_ms: int, job: Callable[[], Awaitable[None] | None]) -> None:
        """Run ``job`` every ``interval_ms``; a job that fails is logged and runs again."""

        async def loop() -> None:
            while True:
                await asyncio.sleep(interval_ms / 1000)
                try:
                    result = job()
                    if asyncio.iscoroutine(result):
                        await result
                except OSError as exc:
                    if not out_of_space(exc):
                        log.exception("scheduled job %s failed", getattr(job, "__name__", job))
                        continue
                    # A full disk is expected to pass: one line, and the job runs again.
                    log.warning("scheduled job %s: %s", getattr(job, "__name__", job), exc)
                except Exception:
                    log.exception("scheduled job %s failed", getattr(job, "__name__", job))

        self._tasks.append(asyncio.create_task(loop()))

    async def shutdown(self) -> None:
        """Cancel every job, and wait until none runs."""
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
