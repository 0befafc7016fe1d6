"""SASL: SCRAM-SHA-512/256 and PLAIN over SASL_SSL and SASL_PLAINTEXT with the four clients;
credentials made with AlterUserScramCredentials and kept across a restart; wrong passwords,
unknown users and requests before authentication refused as Kafka refuses them."""

from __future__ import annotations

import asyncio
import shutil
import ssl
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)
from kafka_support import Wire
from kio.schema.metadata.v12.request import MetadataRequest
from kio.schema.sasl_authenticate.v2.request import SaslAuthenticateRequest
from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest
from security_support import Pki, confluent_round_trip, kafka_python_round_trip

from samsa.testing import InProcessBroker, free_port

pytestmark = pytest.mark.timeout(120)
KCAT = shutil.which("kcat")
PLAIN_JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'username="admin" password="admin-pw" user_admin="admin-pw" user_bob="bob-pw";'
)


class Env:
    def __init__(self, root: Path) -> None:
        self.pki = Pki(root / "pki")
        keystore = self.pki.issue("broker", "broker", server=True).keystore
        self.ports = {
            "PLAINTEXT": free_port(),
            "SASL_SSL": free_port(),
            "SASL_PLAINTEXT": free_port(),
        }
        config = {
            "listeners": ",".join(f"{n}://127.0.0.1:{p}" for n, p in self.ports.items()),
            "inter.broker.listener.name": "PLAINTEXT",
            "ssl.keystore.location": str(keystore),
            "sasl.enabled.mechanisms": "SCRAM-SHA-512,SCRAM-SHA-256,PLAIN",
            "listener.name.sasl_ssl.plain.sasl.jaas.config": PLAIN_JAAS,
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
        }
        self.broker = InProcessBroker(root / "data", config, port=self.ports["PLAINTEXT"])

    def address(self, listener: str) -> str:
        return f"127.0.0.1:{self.ports[listener]}"

    def admin(self) -> AdminClient:
        return AdminClient({"bootstrap.servers": self.address("PLAINTEXT")})

    def add_user(self, user: str, password: str, mechanism: ScramMechanism) -> None:
        up = UserScramCredentialUpsertion(
            user, ScramCredentialInfo(mechanism, 4096), password.encode()
        )
        admin = self.admin()
        for future in admin.alter_user_scram_credentials([up]).values():
            future.result(10)


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    env = Env(tmp_path_factory.mktemp("sasl"))
    with env.broker:
        env.add_user("alice", "alice-pw", ScramMechanism.SCRAM_SHA_512)
        env.add_user("carol", "carol-pw", ScramMechanism.SCRAM_SHA_256)
        yield env


def _confluent(env: Env, listener: str, mechanism: str, user: str, password: str) -> dict[str, str]:
    conf = {
        "bootstrap.servers": env.address(listener),
        "security.protocol": listener,
        "sasl.mechanism": mechanism,
        "sasl.username": user,
        "sasl.password": password,
    }
    if listener == "SASL_SSL":
        conf["ssl.ca.location"] = str(env.pki.ca)
    return conf


@pytest.mark.parametrize(
    ("listener", "mechanism", "user", "password"),
    [
        ("SASL_SSL", "SCRAM-SHA-512", "alice", "alice-pw"),
        ("SASL_SSL", "SCRAM-SHA-256", "carol", "carol-pw"),
        ("SASL_PLAINTEXT", "PLAIN", "bob", "bob-pw"),
    ],
)
def test_librdkafka_with_sasl(
    env: Env, listener: str, mechanism: str, user: str, password: str, topic: str
) -> None:
    got = confluent_round_trip(_confluent(env, listener, mechanism, user, password), topic, 5)
    assert got == [f"v{i}".encode() for i in range(5)]


def test_kafka_python_with_scram_sha_512_over_tls(env: Env, topic: str) -> None:
    sasl: dict[str, Any] = {
        "bootstrap_servers": env.address("SASL_SSL"),
        "security_protocol": "SASL_SSL",
        "ssl_cafile": str(env.pki.ca),
        "sasl_mechanism": "SCRAM-SHA-512",
        "sasl_plain_username": "alice",
        "sasl_plain_password": "alice-pw",
    }
    got = kafka_python_round_trip(sasl, topic, 3)
    assert got == [b"k0", b"k1", b"k2"]


async def test_aiokafka_with_scram_sha_512_over_tls(env: Env, topic: str) -> None:
    common: dict[str, Any] = {
        "bootstrap_servers": env.address("SASL_SSL"),
        "security_protocol": "SASL_SSL",
        "ssl_context": ssl.create_default_context(cafile=str(env.pki.ca)),
        "sasl_mechanism": "SCRAM-SHA-512",
        "sasl_plain_username": "alice",
        "sasl_plain_password": "alice-pw",
    }
    producer = AIOKafkaProducer(**common)
    await producer.start()
    try:
        await producer.send_and_wait(topic, b"a0")
    finally:
        await producer.stop()
    consumer = AIOKafkaConsumer(topic, auto_offset_reset="earliest", **common)
    await consumer.start()
    try:
        async with asyncio.timeout(30):
            msg = await consumer.getone()
    finally:
        await consumer.stop()
    assert msg.value == b"a0"


