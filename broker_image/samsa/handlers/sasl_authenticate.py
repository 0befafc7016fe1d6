"""SaslAuthenticate (36): one SASL token each way; a failure is answered, then the connection
closes. session_lifetime_ms is connections.max.reauth.ms (0: sessions never expire), as Kafka
answers for credentials that do not expire (KIP-368)."""

from __future__ import annotations

from typing import Any

from samsa.handlers.context import BrokerServices, RequestContext
from samsa.protocol.errors import ErrorCode
from samsa.security.sasl import SaslAuthenticationError
from samsa.security.session import ConnectionSession

KEY = 36
MIN_VERSION, MAX_VERSION = 0, 2


def _answer(
    code: ErrorCode, message: str | None, token: bytes = b"", lifetime_ms: int = 0
) -> dict[str, Any]:
    return {
        "error_code": code,
        "error_message": message,
        "auth_bytes": token,
        "session_lifetime": lifetime_ms,
    }


async def handle(services: BrokerServices, ctx: RequestContext, request: Any) -> dict[str, Any]:
    session: ConnectionSession | None = getattr(ctx.conn, "session", None)
    sasl = services.sasl
    if session is None or sasl is None or session.authenticated or session.mechanism is None:
        # After authentication Kafka's KafkaApis answers this and keeps the connection.
        if session is not None and not session.authenticated:
            session.close_after_response = True
        return _answer(
            ErrorCode.illegal_sasl_state,
            "Unexpected SaslAuthenticate request: no SASL handshake, or already authenticated",
        )
    try:
        token = await sasl.step(session, ctx.conn.listener, bytes(request.auth_bytes))
    except SaslAuthenticationError as exc:
        session.close_after_response = True
        return _answer(ErrorCode.sasl_authentication_failed, str(exc))
    return _answer(ErrorCode.none, None, token, session.lifetime_ms if session.authenticated else 0)
