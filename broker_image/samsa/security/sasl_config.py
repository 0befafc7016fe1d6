"""SASL settings: the mechanisms a listener enables, and JAAS configs read as Kafka's login
modules read them.

    listener.name.sasl_ssl.plain.sasl.jaas.config=\
        org.apache.kafka.common.security.plain.PlainLoginModule required \
        username="admin" password="admin-secret" user_admin="admin-secret" user_alice="alice-pw";
    listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config=\
        org.apache.kafka.common.security.scram.ScramLoginModule required \
        username="admin" password="admin-secret";

``username``/``password`` are what this broker logs in with to other brokers; PLAIN's
``user_<name>="<password>"`` options are the users it accepts. SCRAM users live in the
credential store (ZooKeeper's /config/users, or the standalone broker's disk).
"""

from __future__ import annotations

import re

from samsa.config import ConfigError, KafkaConfig
from samsa.protocol.scram import MECHANISMS as SCRAM_MECHANISMS

SUPPORTED_MECHANISMS = ("PLAIN", *SCRAM_MECHANISMS)
_OPTION = re.compile(r'\s*([A-Za-z0-9_.\-]+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s;"]+))')


def parse_jaas(text: str) -> tuple[str, dict[str, str]]:
    """``<LoginModule> required k="v" ...;`` -> (login module, options)."""
    text = text.strip()
    parts = text.split(None, 2)
    if len(parts) < 2 or parts[1] not in ("required", "requisite", "sufficient", "optional"):
        raise ValueError("expected '<LoginModule class> required key=\"value\" ...;'")
    rest = parts[2] if len(parts) > 2 else ""
    rest = rest.rstrip().removesuffix(";")
    options: dict[str, str] = {}
    pos = 0
    while pos < len(rest):
        if rest[pos:].strip() == "":
            break
        m = _OPTION.match(rest, pos)
        if m is None:
            raise ValueError(f"cannot read the options from {rest[pos : pos + 30]!r}")
        value = m.group(2) if m.group(2) is not None else m.group(3)
        options[m.group(1)] = re.sub(r"\\(.)", r"\1", value)
        pos = m.end()
    return parts[0], options


def jaas_options(config: KafkaConfig, listener: str, mechanism: str) -> dict[str, str]:
    """A mechanism's JAAS options on a listener: ``listener.name.<l>.<mech>.sasl.jaas.config``,
    else the broker-wide ``sasl.jaas.config``."""
    key = f"{mechanism.lower()}.sasl.jaas.config"
    text = (
        config.listener_overrides.get(listener.lower(), {}).get(key) or config["sasl.jaas.config"]
    )
    if not text:
        return {}
    try:
        return parse_jaas(text)[1]
    except ValueError as exc:
        raise ConfigError(f"listener.name.{listener.lower()}.{key}", str(exc)) from None


def enabled_mechanisms(config: KafkaConfig, listener: str) -> list[str]:
    enabled = [m.upper() for m in config.for_listener(listener, "sasl.enabled.mechanisms")]
    unknown = [m for m in enabled if m not in SUPPORTED_MECHANISMS]
    if unknown:
        raise ConfigError(
            f"listener.name.{listener.lower()}.sasl.enabled.mechanisms",
            f"{', '.join(unknown)} not supported (only {', '.join(SUPPORTED_MECHANISMS)})",
        )
    return enabled


def plain_users(config: KafkaConfig, listener: str) -> dict[str, str]:
    options = jaas_options(config, listener, "PLAIN")
    return {k[len("user_") :]: v for k, v in options.items() if k.startswith("user_")}


def inter_broker_credentials(config: KafkaConfig, listener: str) -> tuple[str, str, str]:
    mechanism = config["sasl.mechanism.inter.broker.protocol"].upper()
    if mechanism not in SUPPORTED_MECHANISMS:
        raise ConfigError(
            "sasl.mechanism.inter.broker.protocol",
            f"{mechanism} not supported (only {', '.join(SUPPORTED_MECHANISMS)})",
        )
    options = jaas_options(config, listener, mechanism)
    if "username" not in options or "password" not in options:
        raise ConfigError(
            f"listener.name.{listener.lower()}.{mechanism.lower()}.sasl.jaas.config",
            "the inter-broker mechanism needs username and password",
        )
    return mechanism, options["username"], options["password"]
