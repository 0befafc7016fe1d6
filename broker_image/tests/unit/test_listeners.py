"""Listener settings into sockets and advertised addresses, and their refusals."""

from __future__ import annotations

import pytest

from samsa.broker.listeners import listener_plan
from samsa.config import ConfigError, KafkaConfig
from samsa.metadata import BrokerInfo, Endpoint


def plan(**props: str):  # type: ignore[no-untyped-def]
    return listener_plan(KafkaConfig({k.replace("_", "."): v for k, v in props.items()}))


def test_one_plaintext_listener_is_its_own_advertised_address() -> None:
    p = plan(listeners="PLAINTEXT://0.0.0.0:9092")
    assert p.bind == (Endpoint("PLAINTEXT", "0.0.0.0", 9092),)
    assert p.advertised == (Endpoint("PLAINTEXT", "127.0.0.1", 9092),)
    assert p.inter_broker == "PLAINTEXT"


def test_internal_and_external_listeners_as_the_operator_writes_them() -> None:
    p = plan(
        listeners="INTERNAL://0.0.0.0:9092,EXTERNAL://0.0.0.0:9094",
        advertised_listeners="INTERNAL://b-0.brokers:9092,EXTERNAL://203.0.113.7:31000",
        listener_security_protocol_map="INTERNAL:PLAINTEXT,EXTERNAL:PLAINTEXT",
        inter_broker_listener_name="INTERNAL",
    )
    assert p.inter_broker == "INTERNAL"
    assert p.advertised_for("EXTERNAL", 9094) == Endpoint("EXTERNAL", "203.0.113.7", 31000)
    assert p.advertised_for("INTERNAL", 9092) == Endpoint("INTERNAL", "b-0.brokers", 9092)


def test_each_listener_has_its_security_protocol() -> None:
    p = plan(
        listeners="INTERNAL://0.0.0.0:9091,SSL://0.0.0.0:9093,SASL_SSL://0.0.0.0:9094",
        listener_security_protocol_map="INTERNAL:SASL_PLAINTEXT,SSL:SSL,SASL_SSL:SASL_SSL",
        security_inter_broker_protocol="SASL_PLAINTEXT",
    )
    assert [p.protocol(e.listener) for e in p.bind] == ["SASL_PLAINTEXT", "SSL", "SASL_SSL"]
    assert p.inter_broker == "INTERNAL"


def test_port_zero_advertises_the_bound_port() -> None:
    p = plan(listeners="PLAINTEXT://127.0.0.1:0")
    assert p.advertised_for("PLAINTEXT", 45678) == Endpoint("PLAINTEXT", "127.0.0.1", 45678)


@pytest.mark.parametrize(
    ("props", "key", "words"),
    [
        (
            {
                "listeners": "A://0.0.0.0:1,B://0.0.0.0:2",
                "listener.security.protocol.map": "A:PLAINTEXT,B:KERBEROS",
            },
            "listener.security.protocol.map",
            "KERBEROS",
        ),
        (
            {"listeners": "PLAINTEXT://0.0.0.0:1", "security.inter.broker.protocol": "SSL"},
            "security.inter.broker.protocol",
            "no listener uses SSL",
        ),
        (
            {
                "listeners": "SSL://0.0.0.0:1",
                "security.inter.broker.protocol": "SSL",
                "inter.broker.listener.name": "SSL",
            },
            "security.inter.broker.protocol",
            "only one",
        ),
        ({"listeners": "INTERNAL://0.0.0.0:9092"}, "listener.security.protocol.map", "INTERNAL"),
        (
            {"listeners": "PLAINTEXT://0.0.0.0:9092", "advertised.listeners": "OTHER://h:1"},
            "advertised.listeners",
            "OTHER",
        ),
        (
            {
                "listeners": "A://0.0.0.0:9092,B://0.0.0.0:9092",
                "listener.security.protocol.map": "A:PLAINTEXT,B:PLAINTEXT",
            },
            "listeners",
            "same port",
        ),
        (
            {"listeners": "PLAINTEXT://0.0.0.0:9092", "inter.broker.listener.name": "X"},
            "inter.broker.listener.name",
            "X",
        ),
        ({"listeners": "PLAINTEXT://0.0.0.0:9092,PLAINTEXT://0.0.0.0:9093"}, "listeners", "twice"),
    ],
)
def test_bad_listener_settings_name_the_key(props: dict[str, str], key: str, words: str) -> None:
    with pytest.raises(ConfigError) as info:
        listener_plan(KafkaConfig(props))
    assert key in str(info.value)
    assert words in str(info.value)


def test_a_broker_seen_through_a_listener_it_lacks_is_absent() -> None:
    b = BrokerInfo(1, "in", 1, None, (Endpoint("INTERNAL", "in", 1), Endpoint("EXTERNAL", "ex", 2)))
    assert b.for_listener("EXTERNAL") == BrokerInfo(1, "ex", 2, None, b.endpoints)
    assert b.for_listener("OTHER") is None


def test_a_registration_keeps_every_listener_and_picks_the_inter_broker_one() -> None:
    from samsa.metadata.zk_data import broker_json, parse_broker

    endpoints = (Endpoint("INTERNAL", "b-0.brokers", 9092), Endpoint("EXTERNAL", "1.2.3.4", 31000))
    info = BrokerInfo(0, "b-0.brokers", 9092, "zone-a", endpoints)
    back = parse_broker(0, broker_json(info), "INTERNAL")
    assert back == info
    assert parse_broker(0, broker_json(info), "EXTERNAL").host == "1.2.3.4"
