"""What the security tests share: the listener settings and the clients' round trips (the
PKI is samsa_dev.pki)."""

from __future__ import annotations

import itertools
import socket
import ssl
import struct
import time
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Producer
from kafka import KafkaConsumer, KafkaProducer

from samsa.protocol.messages import build, decode_response, encode_request, request_type
from samsa_dev.pki import Issued, Pki

__all__ = [
    "Client",
    "Issued",
    "Pki",
    "confluent_round_trip",
    "kafka_python_round_trip",
    "tls_listeners",
]
_SIZE = struct.Struct(">i")
_correlation = itertools.count(1)


class Client:
    """One SASL/PLAIN connection speaking raw requests, any API at any version (TLS when
    given a context): for tests that must talk to one broker in particular."""

    def __init__(
        self,
        port: int,
        mechanism: str,
        user: str,
        password: str,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        assert mechanism == "PLAIN"
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=20)
        if tls is not None:
            self.sock = tls.wrap_socket(self.sock, server_hostname="127.0.0.1")
        assert self.call(17, 1, {"mechanism": "PLAIN"}).error_code == 0
        token = f"\0{user}\0{password}".encode()
        assert self.call(36, 2, {"auth_bytes": token}).error_code == 0

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.sock.close()

    def _read(self, n: int) -> bytes:
        out = bytearray()
        while len(out) < n:
            chunk = self.sock.recv(n - len(out))
            assert chunk, "the broker closed the connection"
            out += chunk
        return bytes(out)

    def call(self, key: int, version: int, body: Any) -> Any:
        if isinstance(body, dict):
            body = build(request_type(key, version), body)
        correlation_id = next(_correlation)
        self.sock.sendall(encode_request(key, version, correlation_id, "security", body))
        (size,) = _SIZE.unpack(self._read(4))
        got, response = decode_response(key, version, self._read(size))
        assert got == correlation_id
        return response


def tls_listeners(pki_dir: Path, keystore: Path, ca: Path, ports: dict[str, int]) -> dict[str, str]:
    """Broker settings: PLAINTEXT (inter-broker), SSL, and MTLS (SSL with client certificates
    required, set through the listener prefix)."""
    return {
        "listeners": ",".join(f"{name}://127.0.0.1:{port}" for name, port in ports.items()),
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SSL:SSL,MTLS:SSL",
        "inter.broker.listener.name": "PLAINTEXT",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(keystore),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(ca),
        "listener.name.mtls.ssl.client.auth": "required",
    }


def kafka_python_round_trip(settings: dict[str, Any], topic: str, n: int) -> list[bytes]:
    """Produce n records with kafka-python and read them back from the start."""
    producer = KafkaProducer(**settings)
    for i in range(n):
        producer.send(topic, f"k{i}".encode())
    producer.flush(30)
    producer.close()
    consumer = KafkaConsumer(
        topic, auto_offset_reset="earliest", consumer_timeout_ms=20_000, **settings
    )
    got: list[bytes] = []
    try:
        for msg in consumer:
            got.append(msg.value)
            if len(got) == n:
                break
    finally:
        consumer.close()
    return got


def confluent_round_trip(conf: dict[str, str], topic: str, n: int) -> list[bytes]:
    """Produce n records with librdkafka and read them back through a consumer group."""
    producer = Producer(conf)
    for i in range(n):
        producer.produce(topic, f"v{i}".encode())
    assert producer.flush(30) == 0
    consumer = Consumer(conf | {"group.id": f"{topic}-g", "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    got: list[bytes] = []
    try:
        deadline = time.monotonic() + 60
        while len(got) < n and time.monotonic() < deadline:
            msg = consumer.poll(1.0)
            if msg is not None and msg.error() is None:
                got.append(msg.value() or b"")
    finally:
        consumer.close()
    return got
