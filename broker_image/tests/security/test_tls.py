"""TLS listeners: the four clients over SSL and mutual TLS, and what is refused (no client
certificate, an untrusted or expired one, plaintext bytes to a TLS port) while the broker keeps
serving everyone else."""

from __future__ import annotations

import asyncio
import shutil
import socket
import ssl
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from kafka_support import Wire
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from security_support import (
    Issued,
    Pki,
    confluent_round_trip,
    kafka_python_round_trip,
    tls_listeners,
)

from samsa.testing import InProcessBroker, free_port

pytestmark = pytest.mark.timeout(120)
KCAT = shutil.which("kcat")


class Env:
    def __init__(self, root: Path) -> None:
        self.pki = Pki(root / "pki")
        self.broker_cert = self.pki.issue("broker", "broker", server=True)
        self.client: Issued = self.pki.issue("alice", "alice", "apps")
        self.ports = {"PLAINTEXT": free_port(), "SSL": free_port(), "MTLS": free_port()}
        config = tls_listeners(root, self.broker_cert.keystore, self.pki.ca, self.ports)
        self.broker = InProcessBroker(root / "data", config, port=self.ports["PLAINTEXT"])

    def address(self, listener: str) -> str:
        return f"127.0.0.1:{self.ports[listener]}"

    def client_context(self, cert: Issued | None = None) -> ssl.SSLContext:
        ctx = ssl.create_default_context(cafile=str(self.pki.ca))
        if cert is not None:
            ctx.load_cert_chain(str(cert.cert), str(cert.key))
        return ctx


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    env = Env(tmp_path_factory.mktemp("tls"))
    with env.broker:
        yield env


def _confluent_ssl(env: Env, listener: str, cert: Issued | None = None) -> dict[str, str]:
    conf = {
        "bootstrap.servers": env.address(listener),
        "security.protocol": "SSL",
        "ssl.ca.location": str(env.pki.ca),
    }
    if cert is not None:
        conf |= {"ssl.certificate.location": str(cert.cert), "ssl.key.location": str(cert.key)}
    return conf


@pytest.mark.parametrize("listener", ["SSL", "MTLS"])
def test_librdkafka_over_tls(env: Env, listener: str, topic: str, group: str) -> None:
    cert = env.client if listener == "MTLS" else None
    got = confluent_round_trip(_confluent_ssl(env, listener, cert), topic, 10)
    assert got == [f"v{i}".encode() for i in range(10)]


@pytest.mark.parametrize("listener", ["SSL", "MTLS"])
def test_kafka_python_over_tls(env: Env, listener: str, topic: str) -> None:
    tls: dict[str, str] = {"security_protocol": "SSL", "ssl_cafile": str(env.pki.ca)}
    if listener == "MTLS":
        tls |= {"ssl_certfile": str(env.client.cert), "ssl_keyfile": str(env.client.key)}
    got = kafka_python_round_trip({"bootstrap_servers": env.address(listener), **tls}, topic, 5)
    assert got == [f"k{i}".encode() for i in range(5)]


@pytest.mark.parametrize("listener", ["SSL", "MTLS"])
async def test_aiokafka_over_tls(env: Env, listener: str, topic: str) -> None:
    ctx = env.client_context(env.client if listener == "MTLS" else None)
    common = {
        "bootstrap_servers": env.address(listener),
        "security_protocol": "SSL",
        "ssl_context": ctx,
    }
    producer = AIOKafkaProducer(**common)
    await producer.start()
    try:
        for i in range(5):
            await producer.send_and_wait(topic, f"a{i}".encode())
    finally:
        await producer.stop()
    consumer = AIOKafkaConsumer(topic, auto_offset_reset="earliest", **common)
    await consumer.start()
    got: list[bytes] = []
    try:
        async with asyncio.timeout(30):
            async for msg in consumer:
                got.append(msg.value)
                if len(got) == 5:
                    break
    finally:
        await consumer.stop()
    assert got == [f"a{i}".encode() for i in range(5)]


@pytest.mark.skipif(KCAT is None, reason="kcat is not installed")
@pytest.mark.parametrize("listener", ["SSL", "MTLS"])
def test_kcat_over_tls(env: Env, listener: str, topic: str) -> None:
    args = [
        str(KCAT),
        "-b",
        env.address(listener),
        "-X",
        "security.protocol=SSL",
        "-X",
        f"ssl.ca.location={env.pki.ca}",
    ]
    if listener == "MTLS":
        args += [
            "-X",
            f"ssl.certificate.location={env.client.cert}",
            "-X",
            f"ssl.key.location={env.client.key}",
        ]
    subprocess.run([*args, "-P", "-t", topic], input=b"x1\nx2\nx3\n", check=True, timeout=60)
    out = subprocess.run(
        [*args, "-C", "-t", topic, "-o", "beginning", "-e", "-q"],
        capture_output=True,
        check=True,
        timeout=60,
    )
    assert out.stdout.split() == [b"x1", b"x2", b"x3"]


def _api_versions_over(sock: socket.socket) -> object:
    wire = Wire.__new__(Wire)
    wire.sock, wire.timeout = sock, 10.0
    return wire.request(
        18, 3, ApiVersionsRequest(client_software_name="t", client_software_version="1")
    )


def _refused(env: Env, ctx: ssl.SSLContext, listener: str = "MTLS") -> None:
    """The TLS handshake fails, or (TLS 1.3 checks the client certificate after the client
    finished) the first read finds the connection closed with an alert."""
    raw = socket.create_connection(("127.0.0.1", env.ports[listener]), timeout=10)
    with (
        pytest.raises((ssl.SSLError, EOFError, ConnectionError)),
        ctx.wrap_socket(raw, server_hostname="127.0.0.1") as sock,
    ):
        _api_versions_over(sock)


def _still_serves(env: Env) -> None:
    raw = socket.create_connection(("127.0.0.1", env.ports["MTLS"]), timeout=10)
    with env.client_context(env.client).wrap_socket(raw, server_hostname="127.0.0.1") as sock:
        assert _api_versions_over(sock).error_code == 0  # type: ignore[attr-defined]


def test_mtls_refuses_a_client_without_a_certificate(env: Env) -> None:
    _refused(env, env.client_context())
    _still_serves(env)


def test_mtls_refuses_an_untrusted_certificate(env: Env, tmp_path: Path) -> None:
    stranger = Pki(tmp_path / "other", "other-ca").issue("mallory", "mallory")
    _refused(env, env.client_context(stranger))
    _still_serves(env)


def test_mtls_refuses_an_expired_certificate(env: Env) -> None:
    old = env.pki.issue("old", "old", expired=True)
    _refused(env, env.client_context(old))
    _still_serves(env)


def test_plaintext_bytes_to_a_tls_port_are_refused(env: Env) -> None:
    with Wire(env.ports["SSL"]) as wire:
        wire.send(b"\0\0\0\x14" + b"\0\x12\0\x03" + bytes(16))
        with pytest.raises((EOFError, ConnectionError)):
            wire.read_frame()
    _still_serves(env)


def test_a_client_that_does_not_trust_the_broker_gives_up(env: Env, tmp_path: Path) -> None:
    other = Pki(tmp_path / "other", "other-ca")
    ctx = ssl.create_default_context(cafile=str(other.ca))
    raw = socket.create_connection(("127.0.0.1", env.ports["SSL"]), timeout=10)
    with pytest.raises(ssl.SSLCertVerificationError):
        ctx.wrap_socket(raw, server_hostname="127.0.0.1")
    raw.close()
    _still_serves(env)
