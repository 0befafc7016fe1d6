"""Session re-authentication (KIP-368) as Kafka serves it: with connections.max.reauth.ms set
(here on one listener through its listener.name prefix), SaslAuthenticate tells the client its
session's lifetime; the client re-authenticates on the same connection, as the same principal
with the same mechanism, or is refused and disconnected; a session left to expire is closed at
its next request. Without it (the default, 0), sessions never expire, the lifetime is 0, and a
second SaslHandshake is answered ILLEGAL_SASL_STATE on a connection that stays open."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from security_support import Client

from samsa.client.connection import BrokerConnection, ClientSecurity
from samsa.protocol.messages import build, request_type
from samsa.testing import InProcessBroker, free_port

pytestmark = pytest.mark.timeout(120)
LIFETIME_MS = 1500
JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'user_alice="alice-pw" user_bob="bob-pw";'
)
SASL_AUTHENTICATION_FAILED, ILLEGAL_SASL_STATE = 58, 34
METADATA = {"topics": [], "allow_auto_topic_creation": False}


class Env:
    def __init__(self, root: Path) -> None:
        self.ports = {"REAUTH": free_port(), "PLAIN": free_port()}
        self.broker = InProcessBroker(
            root,
            {
                "listeners": ",".join(f"{n}://127.0.0.1:{p}" for n, p in self.ports.items()),
                "listener.security.protocol.map": "REAUTH:SASL_PLAINTEXT,PLAIN:SASL_PLAINTEXT",
                "inter.broker.listener.name": "PLAIN",
                "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512",
                "sasl.jaas.config": JAAS,
                "listener.name.reauth.connections.max.reauth.ms": str(LIFETIME_MS),
            },
            port=self.ports["PLAIN"],
        )

    def client(self, listener: str, user: str = "alice") -> Client:
        return Client(self.ports[listener], "PLAIN", user, f"{user}-pw")


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    env = Env(tmp_path_factory.mktemp("reauth"))
    with env.broker:
        yield env


def _authenticate(client: Client, user: str, mechanism: str = "PLAIN") -> Any:
    assert client.call(17, 1, {"mechanism": mechanism}).error_code == 0
    return client.call(36, 2, {"auth_bytes": f"\0{user}\0{user}-pw".encode()})


def _closed(client: Client) -> bool:
    try:
        client.sock.settimeout(10)
        return client.sock.recv(1) == b""
    except ConnectionError:
        return True


def _lifetime_ms(answer: Any) -> int:
    return int(answer.session_lifetime.total_seconds() * 1000)


def test_the_session_lifetime_is_the_listeners_setting(env: Env) -> None:
    with Client(env.ports["REAUTH"], "PLAIN", "alice", "alice-pw") as client:
        # The constructor authenticated; the handshake begins re-authentication at once.
        assert _lifetime_ms(_authenticate(client, "alice")) == LIFETIME_MS
    with Client(env.ports["PLAIN"], "PLAIN", "alice", "alice-pw") as client:
        answer = client.call(17, 1, {"mechanism": "PLAIN"})
        assert answer.error_code == ILLEGAL_SASL_STATE


def test_reauthenticating_as_the_same_principal_keeps_the_connection(env: Env) -> None:
    with env.client("REAUTH") as client:
        again = _authenticate(client, "alice")
        assert (again.error_code, _lifetime_ms(again)) == (0, LIFETIME_MS)
        assert client.call(3, 12, METADATA | {"include_topic_authorized_operations": False})


def test_reauthenticating_as_another_principal_is_refused_and_disconnected(env: Env) -> None:
    with env.client("REAUTH") as client:
        refused = _authenticate(client, "bob")
        assert refused.error_code == SASL_AUTHENTICATION_FAILED
        assert "Cannot change principals during re-authentication" in refused.error_message
        assert _closed(client)


def test_reauthenticating_with_another_mechanism_is_refused_and_disconnected(env: Env) -> None:
    with env.client("REAUTH") as client:
        assert client.call(17, 1, {"mechanism": "SCRAM-SHA-512"}).error_code == 0
        refused = client.call(36, 2, {"auth_bytes": b"n,,n=alice,r=abcdefgh"})
        assert refused.error_code == SASL_AUTHENTICATION_FAILED
        assert "not supported for re-authentication" in refused.error_message
        assert _closed(client)


def test_an_expired_session_is_closed_at_its_next_request(
    env: Env, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="samsa.handlers.apis")
    body = METADATA | {"include_topic_authorized_operations": False}
    with env.client("REAUTH") as client:
        deadline = time.monotonic() + 10 * LIFETIME_MS / 1000
        while True:
            assert time.monotonic() < deadline, "the session outlived 10 lifetimes"
            try:
                client.call(3, 12, body)
            except (AssertionError, ConnectionError):
                break  # closed by the broker
            time.sleep(0.1)  # a request every 100 ms until the lifetime runs out
    assert [r for r in caplog.records if "SASL session expired" in r.getMessage()]


def test_a_session_past_its_end_may_still_reauthenticate(env: Env) -> None:
    """As Kafka: a SaslHandshake begins re-authentication even after the session ended; the
    exchange then runs without the old end (SCRAM's two rounds may take a while)."""
    with env.client("REAUTH") as client:
        ended = time.monotonic() + LIFETIME_MS / 1000
        while time.monotonic() <= ended:
            time.sleep(0.05)  # idle until the session is over: that is the case under test
        again = _authenticate(client, "alice")
        assert (again.error_code, _lifetime_ms(again)) == (0, LIFETIME_MS)
        assert client.call(3, 12, METADATA | {"include_topic_authorized_operations": False})


def test_without_reauthentication_a_second_handshake_keeps_the_connection(env: Env) -> None:
    with env.client("PLAIN") as client:
        assert client.call(17, 1, {"mechanism": "PLAIN"}).error_code == ILLEGAL_SASL_STATE
        assert client.call(3, 12, METADATA | {"include_topic_authorized_operations": False})


def test_librdkafka_reauthenticates_and_keeps_producing(
    env: Env, caplog: pytest.LogCaptureFixture
) -> None:
    conf: dict[str, Any] = {
        "bootstrap.servers": f"127.0.0.1:{env.ports['REAUTH']}",
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN",
        "sasl.username": "alice",
        "sasl.password": "alice-pw",
    }
    admin = AdminClient(conf)
    admin.create_topics([NewTopic("reauth", 1, 1)])["reauth"].result(30)
    caplog.set_level(logging.INFO, logger="samsa.handlers.apis")
    errors: list[Any] = []
    producer = Producer(conf | {"error_cb": errors.append})
    reports: list[Any] = []
    # Records across four session lifetimes: each delivered, no connection error on the way.
    deadline = time.monotonic() + 4 * LIFETIME_MS / 1000
    sent = 0
    while time.monotonic() < deadline:
        producer.produce("reauth", f"r{sent}".encode(), on_delivery=lambda e, m: reports.append(e))
        sent += 1
        producer.poll(0.2)
    assert producer.flush(30) == 0
    assert reports == [None] * sent
    assert errors == []
    # It re-authenticated in time: the broker never had to close an expired session.
    assert not [r for r in caplog.records if "SASL session expired" in r.getMessage()]


async def test_samsas_own_client_reauthenticates_on_the_same_connection(
    env: Env, caplog: pytest.LogCaptureFixture
) -> None:
    """Brokers talk to each other with samsa.client: its connections re-authenticate too, so a
    lifetime set on the inter-broker listener does not cut replication's connections."""
    caplog.set_level(logging.INFO, logger="samsa.handlers.apis")
    security = ClientSecurity(sasl_mechanism="PLAIN", username="alice", password="alice-pw")
    conn = await BrokerConnection("127.0.0.1", env.ports["REAUTH"], security=security).connect()
    body = build(request_type(3, 12), METADATA | {"include_topic_authorized_operations": False})
    try:
        assert conn.session_lifetime_ms == LIFETIME_MS
        deadline = time.monotonic() + 4 * LIFETIME_MS / 1000
        answered = 0
        while time.monotonic() < deadline:
            await conn.request(3, 12, body)
            answered += 1
            await asyncio.sleep(0.05)  # a request every 50 ms across four lifetimes
        assert not conn.closed and answered > 0
    finally:
        await conn.aclose()
    assert not [r for r in caplog.records if "SASL session expired" in r.getMessage()]
