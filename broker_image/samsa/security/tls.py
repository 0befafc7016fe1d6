"""TLS contexts from Kafka's ssl.* settings, PEM key and trust stores only (KIP-651):

    ssl.keystore.type=PEM
    ssl.keystore.location=/etc/samsa/broker.pem      # private key + certificate chain
    ssl.truststore.type=PEM
    ssl.truststore.location=/etc/samsa/ca.pem
    ssl.client.auth=required                         # none | requested | required

or the PEM text inline (ssl.keystore.key + ssl.keystore.certificate.chain,
ssl.truststore.certificates). Each setting may be given per listener as
``listener.name.<listener>.ssl.*``.
"""

from __future__ import annotations

import os
import ssl
import tempfile
from typing import Any

from samsa.config import ConfigError, KafkaConfig

_VERIFY = {
    "none": ssl.CERT_NONE,
    "requested": ssl.CERT_OPTIONAL,
    "required": ssl.CERT_REQUIRED,
}
_VERSIONS = {
    "TLSv1.2": ssl.TLSVersion.TLSv1_2,
    "TLSv1.3": ssl.TLSVersion.TLSv1_3,
}


def _setting(config: KafkaConfig, listener: str | None, name: str) -> Any:
    return config.for_listener(listener, name) if listener else config[name]


def _key(listener: str | None, name: str) -> str:
    return f"listener.name.{listener.lower()}.{name}" if listener else name


def _load_keystore(ctx: ssl.SSLContext, config: KafkaConfig, listener: str | None) -> bool:
    """Load the key and its chain; False when none is configured."""
    location = _setting(config, listener, "ssl.keystore.location")
    chain = _setting(config, listener, "ssl.keystore.certificate.chain")
    key = _setting(config, listener, "ssl.keystore.key")
    password = _setting(config, listener, "ssl.key.password") or _setting(
        config, listener, "ssl.keystore.password"
    )
    try:
        if location:
            ctx.load_cert_chain(location, password=password)
            return True
        if chain and key:
            # The ssl module loads keys from files only: a private temporary file, removed at once.
            with tempfile.NamedTemporaryFile("w", suffix=".pem", delete=False) as f:
                os.chmod(f.name, 0o600)
                f.write(f"{key.strip()}\n{chain.strip()}\n")
            try:
                ctx.load_cert_chain(f.name, password=password)
            finally:
                os.unlink(f.name)
            return True
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(_key(listener, "ssl.keystore.location"), f"cannot load: {exc}") from None
    return False


def _load_truststore(
    ctx: ssl.SSLContext, config: KafkaConfig, listener: str | None, purpose: ssl.Purpose
) -> None:
    location = _setting(config, listener, "ssl.truststore.location")
    inline = _setting(config, listener, "ssl.truststore.certificates")
    try:
        if location:
            ctx.load_verify_locations(cafile=location)
        elif inline:
            ctx.load_verify_locations(cadata=inline)
        else:
            ctx.load_default_certs(purpose)
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(
            _key(listener, "ssl.truststore.location"), f"cannot load: {exc}"
        ) from None


def _versions(ctx: ssl.SSLContext, config: KafkaConfig, listener: str | None) -> None:
    enabled = _setting(config, listener, "ssl.enabled.protocols") or ["TLSv1.2", "TLSv1.3"]
    known = [_VERSIONS[v] for v in enabled if v in _VERSIONS]
    if not known:
        raise ConfigError(
            _key(listener, "ssl.enabled.protocols"), "none of TLSv1.2, TLSv1.3 is enabled"
        )
    ctx.minimum_version = min(known)
    ctx.maximum_version = max(known)
    ciphers = _setting(config, listener, "ssl.cipher.suites")
    if ciphers:
        try:
            ctx.set_ciphers(":".join(ciphers))
        except ssl.SSLError as exc:
            raise ConfigError(_key(listener, "ssl.cipher.suites"), str(exc)) from None


def server_context(config: KafkaConfig, listener: str) -> ssl.SSLContext:
    """The context a TLS listener (SSL or SASL_SSL) serves with."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    _versions(ctx, config, listener)
    if not _load_keystore(ctx, config, listener):
        raise ConfigError(
            _key(listener, "ssl.keystore.location"),
            f"listener {listener} uses TLS but has no key store (a PEM file with the key and"
            " its certificate chain)",
        )
    ctx.verify_mode = _VERIFY[_setting(config, listener, "ssl.client.auth")]
    if ctx.verify_mode != ssl.CERT_NONE:
        _load_truststore(ctx, config, listener, ssl.Purpose.CLIENT_AUTH)
    return ctx


def client_context(config: KafkaConfig, listener: str | None = None) -> ssl.SSLContext:
    """The context this broker connects to other brokers' TLS listeners with: their
    certificates checked against the trust store, and our own key offered for mutual TLS."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    _versions(ctx, config, listener)
    ctx.check_hostname = (
        _setting(config, listener, "ssl.endpoint.identification.algorithm") or ""
    ).lower() == "https"
    ctx.verify_mode = ssl.CERT_REQUIRED
    _load_truststore(ctx, config, listener, ssl.Purpose.SERVER_AUTH)
    _load_keystore(ctx, config, listener)
    return ctx