@pytest.mark.skipif(KCAT is None, reason="kcat is not installed")
def test_kcat_with_scram_sha_512_over_tls(env: Env, topic: str) -> None:
    args = [str(KCAT), "-b", env.address("SASL_SSL")]
    for k, v in _confluent(env, "SASL_SSL", "SCRAM-SHA-512", "alice", "alice-pw").items():
        if k != "bootstrap.servers":
            args += ["-X", f"{k}={v}"]
    subprocess.run([*args, "-P", "-t", topic], input=b"x1\nx2\n", check=True, timeout=60)
    out = subprocess.run(
        [*args, "-C", "-t", topic, "-o", "beginning", "-e", "-q"],
        capture_output=True,
        check=True,
        timeout=60,
    )
    assert out.stdout.split() == [b"x1", b"x2"]


def _wire(env: Env, listener: str = "SASL_PLAINTEXT") -> Wire:
    wire = Wire(env.ports[listener])
    if listener == "SASL_SSL":
        ctx = ssl.create_default_context(cafile=str(env.pki.ca))
        wire.sock = ctx.wrap_socket(wire.sock, server_hostname="127.0.0.1")
    return wire


def _authenticate(wire: Wire, mechanism: str, token: bytes) -> Any:
    handshake = wire.request(17, 1, SaslHandshakeRequest(mechanism=mechanism))
    assert handshake.error_code == 0
    return wire.request(36, 2, SaslAuthenticateRequest(auth_bytes=token))


def _closed(wire: Wire) -> bool:
    try:
        wire.sock.settimeout(10)
        return wire.sock.recv(1) == b""
    except (ConnectionError, ssl.SSLError):
        return True


@pytest.mark.parametrize(
    ("mechanism", "token"),
    [
        ("PLAIN", b"\0bob\0wrong"),
        ("PLAIN", b"\0nobody\0bob-pw"),
        ("SCRAM-SHA-512", b"n,,n=nobody,r=abcdefgh"),
        ("SCRAM-SHA-512", b"garbage"),
    ],
)
def test_refused_credentials_get_sasl_authentication_failed_then_a_close(
    env: Env, mechanism: str, token: bytes
) -> None:
    with _wire(env) as wire:
        answer = _authenticate(wire, mechanism, token)
        assert answer.error_code == 58  # SASL_AUTHENTICATION_FAILED
        assert answer.error_message
        assert _closed(wire)
    with _wire(env) as wire:
        assert _authenticate(wire, "PLAIN", b"\0bob\0bob-pw").error_code == 0


def test_wrong_scram_password_is_refused_for_librdkafka(env: Env, topic: str) -> None:
    errors: list[KafkaError] = []
    conf: dict[str, Any] = _confluent(env, "SASL_SSL", "SCRAM-SHA-512", "alice", "wrong")
    producer = Producer(conf | {"error_cb": errors.append})
    deadline = time.monotonic() + 30
    while not errors and time.monotonic() < deadline:
        producer.poll(0.2)
    assert errors and errors[0].code() == KafkaError._AUTHENTICATION
    assert "invalid credentials" in errors[0].str()


def test_requests_before_authentication_close_the_connection(env: Env) -> None:
    with _wire(env) as wire:
        wire.send_request(
            3,
            12,
            MetadataRequest(
                topics=None,
                allow_auto_topic_creation=False,
                include_topic_authorized_operations=False,
            ),
        )
        assert _closed(wire)


def test_unsupported_mechanism_is_refused_with_the_offered_ones(env: Env) -> None:
    with _wire(env) as wire:
        answer = wire.request(17, 1, SaslHandshakeRequest(mechanism="GSSAPI"))
        assert answer.error_code == 33  # UNSUPPORTED_SASL_MECHANISM
        assert set(answer.mechanisms) == {"SCRAM-SHA-512", "SCRAM-SHA-256", "PLAIN"}
        assert _closed(wire)


def test_a_second_handshake_after_authentication_is_an_illegal_state(env: Env) -> None:
    with _wire(env) as wire:
        assert _authenticate(wire, "PLAIN", b"\0bob\0bob-pw").session_lifetime.total_seconds() == 0
        again = wire.request(17, 1, SaslHandshakeRequest(mechanism="PLAIN"))
        assert again.error_code == 34  # ILLEGAL_SASL_STATE


def test_credentials_are_described_deleted_and_survive_a_restart(env: Env, topic: str) -> None:
    env.add_user("dave", "dave-pw", ScramMechanism.SCRAM_SHA_512)
    admin = env.admin()
    futures: Any = admin.describe_user_scram_credentials(["dave"])
    described = futures["dave"].result(10)
    assert [(i.mechanism, i.iterations) for i in described.scram_credential_infos] == [
        (ScramMechanism.SCRAM_SHA_512, 4096)
    ]
    env.broker.restart()
    assert confluent_round_trip(
        _confluent(env, "SASL_SSL", "SCRAM-SHA-512", "dave", "dave-pw"), topic, 1
    )
    gone = UserScramCredentialDeletion("dave", ScramMechanism.SCRAM_SHA_512)
    admin = env.admin()
    admin.alter_user_scram_credentials([gone])["dave"].result(10)
    with _wire(env) as wire:
        answer = _authenticate(wire, "SCRAM-SHA-512", b"n,,n=dave,r=abcdefgh")
        assert answer.error_code == 58
