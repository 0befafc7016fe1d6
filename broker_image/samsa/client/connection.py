"""BrokerConnection: one TCP connection to a broker, with pipelined requests.

Requests are written in order and their futures resolved by correlation id as responses
arrive; Kafka answers in order on a connection, so a response that does not match the oldest
outstanding request means the stream is broken and the connection is closed.

When the broker gives SASL sessions a lifetime (KIP-368), the connection re-authenticates
after 85% of it, as Kafka's clients do: new requests wait while the ones in flight are
answered and the SASL exchange runs again.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import ssl
import struct
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from samsa.protocol.framing import FrameReader, FrameSizeError
from samsa.protocol.messages import decode_response, encode_request

log = logging.getLogger(__name__)

_SIZE = struct.Struct(">i")
# Responses larger than this are a broken stream, not a Kafka answer.
_MAX_RESPONSE = 512 * 1024 * 1024
# Re-authenticate this far into the session's lifetime (Kafka's clients: 85% to 95%).
_REAUTH_AT = 0.85


class ConnectionClosed(ConnectionError):
    """The connection is gone; the request may or may not have reached the broker."""


@dataclass(frozen=True)
class ClientSecurity:
    """How to reach a secured listener: TLS, SASL (mechanism, username, password), or both."""

    ssl_context: ssl.SSLContext | None = None
    sasl_mechanism: str | None = None
    username: str = ""
    password: str = ""


class _Responses(asyncio.BufferedProtocol):
    """Reads the broker's response frames into a FrameReader and hands each to its connection."""

    def __init__(self, conn: BrokerConnection) -> None:
        self.conn = conn
        self.frames = FrameReader(_MAX_RESPONSE)
        self.lost: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def get_buffer(self, sizehint: int) -> memoryview:
        return self.frames.get_buffer()

    def buffer_updated(self, nbytes: int) -> None:
        try:
            frames = self.frames.buffer_updated(nbytes)
        except FrameSizeError as exc:
            self.conn._broken(ConnectionClosed(f"{exc} from {self.conn.host}"))
            return
        for frame in frames:
            self.conn._answer(frame)

    def eof_received(self) -> bool | None:
        return None  # closes the transport

    def connection_lost(self, exc: Exception | None) -> None:
        conn = self.conn
        conn._broken(
            ConnectionClosed(str(exc) if exc else f"connection to {conn.host}:{conn.port} closed")
        )
        if not self.lost.done():
            self.lost.set_result(None)


def _expire(future: asyncio.Future[Any]) -> None:
    """A request's answer did not come in time."""
    if not future.done():
        future.set_exception(TimeoutError("no response in time"))


