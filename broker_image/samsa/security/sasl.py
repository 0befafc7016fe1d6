"""The server side of SASL: a connection's tokens through PLAIN or SCRAM to a principal.

PLAIN checks the listener's JAAS ``user_<name>="<password>"`` options; SCRAM the stored
credentials. Failures raise SaslAuthenticationError with Kafka's messages (which name no
reason a guesser could use)."""

from __future__ import annotations

import hmac

from samsa.config import KafkaConfig
from samsa.protocol.scram import MECHANISMS as SCRAM_MECHANISMS
from samsa.protocol.scram import ScramError
from samsa.security.principal import KafkaPrincipal
from samsa.security.sasl_config import enabled_mechanisms, plain_users
from samsa.security.scram import ScramServer, parse_client_first
from samsa.security.session import ConnectionSession
from samsa.security.store import SecurityStore


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

    async def step(self, session: ConnectionSession, listener: str, token: bytes) -> bytes:
        """Feed one token; the answer. Sets the session's principal when it is done."""
        mechanism = session.mechanism
        if mechanism == "PLAIN":
            user = self._plain(listener, token)
            session.principal = KafkaPrincipal("User", user)
            session.authenticated = True
            return b""
        if mechanism in SCRAM_MECHANISMS:
            return await self._scram(session, mechanism, token)
        raise SaslAuthenticationError(f"Unexpected SASL mechanism {mechanism}")

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
        session.authenticated = True
        return answer
