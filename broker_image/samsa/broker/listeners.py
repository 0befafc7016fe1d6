"""Listeners: Kafka's listeners, advertised.listeners, listener.security.protocol.map and
inter.broker.listener.name, read into one plan of sockets to open and addresses to advertise.

    listeners=INTERNAL://0.0.0.0:9092,EXTERNAL://0.0.0.0:9094
    advertised.listeners=INTERNAL://broker-0.brokers:9092,EXTERNAL://203.0.113.7:31000
    listener.security.protocol.map=INTERNAL:PLAINTEXT,EXTERNAL:PLAINTEXT
    inter.broker.listener.name=INTERNAL

Clients are told the addresses of the listener they connected to; brokers talk to each other
on the inter-broker listener (security.inter.broker.protocol names it by its protocol
instead, as in Kafka). Each listener's security protocol is PLAINTEXT, SSL, SASL_PLAINTEXT or
SASL_SSL; the TLS and SASL settings themselves are read by samsa.security.
"""

from __future__ import annotations

from dataclasses import dataclass

from samsa.broker.properties import parse_listener
from samsa.config import ConfigError, KafkaConfig
from samsa.metadata import Endpoint

SUPPORTED_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
# A listener named after a protocol uses it unless the map says otherwise (Kafka's default map).
KAFKA_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")


@dataclass(frozen=True)
class ListenerPlan:
    """What to bind, what to advertise, and which listener brokers use among themselves."""

    bind: tuple[Endpoint, ...]
    advertised: tuple[Endpoint, ...]
    inter_broker: str
    # listener name -> security protocol
    protocols: tuple[tuple[str, str], ...] = ()

    def protocol(self, name: str) -> str:
        return dict(self.protocols).get(name, "PLAINTEXT")

    def advertised_for(self, name: str, bound_port: int) -> Endpoint:
        """A listener's advertised endpoint; its port is the bound one when it was 0."""
        for e in self.advertised:
            if e.listener == name:
                return e if e.port else Endpoint(name, e.host, bound_port)
        raise KeyError(name)


def _endpoints(text: str, key: str) -> list[Endpoint]:
    out: list[Endpoint] = []
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        try:
            name, host, port = parse_listener(item)
        except ValueError as exc:
            raise ConfigError(key, str(exc)) from None
        if any(e.listener == name for e in out):
            raise ConfigError(key, f"listener {name} is given twice")
        out.append(Endpoint(name, host, port))
    if not out:
        raise ConfigError(key, "no listener given")
    return out


def listener_plan(config: KafkaConfig) -> ListenerPlan:
    bind = _endpoints(config["listeners"], "listeners")
    names = [e.listener for e in bind]
    protocol_map = config["listener.security.protocol.map"]
    protocols: dict[str, str] = {}
    if protocol_map:
        for item in protocol_map.split(","):
            name, sep, protocol = item.strip().partition(":")
            if not sep:
                raise ConfigError(
                    "listener.security.protocol.map", f"{item!r} is not NAME:PROTOCOL"
                )
            protocols[name.strip()] = protocol.strip().upper()
    resolved: dict[str, str] = {}
    for name in names:
        protocol = protocols.get(name, name if name in KAFKA_PROTOCOLS else "")
        resolved[name] = protocol
        if not protocol:
            raise ConfigError(
                "listener.security.protocol.map",
                f"listener {name} has no security protocol (map it, e.g. {name}:PLAINTEXT)",
            )
        if protocol not in SUPPORTED_PROTOCOLS:
            raise ConfigError(
                "listener.security.protocol.map",
                f"listener {name} uses {protocol}, not one of {', '.join(SUPPORTED_PROTOCOLS)}",
            )
    ports = [e.port for e in bind if e.port]
    if len(ports) != len(set(ports)):
        raise ConfigError("listeners", "two listeners bind the same port")
    advertised_text = config["advertised.listeners"]
    given = (
        {e.listener: e for e in _endpoints(advertised_text, "advertised.listeners")}
        if (advertised_text)
        else {}
    )
    unknown = set(given) - set(names)
    if unknown:
        raise ConfigError(
            "advertised.listeners", f"{', '.join(sorted(unknown))} not among the listeners"
        )
    advertised = []
    for e in bind:
        a = given.get(e.listener, e)
        host = "127.0.0.1" if a.host in ("0.0.0.0", "::", "") else a.host
        advertised.append(Endpoint(e.listener, host, a.port))
    inter = config["inter.broker.listener.name"]
    by_protocol = config["security.inter.broker.protocol"]
    if inter and by_protocol:
        raise ConfigError(
            "security.inter.broker.protocol",
            "give only one of inter.broker.listener.name and security.inter.broker.protocol",
        )
    if by_protocol:
        inter = next((n for n in names if resolved[n] == by_protocol.upper()), "")
        if not inter:
            raise ConfigError("security.inter.broker.protocol", f"no listener uses {by_protocol}")
    inter = inter or names[0]
    if inter not in names:
        raise ConfigError("inter.broker.listener.name", f"{inter} is not among the listeners")
    return ListenerPlan(tuple(bind), tuple(advertised), inter, tuple(resolved.items()))
