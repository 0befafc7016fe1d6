"""KafkaProxy: a TCP proxy between Kafka clients and a broker that can lose responses.

For fault tests.  It forwards requests and responses frame by frame and, when its policy
says so, cuts the connection instead of forwarding a response: the broker did the work, the
client never hears of it, as when a network drops an acknowledgement.  While paused it
closes every connection and refuses new ones, as an unreachable broker would.

Clients reach a broker through the proxy only if the broker advertises the proxy's address
(`advertised.listeners`), so the proxy binds its port when it is created, before the broker
starts.  Like InProcessBroker it runs its own event loop in a thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

PRODUCE = 0
_SIZE = struct.Struct(">i")
_REQUEST_HEAD = struct.Struct(">hhi")
_CORRELATION = struct.Struct(">i")

# (api key, api version) of a request -> True to cut the connection instead of answering.
DropPolicy = Callable[[int, int], bool]


def never(api_key: int, version: int) -> bool:
    return False


class DropProduceResponses:
    """Lose the answer to every `every`-th Produce request, `count` times in all."""

    def __init__(self, count: int, every: int = 1) -> None:
        self.remaining = count
        self.every = every
        self._seen = 0

    def __call__(self, api_key: int, version: int) -> bool:
        if api_key != PRODUCE or self.remaining <= 0:
            return False
        self._seen += 1
        if self._seen % self.every:
            return False
        self.remaining -= 1
        return True


class KafkaProxy:
    """Listens on a free 127.0.0.1 port and forwards to `upstream_port`."""

    def __init__(self, upstream_port: int = 0, policy: DropPolicy = never) -> None:
        self.upstream_port = upstream_port
        self.policy = policy
        self.pause_after_drop = False
        self.dropped = 0  # responses lost so far
        self.requests: dict[int, int] = {}  # api key -> requests forwarded
        self._listener = socket.socket()
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(64)
        self.port = int(self._listener.getsockname()[1])
        self._paused = False
        self._writers: set[asyncio.StreamWriter] = set()
        self._tasks: set[asyncio.Task[Any]] = set()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._server: asyncio.Server | None = None

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    # -- control, from any thread ------------------------------------------------------------

    def start(self) -> KafkaProxy:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name=f"kafka-proxy-{self.port}", daemon=True
        )
        self._thread.start()
        self._call(self._start())
        return self

    def stop(self) -> None:
        if self._loop is None:
            return
        with contextlib.suppress(Exception):
            self._call(self._stop())
        self._loop.call_soon_threadsafe(self._loop.stop)
        if self._thread is not None:
            self._thread.join(10)
        self._loop.close()
        self._loop = None

    def pause(self) -> None:
        """Close every connection and refuse new ones until `resume`."""
        self._call(self._pause())

    def resume(self) -> None:
        self._paused = False

    @property
    def paused(self) -> bool:
        return self._paused

    def __enter__(self) -> KafkaProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _call(self, coro: Any) -> Any:
        assert self._loop is not None
        fut: Future[Any] = asyncio.run_coroutine_threadsafe(coro, self._loop)
        return fut.result(10)

    # -- the loop ------------------------------------------------------------------------------

    async def _start(self) -> None:
        self._server = await asyncio.start_server(self._accept, sock=self._listener)

    async def _stop(self) -> None:
        if self._server is not None:
            self._server.close()
        await self._pause()
        # Closed transports end every connection's task; cancelling them instead upsets
        # asyncio's stream callback (Python 3.11).
        if self._tasks:
            await asyncio.wait(self._tasks, timeout=5)

    async def _pause(self) -> None:
        self._paused = True
        for writer in list(self._writers):
            writer.close()
        self._writers.clear()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self._paused:
            writer.close()
            return
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.upstream_port)
        except OSError:
            writer.close()
            return
        self._writers.update((writer, up_writer))
        pending: dict[int, tuple[int, int]] = {}
        upstream = asyncio.create_task(self._responses(up_reader, writer, up_writer, pending))
        try:
            while True:
                frame = await _read_frame(reader)
                if frame is None:
                    break
                api_key, version, correlation = _REQUEST_HEAD.unpack_from(frame, 4)
                pending[correlation] = (api_key, version)
                self.requests[api_key] = self.requests.get(api_key, 0) + 1
                up_writer.write(frame)
                await up_writer.drain()
        except (OSError, asyncio.IncompleteReadError):
            pass
        finally:
            self._close(writer, up_writer)
            upstream.cancel()
            with contextlib.suppress(asyncio.CancelledError, OSError):
                await upstream

    async def _responses(
        self,
        up_reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        up_writer: asyncio.StreamWriter,
        pending: dict[int, tuple[int, int]],
    ) -> None:
        try:
            while True:
                frame = await _read_frame(up_reader)
                if frame is None:
                    break
                (correlation,) = _CORRELATION.unpack_from(frame, 4)
                api_key, version = pending.pop(correlation, (-1, -1))
                if self.policy(api_key, version):
                    self.dropped += 1
                    if self.pause_after_drop:
                        await self._pause()
                    break
                writer.write(frame)
                await writer.drain()
        except (OSError, asyncio.IncompleteReadError):
            pass
        self._close(writer, up_writer)

    def _close(self, *writers: asyncio.StreamWriter) -> None:
        for w in writers:
            self._writers.discard(w)
            w.close()


async def _read_frame(reader: asyncio.StreamReader) -> bytes | None:
    head = await reader.read(4)
    if not head:
        return None
    if len(head) < 4:
        head += await reader.readexactly(4 - len(head))
    (size,) = _SIZE.unpack(head)
    return head + await reader.readexactly(size)