class BrokerConnection:
    def __init__(
        self,
        host: str,
        port: int,
        client_id: str = "samsa",
        security: ClientSecurity | None = None,
    ) -> None:
        self.host = host
        self.port = port
        self.client_id = client_id
        self.security = security
        self._transport: asyncio.Transport | None = None
        self._responses: _Responses | None = None
        self._pending: OrderedDict[int, tuple[int, int, asyncio.Future[Any]]] = OrderedDict()
        self._ids = itertools.count(1)
        self._closed = False
        # KIP-368: the last SaslAuthenticate's session lifetime, and when to re-authenticate.
        self.session_lifetime_ms = 0
        self._reauth_at: float | None = None
        self._reauthenticating: asyncio.Task[None] | None = None

    @property
    def closed(self) -> bool:
        return self._closed

    async def connect(self, timeout_s: float = 5.0) -> BrokerConnection:
        # asyncio.timeout, not wait_for: on Python 3.11 wait_for can swallow a cancellation
        # that arrives as the awaited operation completes, leaving the caller uncancellable.
        tls = self.security.ssl_context if self.security else None
        loop = asyncio.get_running_loop()
        async with asyncio.timeout(timeout_s):
            transport, self._responses = await loop.create_connection(
                lambda: _Responses(self),
                self.host,
                self.port,
                ssl=tls,
                server_hostname=self.host if tls else None,
            )
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport
        if self.security is not None and self.security.sasl_mechanism:
            from samsa.client.sasl import authenticate

            try:
                await authenticate(self, self.security, timeout_s)
            except BaseException:
                self.close()
                raise
            self._schedule_reauthentication()
        return self

    def _schedule_reauthentication(self) -> None:
        lifetime = self.session_lifetime_ms
        self._reauth_at = time.monotonic() + _REAUTH_AT * lifetime / 1000 if lifetime else None

    async def _reauthenticate(self) -> None:
        from samsa.client.sasl import authenticate

        assert self.security is not None
        in_flight = [future for _, _, future in self._pending.values()]
        if in_flight:
            await asyncio.wait(in_flight, timeout=30)
        try:
            await authenticate(self, self.security, 30)
        except BaseException:
            self.close()
            raise
        self._schedule_reauthentication()

    async def request(self, api_key: int, version: int, body: Any, timeout_s: float = 30.0) -> Any:
        """Send one request and wait for its decoded response body."""
        if self._reauth_at is not None and time.monotonic() >= self._reauth_at:
            # Scheduled again once it is done; requests meanwhile wait for it below.
            self._reauth_at = None
            self._reauthenticating = asyncio.create_task(self._reauthenticate())
        if self._reauthenticating is not None and not self._reauthenticating.done():
            await asyncio.shield(self._reauthenticating)
        return await self.send_now(api_key, version, body, timeout_s)

    async def send_now(self, api_key: int, version: int, body: Any, timeout_s: float = 30.0) -> Any:
        """Send at once, not waiting for a re-authentication (the SASL exchange itself)."""
        if self._closed or self._transport is None:
            raise ConnectionClosed(f"connection to {self.host}:{self.port} is closed")
        correlation_id = next(self._ids) & 0x7FFFFFFF
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()
        self._pending[correlation_id] = (api_key, version, future)
        timer: asyncio.TimerHandle | None = None
        try:
            self._transport.write(
                encode_request(api_key, version, correlation_id, self.client_id, body)
            )
            # A timer failing the future, not asyncio.timeout around asyncio.shield: those cost
            # a cancellation scope and a second future on every request (every follower fetch).
            timer = loop.call_later(timeout_s, _expire, future)
            return await future
        except TimeoutError:
            # The answer may still come, but this stream is now out of step with its caller.
            # Its future is nobody's any more: closing must not fail it with an exception that
            # no one will retrieve (asyncio logs each one as an error).
            self._pending.pop(correlation_id, None)
            future.cancel()
            self.close()
            raise
        finally:
            if timer is not None:
                timer.cancel()
            self._pending.pop(correlation_id, None)

    def _answer(self, frame: bytes | bytearray) -> None:
        (correlation_id,) = _SIZE.unpack_from(frame, 0)
        entry = self._pending.get(correlation_id)
        if entry is None:
            return  # its caller gave up (timeout); the stream is still in step
        api_key, version, future = entry
        if future.done():
            return
        try:
            _, body = decode_response(api_key, version, memoryview(frame).toreadonly())
        except Exception as exc:
            future.set_exception(exc)
        else:
            future.set_result(body)

    def _broken(self, error: ConnectionClosed) -> None:
        self._fail_all(error)
        self.close()

    def _fail_all(self, error: BaseException) -> None:
        for _, _, future in list(self._pending.values()):
            if not future.done():
                future.set_exception(error)
        self._pending.clear()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._transport is not None:
            with contextlib.suppress(Exception):
                self._transport.close()
        self._fail_all(ConnectionClosed(f"connection to {self.host}:{self.port} closed"))

    async def aclose(self) -> None:
        self.close()
        if self._responses is not None:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(5):
                    await asyncio.shield(self._responses.lost)
