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
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def for_protocol(
        cls, protocol: str, principal: KafkaPrincipal = ANONYMOUS
    ) -> ConnectionSession:
        return cls(protocol, principal, authenticated=protocol not in SASL_PROTOCOLS)

    @property
    def sasl(self) -> bool:
        return self.protocol in SASL_PROTOCOLS
