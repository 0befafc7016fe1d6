"""KafkaApis: the dispatch table from API key to handler, and request decoding around it."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import inspect
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from samsa.handlers import throttling
from samsa.handlers.context import BrokerServices, ClientConnection, RequestContext
from samsa.protocol.errors import CloseConnection
from samsa.protocol.messages import (
    InvalidRequestError,
    RequestHeader,
    build,
    decode_request,
    encode_response,
    parse_request_header,
    peek_api,
    request_is_flexible,
    response_type,
)
from samsa.protocol.pipelining import Deferred
from samsa.security.sasl import SaslAuthenticationError
from samsa.security.session import PRE_AUTHENTICATION_APIS as PRE_AUTH
from samsa.security.session import ConnectionSession

log = logging.getLogger(__name__)

Chunks = Sequence[bytes | bytearray | memoryview]
HandlerResult = Any  # a response as a dict (or kio body), wire chunks, or None (no response)
Handler = Callable[[BrokerServices, RequestContext, Any], HandlerResult | Awaitable[HandlerResult]]

API_VERSIONS_KEY = 18
SASL_HANDSHAKE_KEY = 17


@dataclass(frozen=True)
class Api:
    key: int
    name: str
    min_version: int
    max_version: int
    handle: Handler
    notes: str = ""
    # A hand-written request reader (version, frame, offset) -> request, where kio's is too slow.
    decode: Callable[[int, bytes | memoryview, int], Any] | None = None


def read_request(api: Api, version: int, frame: bytes | memoryview) -> tuple[RequestHeader, Any]:
    """The header and body of a request frame for `api` at a version it supports.

    Malformed bytes of any kind raise InvalidRequestError and nothing else (fuzz/requests.py
    holds every API key and version to that); the dispatcher then closes the connection.
    """
    header = parse_request_header(frame, request_is_flexible(api.key, version))
    if api.decode is not None:
        return header, api.decode(version, frame, header.size)
    return header, decode_request(api.key, version, frame, header.size)


class KafkaApis:
    """Turns one request frame into its response: decode, dispatch, encode.

    Malformed frames, unknown API keys and unsupported versions close the connection, except
    ApiVersions, which answers an unsupported version with a v0 UNSUPPORTED_VERSION response so
    the client can learn what this broker speaks.
    """

    def __init__(self, services: BrokerServices, apis: Sequence[Api]) -> None:
        self.services = services
        self.table: dict[int, Api] = {api.key: api for api in apis}
        services.api_table = self.table

    def handle(
        self, frame: bytes | memoryview, conn: ClientConnection
    ) -> Chunks | Awaitable[Any] | Deferred | None:
        started = time.perf_counter()
        session = getattr(conn, "session", None)
        if session is not None and not session.authenticated and session.raw_tokens:
            return self._raw_token(session, frame, conn)
        try:
            key, version, correlation_id = peek_api(frame)
        except InvalidRequestError as exc:
            log.info("closing connection from %s: %s", conn.peer, exc)
            raise CloseConnection from None
        api = self.table.get(key)
        if api is None:
            log.info("closing connection from %s: unknown API key %d", conn.peer, key)
            raise CloseConnection
        if (
            session is not None
            and session.expires_at is not None
            and session.expired(time.monotonic())
            and key != SASL_HANDSHAKE_KEY
        ):
            # KIP-368: a session past its lifetime that did not re-authenticate, as Kafka's
            # SocketServer closes it.
            log.info("closing connection from %s: its SASL session expired", conn.peer)
            raise CloseConnection
        if session is not None and not session.authenticated and key not in PRE_AUTH:
            log.info(
                "closing connection from %s: %s before SASL authentication", conn.peer, api.name
            )
            raise CloseConnection
        if not api.min_version <= version <= api.max_version:
            if key == API_VERSIONS_KEY:
                from samsa.handlers.api_versions import unsupported_version_response

                return [unsupported_version_response(correlation_id, self.table)]
            log.info(
                "closing connection from %s: %s v%d is not supported (v%d-v%d)",
                conn.peer,
                api.name,
                version,
                api.min_version,
                api.max_version,
            )
            raise CloseConnection
        try:
            header, request = read_request(api, version, frame)
        except InvalidRequestError as exc:
            log.info(
                "closing connection from %s: malformed %s v%d: %s",
                conn.peer,
                api.name,
                version,
                exc,
            )
            raise CloseConnection from None
        ctx = RequestContext(header, conn, started, len(frame))
        result = api.handle(self.services, ctx, request)
        if isinstance(result, Deferred):
            return Deferred(self._finish_later(api, ctx, result.awaitable, started))
        if inspect.isawaitable(result):
            return self._finish_later(api, ctx, result, started)
        return self._finish(api, ctx, result, started)

    async def _raw_token(
        self, session: ConnectionSession, frame: bytes | memoryview, conn: ClientConnection
    ) -> Chunks:
        """A bare SASL token after SaslHandshake v0: answered bare, or the connection closes."""
        assert self.services.sasl is not None
        try:
            token = await self.services.sasl.step(session, conn.listener, bytes(frame))
        except SaslAuthenticationError as exc:
            log.info("closing connection from %s: %s", conn.peer, exc)
            raise CloseConnection from None
        session.raw_tokens = not session.authenticated
        return [len(token).to_bytes(4, "big"), token]

    def _finish(
        self,
        api: Api,
        ctx: RequestContext,
        result: HandlerResult,
        started: float,
    ) -> Chunks | None:
        elapsed = time.perf_counter() - started
        self.services.on_request(ctx.metric_name or api.name, elapsed)

        if result is None:
            return None
        if self.services.quotas.active:
            throttle = throttling.request(self.services, ctx, api.key, throttling.on_loop(ctx))
            if throttle:
                result = _with_throttle(result, throttle)
        if isinstance(result, (list, tuple)):
            return result
        if isinstance(result, dict):
            result = build(response_type(api.key, ctx.version), result)
        return [encode_response(api.key, ctx.version, ctx.header.correlation_id, result)]

    def _finish_later(
        self, api: Api, ctx: RequestContext, pending: Awaitable[HandlerResult], started: float
    ) -> asyncio.Future[Chunks | None]:
        """The handler's awaitable, then its response, as a task started now.  A connection
        closed before the task's first step cancels it; the handler's coroutine, never
        started then, is closed too rather than left to be reported as never awaited."""

        if self.services.quotas.active:
            ctx.on_loop = time.perf_counter() - started

        async def finish() -> Chunks | None:
            return self._finish(api, ctx, await pending, started)

        task = asyncio.ensure_future(finish())
        if inspect.iscoroutine(pending):
            coroutine = pending
            task.add_done_callback(lambda _: coroutine.close())
        return task


def _with_throttle(result: HandlerResult, throttle_ms: int) -> HandlerResult:
    """The response with its throttle_time_ms set (KIP-219: the client learns it at once);
    hand-encoded responses carry their own, and versions without the field drop it."""
    if isinstance(result, dict):
        return {**result, "throttle_time": throttle_ms}
    if dataclasses.is_dataclass(result) and hasattr(result, "throttle_time"):
        return dataclasses.replace(  # type: ignore[type-var]
            result, throttle_time=datetime.timedelta(milliseconds=throttle_ms)
        )
    return result
