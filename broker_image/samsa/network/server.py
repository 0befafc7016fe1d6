"""SocketServer: accepts Kafka connections and turns their bytes into size-delimited frames.

Each connection handles its requests in arrival order and answers them in that order, like
Kafka's muted channels: a request that completes synchronously (most of them) is answered at
once, and the answers to a burst of pipelined requests leave in one transport write. A request
whose handler returns an awaitable (a long-polling fetch) holds the requests behind it until it
completes. A Deferred one (acks=all waiting for the ISR: its records already appended) does
not: the requests behind it are handled meanwhile and their answers queue behind its answer.

A listener may serve TLS (an ssl.SSLContext from samsa.security): the transport then encrypts,
so fetched file regions cannot go out by sendfile and are read into memory instead (Kafka's
SSL channel copies them too). The connection's principal starts as the TLS client
certificate's subject, or ANONYMOUS.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import ssl
import struct
from collections import deque
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Protocol, TypeAlias, cast

from samsa.protocol.errors import CloseConnection
from samsa.protocol.fileregion import FileRegion
from samsa.protocol.pipelining import Deferred
from samsa.security.principal import tls_principal
from samsa.security.session import ConnectionSession

log = logging.getLogger(__name__)

# Bytes in memory, which a transport write takes; a file region goes by sendfile.
InMemory: TypeAlias = bytes | bytearray | memoryview
Chunk: TypeAlias = InMemory | FileRegion
Chunks: TypeAlias = Sequence[Chunk]
# A response is its frame as chunks (size prefix included), or None for "no response" (acks=0).
Response: TypeAlias = Chunks | None

_SIZE = struct.Struct(">i")
_INITIAL_BUFFER = 256 * 1024
# Stop reading from a client that pipelines faster than we answer.
_MAX_PENDING_FRAMES = 64
_LARGE_CHUNK = 64 * 1024
# Deferred answers a connection may owe before it stops handling requests (Kafka clients keep
# at most max.in.flight.requests.per.connection, 5 by default for librdkafka's idempotence, but
# librdkafka's default without it is a million).
_MAX_DEFERRED = 128


def _write_joined(transport: asyncio.Transport, small: list[InMemory]) -> None:
    if small:
        transport.write(small[0] if len(small) == 1 else b"".join(small))


def _release(chunks: Iterable[Chunk]) -> None:
    for chunk in chunks:
        if isinstance(chunk, FileRegion):
            chunk.close()


class RequestHandler(Protocol):
    def handle(
        self, frame: bytes | memoryview, conn: Connection
    ) -> Response | Awaitable[Response]: ...


class Connection(asyncio.BufferedProtocol):
    """One client connection: frame reassembly into a preallocated buffer, ordered dispatch."""

    def __init__(self, server: SocketServer) -> None:
        self.server = server
        self.buf = bytearray(_INITIAL_BUFFER)
        self.view = memoryview(self.buf)
        self.start = 0
        self.end = 0
        self.pending: deque[bytes] = deque()
        # A non-deferred awaitable is running: nothing more is handled until it completes.
        self.busy = False
        # Answers owed, in request order: a task still running, or an answer held behind one.
        self.slots: deque[asyncio.Future[Response] | list[Chunk]] = deque()
        self.deferred = 0
        # Chunks queued behind a file region being sent; requests wait while it drains.
        self.backlog: deque[Chunk] = deque()
        self.sender: asyncio.Future[None] | None = None
        self.closed = False
        self.reading_paused = False
        self.writing_paused = False
        # Throttled by a client quota: nothing is read or handled until the timer ends it.
        self.muted: asyncio.TimerHandle | None = None
        self.transport: asyncio.Transport | None = None
        self.peer: str = "?"
        self.listener: str = server.name
        self.session = ConnectionSession.for_protocol(server.security_protocol)
        self.tls = server.ssl_context is not None
        # The socket's descriptor, for sending file regions straight to it; -1 under TLS.
        self.sock_fd = -1

    # asyncio callbacks

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if peer else "?"
        if self.tls:
            self.session.principal = tls_principal(transport.get_extra_info("peercert"))
        sock = transport.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if not self.tls:
                self.sock_fd = sock.fileno()
        self.server.connections.add(self)
        self.server.on_connection_change(+1)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.pending.clear()
        self._drop_slots()
        if self in self.server.connections:
            self.server.connections.discard(self)
            self.server.on_connection_change(-1)

    def get_buffer(self, sizehint: int) -> memoryview:
        if self.end >= len(self.buf):
            self._make_room(max(len(self.buf) - (self.end - self.start), 4096))
        return self.view[self.end :]

    def buffer_updated(self, nbytes: int) -> None:
        self.end += nbytes
        limit = self.server.max_request_size
        out: list[Chunk] = []
        while not self.closed:
            avail = self.end - self.start
            if avail < 4:
                break
            (size,) = _SIZE.unpack_from(self.buf, self.start)
            if size <= 0 or size > limit:
                log.warning(
                    "closing connection from %s: request of %d bytes is outside 1..%d "
                    "(socket.request.max.bytes)",
                    self.peer,
                    size,
                    limit,
                )
                self._flush(out)
                self.close()
                return
            if avail < 4 + size:
                if self.start + 4 + size > len(self.buf):
                    self._make_room(4 + size)
                break
            body_start = self.start + 4
            self.start = body_start + size
            body = self.view[body_start : self.start]
            if self.pending or self._blocked():
                self.pending.append(bytes(body))
            else:
                # Decoded in place: a handler copies what it keeps before it returns, even
                # an awaitable, since a larger frame read behind this one compacts the
                # buffer within this very call.
                self._handle(body.toreadonly(), out)
        if self.start == self.end:
            self.start = self.end = 0
        self._flush(out)
        if len(self.pending) >= _MAX_PENDING_FRAMES and not self.reading_paused:
            self.reading_paused = True
            assert self.transport is not None
            self.transport.pause_reading()
        self._process()

    def eof_received(self) -> bool | None:
        return None

    def pause_writing(self) -> None:
        self.writing_paused = True

    def resume_writing(self) -> None:
        self.writing_paused = False
        self._process()

    # internals

    def _blocked(self) -> bool:
        return (
            self.busy
            or self.muted is not None
            or self.writing_paused
            or self.sender is not None
            or self.deferred >= _MAX_DEFERRED
            or self.closed
        )

    def mute_for(self, ms: int) -> None:
        """Kafka's muting of a throttled channel (KIP-219): the answer already given leaves;
        requests read behind it wait, and the socket is not read, for ``ms``."""
        if self.closed or ms <= 0:
            return
        loop = asyncio.get_running_loop()
        until = loop.time() + ms / 1000
        if self.muted is not None:
            if self.muted.when() >= until:
                return
            self.muted.cancel()
        self.muted = loop.call_at(until, self._unmute)
        if self.transport is not None and not self.reading_paused:
            self.transport.pause_reading()

    def _unmute(self) -> None:
        self.muted = None
        if self.closed:
            return
        if self.transport is not None and not self.reading_paused:
            self.transport.resume_reading()
        self._process()

    def _make_room(self, needed: int) -> None:
        """Compact the unread bytes to the front, growing the buffer if a frame needs it."""
        unread = self.end - self.start
        size = len(self.buf)
        while size < unread + needed:
            size *= 2
        if size != len(self.buf) or self.start > 0:
            new = bytearray(size) if size != len(self.buf) else None
            if new is None:
                self.buf[0:unread] = self.view[self.start : self.end]
            else:
                new[0:unread] = self.view[self.start : self.end]
                self.view.release()
                self.buf = new
                self.view = memoryview(new)
            self.start = 0
            self.end = unread

    def _handle(self, frame: bytes | memoryview, out: list[Chunk]) -> None:
        """Run one request; its answer joins `out`, or it becomes the in-flight request."""
        try:
            result = self.server.handler.handle(frame, self)
        except CloseConnection:
            self._flush(out)
            out.clear()
            self.close()
            return
        except Exception:
            log.exception("request from %s failed; closing the connection", self.peer)
            self._flush(out)
            out.clear()
            self.close()
            return
        if result is None:
            return
        if isinstance(result, (list, tuple)):
            if self.slots:
                self.slots.append(list(result))  # behind an answer still owed
            else:
                out.extend(result)
            return
        self._flush(out)
        out.clear()
        if isinstance(result, Deferred):
            task = asyncio.ensure_future(cast(Awaitable[Response], result.awaitable))
            self.deferred += 1
            task.add_done_callback(self._deferred_done)
        else:
            task = asyncio.ensure_future(cast(Awaitable[Response], result))
            self.busy = True
            task.add_done_callback(self._busy_done)
        self.slots.append(task)

    def _process(self) -> None:
        out: list[Chunk] = []
        while self.pending and not self._blocked():
            self._handle(self.pending.popleft(), out)
        self._flush(out)
        if (
            self.reading_paused
            and len(self.pending) < _MAX_PENDING_FRAMES // 2
            and not self.closed
            and self.muted is None
        ):
            self.reading_paused = False
            assert self.transport is not None
            self.transport.resume_reading()

    def _busy_done(self, task: asyncio.Future[Response]) -> None:
        self.busy = False
        self._completed(task)

    def _deferred_done(self, task: asyncio.Future[Response]) -> None:
        self.deferred -= 1
        self._completed(task)

    def _completed(self, task: asyncio.Future[Response]) -> None:
        if self.closed:
            return
        if not self._failed(task):
            self._send_owed()
        if not self.closed:
            self._process()

    def _failed(self, task: asyncio.Future[Response]) -> bool:
        """Whether the task ended without an answer; the connection is then closed, since the
        client can no longer match answers to its requests."""
        if task.cancelled():
            self.close()
            return True
        exc = task.exception()
        if exc is None:
            return False
        if not isinstance(exc, CloseConnection):
            log.error("request from %s failed; closing the connection", self.peer, exc_info=exc)
        self.close()
        return True

    def _send_owed(self) -> None:
        """Write the owed answers from the front, up to the first one still being worked on."""
        out: list[Chunk] = []
        while self.slots:
            head = self.slots[0]
            if isinstance(head, list):
                out.extend(head)
            elif not head.done():
                break
            elif self._failed(head):
                _release(out)
                return
            else:
                out.extend(head.result() or ())
            self.slots.popleft()
        self._flush(out)

    def _drop_slots(self) -> None:
        while self.slots:
            head = self.slots.popleft()
            if isinstance(head, list):
                _release(head)
            else:
                head.cancel()

    def _flush(self, chunks: Sequence[Chunk]) -> None:
        """Write in order: small chunks in one write, large ones uncopied, file regions by
        sendfile (the socket then belongs to the sender until its backlog drains).

        (Python 3.11's writelines joins its arguments: a copy of every fetched byte.)
        """
        if not chunks:
            return
        if self.transport is None or self.closed:
            _release(chunks)
            return
        if self.sender is not None:
            self.backlog.extend(chunks)
            return
        transport = self.transport
        small: list[InMemory] = []
        if self.tls:
            copied = _read_regions(chunks)
            if copied is None:
                self.close()
                return
            chunks = copied
        for i, chunk in enumerate(chunks):
            if isinstance(chunk, FileRegion):
                _write_joined(transport, small)
                small = []
                try:
                    done = self._sendfile_now(chunk)
                except OSError as exc:
                    log.warning("closing connection to %s: %s", self.peer, exc)
                    _release(chunks[i:])
                    self.close()
                    return
                if done:
                    chunk.close()
                    continue
                self.backlog.extend(chunks[i:])
                self.sender = asyncio.ensure_future(self._send_backlog())
                self.sender.add_done_callback(self._sent)
                return
            if len(chunk) >= _LARGE_CHUNK:
                _write_joined(transport, small)
                small = []
                transport.write(chunk)
            else:
                small.append(chunk)
        _write_joined(transport, small)
        if self.session.close_after_response:
            # A refused authentication: answered, then closed (the transport flushes first).
            self.close()

    async def _send_backlog(self) -> None:
        loop = asyncio.get_running_loop()
        transport = self.transport
        assert transport is not None
        while self.backlog and not self.closed:
            chunk = self.backlog.popleft()
            if isinstance(chunk, FileRegion):
                try:
                    if not self._sendfile_now(chunk):
                        with os.fdopen(chunk.fd, "rb", buffering=0, closefd=False) as f:
                            sent = await loop.sendfile(transport, f, chunk.offset, chunk.count)
                        if sent != chunk.count:
                            # The file shrank under us (a truncated log): the frame can't be
                            # finished.
                            raise OSError(f"sent {sent} of {chunk.count} bytes of a file region")
                finally:
                    chunk.close()
                continue
            small = [chunk]
            while self.backlog:
                following = self.backlog[0]
                if isinstance(following, FileRegion):
                    break
                small.append(following)
                self.backlog.popleft()
            _write_joined(transport, small)

    def _sendfile_now(self, region: FileRegion) -> bool:
        """Send what the socket takes of `region` now, by os.sendfile on its descriptor; True
        once all of it went, else the region keeps the rest for loop.sendfile.

        loop.sendfile costs a task, futures, a writer registration and a pause of reading per
        region, more than the send itself for the tens of KB of a consumer keeping up; on
        loopback the socket mostly takes the whole region at once. Only with the transport's
        buffer empty, so the bytes stay in order; the file shrinking under us raises OSError.
        """
        assert self.transport is not None
        if self.sock_fd < 0 or self.transport.get_write_buffer_size():
            return False
        while region.count:
            try:
                sent = os.sendfile(self.sock_fd, region.fd, region.offset, region.count)
            except BlockingIOError:
                return False
            if sent == 0:
                raise OSError(f"file region shrank: {region.count} bytes missing")
            region.offset += sent
            region.count -= sent
        return True

    def _sent(self, task: asyncio.Future[None]) -> None:
        self.sender = None
        if not task.cancelled() and task.exception() is not None:
            log.warning("closing connection to %s: %s", self.peer, task.exception())
            self.close()
        if self.closed:
            _release(self.backlog)
            self.backlog.clear()
            return
        self._process()

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            if self.muted is not None:
                self.muted.cancel()
                self.muted = None
            self.pending.clear()
            self._drop_slots()
            if self.sender is not None:
                self.sender.cancel()
            if self.transport is not None:
                self.transport.close()


def _read_regions(chunks: Sequence[Chunk]) -> list[Chunk] | None:
    """File regions read into bytes, for a transport that cannot sendfile (TLS); None when a
    file shrank under us (a truncated log) and the frame cannot be finished."""
    out: list[Chunk] = []
    try:
        for chunk in chunks:
            out.append(chunk.read() if isinstance(chunk, FileRegion) else chunk)
    except OSError as exc:
        log.warning("cannot finish a fetch response: %s", exc)
        return None
    finally:
        _release(chunks)
    return out


class SocketServer:
    """Listens on host:port and serves each connection with the injected request handler."""

    def __init__(
        self,
        handler: RequestHandler,
        host: str,
        port: int,
        *,
        max_request_size: int = 104_857_600,
        name: str = "PLAINTEXT",
        on_connection_change: Callable[[int], None] | None = None,
        ssl_context: ssl.SSLContext | None = None,
        security_protocol: str = "PLAINTEXT",
    ) -> None:
        self.handler = handler
        self.host = host
        self.port = port
        self.name = name
        self.ssl_context = ssl_context
        self.security_protocol = security_protocol
        self.max_request_size = max_request_size
        self.connections: set[Connection] = set()
        self.on_connection_change: Callable[[int], None] = on_connection_change or (
            lambda _delta: None
        )
        self._server: asyncio.Server | None = None

    async def start(self, serving: bool = True) -> None:
        """Bind (learning the port). With serving=False nothing is accepted until `serve()`:
        connections are refused meanwhile, so no request arrives before its handler can
        answer (Kafka starts its acceptors last, for the same reason)."""
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(
            lambda: Connection(self),
            self.host,
            self.port,
            reuse_address=True,
            backlog=1024,
            start_serving=serving,
            ssl=self.ssl_context,
        )
        sock = self._server.sockets[0]
        self.port = sock.getsockname()[1]

    async def serve(self) -> None:
        assert self._server is not None
        await self._server.start_serving()

    @property
    def bound_port(self) -> int:
        return self.port

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            for conn in list(self.connections):
                conn.close()
            await self._server.wait_closed()
            self._server = None
