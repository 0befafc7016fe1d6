"""SaslHandshake (17): choose a SASL mechanism before SaslAuthenticate (v0: bare tokens follow).

On an authenticated connection it begins re-authentication (KIP-368) when sessions expire
(connections.max.reauth.ms), as Kafka; otherwise it is answered ILLEGAL_SASL_STATE and the
connection stays open, as Kafka's KafkaApis answers it."""

from __future__ import annotations

import time
from typing import Any

from samsa.handlers.context import BrokerServices, RequestContext
from samsa.protocol.errors import ErrorCode
from samsa.security.session import ConnectionSession

KEY = 17
MIN_VERSION, MAX_VERSION = 0, 1


def handle(services: BrokerServices, ctx: RequestContext, request: Any) -> dict[str, Any]:
    session: ConnectionSession | None = getattr(ctx.conn, "session", None)
    sasl = services.sasl
    if session is None or sasl is None or not session.sasl:
        return {"error_code": ErrorCode.illegal_sasl_state, "mechanisms": []}
    offered = sasl.mechanisms(ctx.conn.listener)
    if session.authenticated and not sasl.begin_reauthentication(session):
        if session.expired(time.monotonic()):
            session.close_after_response = True
        return {"error_code": ErrorCode.illegal_sasl_state, "mechanisms": offered}
    if session.mechanism is not None:
        # A second handshake in the middle of an authentication.
        session.close_after_response = True
        return {"error_code": ErrorCode.illegal_sasl_state, "mechanisms": offered}
    mechanism = request.mechanism
    if mechanism not in offered:
        session.close_after_response = True
        return {"error_code": ErrorCode.unsupported_sasl_mechanism, "mechanisms": offered}
    session.mechanism = mechanism
    session.raw_tokens = ctx.version == 0
    return {"error_code": ErrorCode.none, "mechanisms": offered}
