"""ControllerEventManager: the controller's events, run one at a time on one task.

Kafka's ControllerEventManager.  ZooKeeper watches, liveness probes, timers and requests from
brokers put events on one queue, and one task runs them in order, so the controller's state
is only ever changed by one event at a time.  An event fenced by a newer controller resigns
this one; an event that finds this broker no longer the controller is dropped; an event cut
off from ZooKeeper is logged, since the session listener resigns the controller.  A request
that needs an answer waits for its event through `call`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from samsa.metadata.zk_client import ControllerMovedError
from samsa.metadata.zookeeper_client import ZOOKEEPER_LOST

log = logging.getLogger(__name__)

Event = Callable[[], Awaitable[None]]
_RAISE = object()


class NotController(Exception):
    pass


class ControllerEventManager:
    """The queue of one broker's controller events and the task that runs them."""

    def __init__(self, broker_id: int, resign: Callable[[], Awaitable[None]]) -> None:
        self.broker_id = broker_id
        self._resign = resign  # called when an event finds another controller took over
        self._events: asyncio.Queue[Event] = asyncio.Queue()
        self._task: asyncio.Task[None] | None = None
        # Closed: the controller is shutting down, and no event is taken any more.
        self.closed = False

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="controller")

    def put(self, event: Event) -> None:
        if not self.closed:
            self._events.put_nowait(event)

    def close(self) -> None:
        """Take no more events; those queued run until `stop`."""
        self.closed = True

    async def stop(self) -> None:
        """Cancel the task that runs the events."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _run(self) -> None:
        while True:
            event = await self._events.get()
            try:
                await event()
            except ControllerMovedError:
                log.warning("broker %d: another controller took over; resigning", self.broker_id)
                await self._resign()
            except NotController:
                pass
            except ZOOKEEPER_LOST as exc:
                # The session listener resigns this controller; nothing else is to be done.
                log.warning(
                    "broker %d: ZooKeeper lost during controller event %s: %r",
                    self.broker_id,
                    getattr(event, "__name__", event),
                    exc,
                )
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("controller event %s failed", getattr(event, "__name__", event))

    async def every(self, seconds: float, event: Event) -> None:
        """Put `event` on the queue every `seconds`, until cancelled."""
        while True:
            await asyncio.sleep(seconds)
            self.put(event)

    def call(
        self, fn: Callable[[], Awaitable[Any]], not_controller: Any = _RAISE
    ) -> Awaitable[Any]:
        """Run ``fn`` as a controller event and return its result; a NotController answers
        ``not_controller`` if given, else raises."""
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()

        def refuse() -> None:
            if not_controller is _RAISE:
                future.set_exception(NotController())
            else:
                future.set_result(not_controller)

        async def event() -> None:
            try:
                future.set_result(await fn())
            except NotController:
                refuse()
            except ZOOKEEPER_LOST:
                # Its writes may or may not have been made, and this broker is resigning: the
                # caller asks again, of whichever broker is elected.
                refuse()
                raise
            except Exception as exc:
                if not future.done():
                    future.set_exception(exc)
                raise

        self.put(event)
        return future
