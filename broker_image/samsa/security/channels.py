"""What each listener's security protocol asks of a connection, on both ends: the TLS context a
listener serves with, and how this broker reaches the others' inter-broker listener."""

from __future__ import annotations

import ssl

from samsa.client import ClientSecurity
from samsa.config import KafkaConfig
from samsa.security.tls import client_context, server_context

TLS_PROTOCOLS = ("SSL", "SASL_SSL")
SASL_PROTOCOLS = ("SASL_PLAINTEXT", "SASL_SSL")


def listener_ssl_context(
    config: KafkaConfig, listener: str, protocol: str
) -> ssl.SSLContext | None:
    return server_context(config, listener) if protocol in TLS_PROTOCOLS else None


def inter_broker_security(
    config: KafkaConfig, listener: str, protocol: str
) -> ClientSecurity | None:
    """The inter-broker client's TLS (this broker's key store for mutual TLS, its trust store to
    check the others) and SASL credentials, for the inter-broker listener's protocol."""
    if protocol == "PLAINTEXT":
        return None
    tls = client_context(config, listener) if protocol in TLS_PROTOCOLS else None
    if protocol in SASL_PROTOCOLS:
        from samsa.security.sasl_config import inter_broker_credentials

        mechanism, username, password = inter_broker_credentials(config, listener)
        return ClientSecurity(tls, mechanism, username, password)
    return ClientSecurity(tls)
