"""Security settings with Kafka's property names: TLS key and trust stores, client
authentication, SASL mechanisms and the authorizer.

A listener may override any of them as ``listener.name.<listener>.<property>`` (the listener's
name in lower case, as Kafka writes it); SASL's JAAS settings are per mechanism too:
``listener.name.<listener>.<mechanism>.sasl.jaas.config``.
"""

from __future__ import annotations

from samsa.config.defs import ConfigKey

LISTENER_PREFIX = "listener.name."

SECURITY_KEYS = [
    ConfigKey("security.inter.broker.protocol", "string", None, nullable=True),
    ConfigKey("ssl.keystore.type", "string", "PEM", choices=("PEM",)),
    ConfigKey(
        "ssl.keystore.location",
        "string",
        None,
        nullable=True,
        doc="a PEM file holding the private key and its certificate chain (KIP-651)",
    ),
    ConfigKey("ssl.keystore.password", "password", None, nullable=True, sensitive=True),
    ConfigKey("ssl.key.password", "password", None, nullable=True, sensitive=True),
    ConfigKey("ssl.keystore.certificate.chain", "password", None, nullable=True, sensitive=True),
    ConfigKey("ssl.keystore.key", "password", None, nullable=True, sensitive=True),
    ConfigKey("ssl.truststore.type", "string", "PEM", choices=("PEM",)),
    ConfigKey("ssl.truststore.location", "string", None, nullable=True),
    ConfigKey("ssl.truststore.password", "password", None, nullable=True, sensitive=True),
    ConfigKey("ssl.truststore.certificates", "password", None, nullable=True, sensitive=True),
    ConfigKey("ssl.client.auth", "string", "none", choices=("none", "requested", "required")),
    ConfigKey("ssl.enabled.protocols", "list", ["TLSv1.2", "TLSv1.3"]),
    ConfigKey("ssl.protocol", "string", "TLSv1.3"),
    ConfigKey("ssl.cipher.suites", "list", []),
    ConfigKey("ssl.endpoint.identification.algorithm", "string", "https"),
    ConfigKey("ssl.principal.mapping.rules", "string", "DEFAULT", choices=("DEFAULT",)),
    ConfigKey("sasl.enabled.mechanisms", "list", ["GSSAPI"]),
    ConfigKey("sasl.mechanism.inter.broker.protocol", "string", "GSSAPI"),
    ConfigKey("sasl.jaas.config", "password", None, nullable=True, sensitive=True),
    ConfigKey("connections.max.reauth.ms", "long", 0, minimum=0),
    ConfigKey("authorizer.class.name", "string", ""),
    ConfigKey("super.users", "string", None, nullable=True),
    ConfigKey("allow.everyone.if.no.acl.found", "boolean", False),
]

# Keys a listener may override by prefix.
LISTENER_OVERRIDABLE = frozenset(
    k.name for k in SECURITY_KEYS if k.name.startswith(("ssl.", "sasl.", "connections."))
)


def split_listener_key(name: str) -> tuple[str, str] | None:
    """``listener.name.<l>.<key>`` -> (l, key), or None for an unprefixed name."""
    if not name.startswith(LISTENER_PREFIX):
        return None
    listener, sep, key = name[len(LISTENER_PREFIX) :].partition(".")
    if not sep or not listener or not key:
        return None
    return listener, key


def is_listener_key(key: str) -> bool:
    """Whether a (listener-stripped) key may be given per listener: a TLS or SASL setting, or
    one mechanism's JAAS config (``scram-sha-512.sasl.jaas.config``)."""
    if key in LISTENER_OVERRIDABLE:
        return True
    mechanism, sep, rest = key.partition(".")
    return bool(sep) and rest == "sasl.jaas.config" and bool(mechanism)
