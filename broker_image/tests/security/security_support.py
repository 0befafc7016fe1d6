"""What the security tests share: the listener settings and the clients' round trips (the
PKI is samsa.testing.pki)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Producer
from kafka import KafkaConsumer, KafkaProducer

from samsa.testing.pki import Issued, Pki

__all__ = ["Issued", "Pki", "confluent_round_trip", "kafka_python_round_trip", "tls_listeners"]


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
