"""ConnectionSession: what one connection has proved about itself: its security protocol, its
principal, and where it is in the SASL exchange. The network layer makes one per connection;
the SASL handlers move it along."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from samsa.security.principal import ANONYMOUS, KafkaPrincipal

SASL_PROTOCOLS = ("SASL_PLAINTEXT", "SASL_SSL")
# What a client may send before it has authenticated (Kafka's SaslServerAuthenticator).
API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE = 18, 17, 36
PRE_AUTHENTICATION_APIS = frozenset((API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE))


@dataclass
class ConnectionSession:
    protocol: str = "PLAINTEXT"
    principal: KafkaPrincipal = ANONYMOUS
    authenticated: bool = True
    # The mechanism chosen by SaslHandshake; None before it.
    mechanism: str | None = None
    # SaslHandshake v0: the SASL tokens follow as bare size-prefixed frames, not as requests.
    raw_tokens: bool = False
    # The mechanism's state between tokens (a ScramServer).
    exchange: Any = None
    # Answer this request, then close (a failed authentication, as Kafka does).
    close_after_response: bool = False
    # KIP-368: when the session ends (time.monotonic()); None: never (connections.max.reauth.ms
    # is 0). Past it, any request but a re-authenticating SaslHandshake closes the connection.
    expires_at: float | None = None
    # The lifetime the last SaslAuthenticate tells the client (session_lifetime_ms).
    lifetime_ms: int = 0
    # While re-authenticating: the mechanism and principal the session had; both must stay.
    reauth_from: tuple[str, KafkaPrincipal] | None = None
    # When the last re-authentication began (Kafka allows one a second).
    reauth_started: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def for_protocol(
        cls, protocol: str, principal: KafkaPrincipal = ANONYMOUS
    ) -> ConnectionSession:
        return cls(protocol, principal, authenticated=protocol not in SASL_PROTOCOLS)

    @property
    def sasl(self) -> bool:
        return self.protocol in SASL_PROTOCOLS

    def expired(self, now: float) -> bool:
        return self.expires_at is not None and now > self.expires_at
