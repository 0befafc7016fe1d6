"""The server side of SASL: a connection's tokens through PLAIN or SCRAM to a principal.

PLAIN checks the listener's JAAS ``user_<name>="<password>"`` options; SCRAM the stored
credentials. Failures raise SaslAuthenticationError with Kafka's messages (which name no
reason a guesser could use).

Re-authentication (KIP-368), as Kafka's SaslServerAuthenticator: with
``connections.max.reauth.ms`` above 0, an authenticated session lasts that long (the client is
told in SaslAuthenticate's session_lifetime_ms); the client re-authenticates on the same
connection with the same mechanism and must come out as the same principal."""

from __future__ import annotations

import hmac
import time

from samsa.config import KafkaConfig
from samsa.protocol.scram import MECHANISMS as SCRAM_MECHANISMS
from samsa.protocol.scram import ScramError
from samsa.security.principal import KafkaPrincipal
from samsa.security.sasl_config import enabled_mechanisms, plain_users
from samsa.security.scram import ScramServer, parse_client_first
from samsa.security.security_store import SecurityStore
from samsa.security.session import ConnectionSession


class SaslAuthenticationError(Exception):
    """Authentication failed; the client is told this message, then the connection closes."""


class SaslServer:
    """The broker's SASL settings and credential store, shared by all connections."""

    def __init__(self, config: KafkaConfig, store: SecurityStore) -> None:
        self.config = config
        self.store = store
        self._mechanisms: dict[str, list[str]] = {}

    def mechanisms(self, listener: str) -> list[str]:
        if listener not in self._mechanisms:
            self._mechanisms[listener] = enabled_mechanisms(self.config, listener)
        return self._mechanisms[listener]

    def reauth_ms(self, listener: str, mechanism: str) -> int:
        """connections.max.reauth.ms for a listener's mechanism: its
        ``listener.name.<l>.<mechanism>.`` override, its listener's, else the broker's."""
        own = self.config.listener_overrides.get(listener.lower(), {})
        value = own.get(f"{mechanism.lower()}.connections.max.reauth.ms")
        if value is None:
            value = self.config.for_listener(listener, "connections.max.reauth.ms")
        return max(int(value or 0), 0)

    async def step(self, session: ConnectionSession, listener: str, token: bytes) -> bytes:
        """Feed one token; the answer. Sets the session's principal when it is done."""
        mechanism = session.mechanism
        previous = session.reauth_from
        if previous is not None and previous[0] != mechanism:
            raise SaslAuthenticationError(
                f"SASL mechanism '{mechanism}' requested by client is not supported for "
                f"re-authentication of mechanism '{previous[0]}'"
            )
        if mechanism == "PLAIN":
            session.principal = KafkaPrincipal("User", self._plain(listener, token))
            answer = b""
        elif mechanism in SCRAM_MECHANISMS:
            answer = await self._scram(session, mechanism, token)
            if session.exchange is not None:
                return answer  # the server-first message: the exchange goes on
        else:
            raise SaslAuthenticationError(f"Unexpected SASL mechanism {mechanism}")
        if previous is not None and previous[1] != session.principal:
            was, now = previous[1], session.principal
            raise SaslAuthenticationError(
                "Cannot change principals during re-authentication from "
                f"{was.type}.{was.name}: {now.type}.{now.name}"
            )
        session.reauth_from = None
        session.authenticated = True
        session.lifetime_ms = self.reauth_ms(listener, mechanism)
        session.expires_at = (
            time.monotonic() + session.lifetime_ms / 1000 if session.lifetime_ms else None
        )
        return answer

    def begin_reauthentication(self, session: ConnectionSession) -> bool:
        """A SaslHandshake on an authenticated connection: whether it starts re-authentication
        (only when sessions expire, and at most once a second, as Kafka)."""
        now = time.monotonic()
        if session.expires_at is None or now - session.reauth_started < 1.0:
            return False
        assert session.mechanism is not None
        session.reauth_started = now
        session.reauth_from = (session.mechanism, session.principal)
        session.authenticated = False
        session.mechanism = None
        # The old session's end no longer applies: the exchange under way may finish after it
        # (as Kafka, whose new authenticator has no expiry until it succeeds).
        session.expires_at = None
        return True

    def _plain(self, listener: str, token: bytes) -> str:
        parts = token.split(b"\0")
        if len(parts) != 3:
            raise SaslAuthenticationError("Invalid SASL/PLAIN response: expected 3 tokens")
        authzid, user, password = (p.decode(errors="replace") for p in parts)
        if not user:
            raise SaslAuthenticationError("Authentication failed: username not specified")
        if authzid and authzid != user:
            raise SaslAuthenticationError(
                "Authentication failed: Client requested an authorization id that is different"
                " from username"
            )
        expected = plain_users(self.config, listener).get(user)
        if expected is None or not hmac.compare_digest(expected.encode(), password.encode()):
            raise SaslAuthenticationError("Authentication failed: Invalid username or password")
        return user

    async def _scram(self, session: ConnectionSession, mechanism: str, token: bytes) -> bytes:
        failed = (
            "Authentication failed during authentication due to invalid credentials with SASL"
            f" mechanism {mechanism}"
        )
        try:
            if session.exchange is None:
                first = parse_client_first(token)
                cred = (await self.store.credentials(first.username)).get(mechanism)
                if cred is None:
                    raise SaslAuthenticationError(failed)
                server = ScramServer(mechanism)
                session.exchange = server
                session.extra["user"] = first.username
                return server.first(first, cred)
            answer = session.exchange.final(token)
        except ScramError as exc:
            raise SaslAuthenticationError(
                f"{failed}: {exc}" if "proof" not in str(exc) else failed
            ) from None
        session.exchange = None
        session.principal = KafkaPrincipal("User", session.extra.pop("user"))
        return answer
