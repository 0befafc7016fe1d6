"""Every client over security on a 3-broker cluster whose one listener, the inter-broker one
too, is secured, with the ACL authorizer on (allow.everyone.if.no.acl.found=false):

- ``scram``: SASL_SSL with client certificates required; clients authenticate with
  SCRAM-SHA-512 (the brokers among themselves with PLAIN); the principal is the SCRAM user.
- ``mtls``: SSL with client certificates required (mutual TLS); the principal is the
  certificate's subject, the brokers' own among them.

Apache Kafka's Java client (an idempotent producer with acks=all, and a consumer group with
cooperative-sticky assignment), librdkafka, kcat, kafka-python and aiokafka each write and read
back records on replicated topics as a principal given only prefixed ACLs on topics and groups.
"""

from __future__ import annotations

import asyncio
import shutil
import ssl
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)
from java_support import java_client
from security_support import confluent_round_trip, kafka_python_round_trip

from samsa.local_cluster.cluster import LocalCluster
from samsa.testing.cluster import replicated_cluster
from samsa_dev.pki import Pki

pytestmark = [pytest.mark.timeout(600), pytest.mark.slow]
KCAT = shutil.which("kcat")
PREFIX = "sec-"
SUBJECT = "O=Samsa Test"  # the test PKI's certificates: CN=<name>,O=Samsa Test


@dataclass
class Secured:
    """A running secured cluster and how one principal's clients reach it."""

    name: str
    cluster: LocalCluster
    admin: AdminClient
    # librdkafka settings (kcat takes the same).
    conf: dict[str, Any]
    kafka_python: dict[str, Any]
    aiokafka: dict[str, Any]
    java_properties: Path
    topics: dict[str, str] = field(default_factory=dict)

    def topic(self, client: str) -> str:
        """A replicated topic for one client, made by the admin."""
        name = f"{PREFIX}{client}"
        if client not in self.topics:
            self.admin.create_topics([NewTopic(name, 1, 3)])[name].result(30)
            self.topics[client] = name
        return name


def _prefixed(principal: str, rtype: ResourceType) -> AclBinding:
    return AclBinding(
        rtype,
        PREFIX,
        ResourcePatternType.PREFIXED,
        principal,
        "*",
        AclOperation.ALL,
        AclPermissionType.ALLOW,
    )


def _java_properties(path: Path, settings: dict[str, str]) -> Path:
    path.write_text("".join(f"{k}={v}\n" for k, v in settings.items()))
    return path


@pytest.fixture(scope="module", params=["scram", "mtls"])
def secured(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Secured]:
    kind: str = request.param
    tmp = tmp_path_factory.mktemp(f"secured-{kind}")
    pki = Pki(tmp / "pki")
    broker = pki.issue("broker", "broker", server=True)
    client = pki.issue("client", "client")
    admin_cert = pki.issue("admin", "admin")
    overrides = {
        "ssl.keystore.location": str(broker.keystore),
        "ssl.truststore.location": str(pki.ca),
        "ssl.client.auth": "required",
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "allow.everyone.if.no.acl.found": "false",
    }
    tls_files = {
        "ssl.ca.location": str(pki.ca),
        "ssl.certificate.location": str(client.cert),
        "ssl.key.location": str(client.key),
    }
    java_tls = {
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(pki.ca),
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(client.keystore),
    }
    python_tls = ssl.create_default_context(cafile=str(pki.ca))
    python_tls.load_cert_chain(str(client.cert), str(client.key))
    if kind == "scram":
        overrides |= {
            "listener.security.protocol.map": "PLAINTEXT:SASL_SSL",
            "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512",
            "sasl.mechanism.inter.broker.protocol": "PLAIN",
            "sasl.jaas.config": (
                "org.apache.kafka.common.security.plain.PlainLoginModule required "
                'username="broker" password="broker-pw" user_broker="broker-pw";'
            ),
            "super.users": "User:broker",
        }
        principal = "User:alice"
        sasl = {"sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "alice"}
        conf = {"security.protocol": "SASL_SSL", **tls_files, **sasl, "sasl.password": "alice-pw"}
        admin_conf = {
            "security.protocol": "SASL_SSL",
            **tls_files,
            "sasl.mechanism": "PLAIN",
            "sasl.username": "broker",
            "sasl.password": "broker-pw",
        }
        kafka_python = {
            "security_protocol": "SASL_SSL",
            "ssl_cafile": str(pki.ca),
            "ssl_certfile": str(client.cert),
            "ssl_keyfile": str(client.key),
            "sasl_mechanism": "SCRAM-SHA-512",
            "sasl_plain_username": "alice",
            "sasl_plain_password": "alice-pw",
        }
        aiokafka = {
            "security_protocol": "SASL_SSL",
            "ssl_context": python_tls,
            "sasl_mechanism": "SCRAM-SHA-512",
            "sasl_plain_username": "alice",
            "sasl_plain_password": "alice-pw",
        }
        java = {
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.jaas.config": (
                "org.apache.kafka.common.security.scram.ScramLoginModule required "
                'username="alice" password="alice-pw";'
            ),
            **java_tls,
        }
    else:
        overrides |= {
            "listener.security.protocol.map": "PLAINTEXT:SSL",
            "super.users": f"User:CN=broker,{SUBJECT};User:CN=admin,{SUBJECT}",
        }
        principal = f"User:CN=client,{SUBJECT}"
        conf = {"security.protocol": "SSL", **tls_files}
        admin_conf = conf | {
            "ssl.certificate.location": str(admin_cert.cert),
            "ssl.key.location": str(admin_cert.key),
        }
        kafka_python = {
            "security_protocol": "SSL",
            "ssl_cafile": str(pki.ca),
            "ssl_certfile": str(client.cert),
            "ssl_keyfile": str(client.key),
        }
        aiokafka = {"security_protocol": "SSL", "ssl_context": python_tls}
        java = {"security.protocol": "SSL", **java_tls}

    with replicated_cluster(tmp / "cluster", 3, overrides) as cluster:
        bootstrap = cluster.bootstrap_servers
        admin = AdminClient({"bootstrap.servers": bootstrap, **admin_conf})
        if kind == "scram":
            up = UserScramCredentialUpsertion(
                "alice", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), b"alice-pw"
            )
            admin.alter_user_scram_credentials([up])["alice"].result(30)
        grants = [
            _prefixed(principal, ResourceType.TOPIC),
            _prefixed(principal, ResourceType.GROUP),
        ]
        for f in admin.create_acls(grants).values():
            f.result(30)
        yield Secured(
            kind,
            cluster,
            admin,
            {"bootstrap.servers": bootstrap, **conf},
            {"bootstrap_servers": bootstrap, **kafka_python},
            {"bootstrap_servers": bootstrap, **aiokafka},
            _java_properties(tmp / "java-client.properties", java),
        )


def test_java_client(secured: Secured) -> None:
    bootstrap = secured.cluster.bootstrap_servers
    found = java_client(
        ["produce", "--bootstrap", bootstrap, "--topic", f"{PREFIX}java",
         "--partitions", "3", "--count", "200"],
        ["group", "--bootstrap", bootstrap, "--topic", f"{PREFIX}java-group",
         "--group", f"{PREFIX}java-group", "--partitions", "4", "--count", "50"],
        client_config=secured.java_properties,
    )  # fmt: skip
    produce, group = found["produce"], found["group"]
    assert produce["failure"] is None, produce["failure"]
    assert (produce["acked"], produce["errors"]) == (200, {})
    assert sum(len(rows) for rows in produce["read"].values()) == 200
    assert group["failure"] is None, group["failure"]
    assert group["acked"] == 3 * 50
    assert group["committed"] == group["end"], "every record consumed and committed"


def test_librdkafka(secured: Secured) -> None:
    topic = secured.topic("librdkafka")
    conf = secured.conf | {"acks": "all"}
    assert confluent_round_trip(conf, topic, 20) == [f"v{i}".encode() for i in range(20)]


def test_kcat(secured: Secured) -> None:
    topic = secured.topic("kcat")
    assert KCAT is not None, "kcat is missing: make setup installs it"
    args = [str(KCAT), "-b", secured.cluster.bootstrap_servers]
    for k, v in secured.conf.items():
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


def test_kafka_python(secured: Secured) -> None:
    topic = secured.topic("kafka-python")
    got = kafka_python_round_trip(secured.kafka_python, topic, 5)
    assert got == [f"k{i}".encode() for i in range(5)]


def test_aiokafka(secured: Secured) -> None:
    topic = secured.topic("aiokafka")

    async def round_trip() -> list[bytes | None]:
        producer = AIOKafkaProducer(acks="all", **secured.aiokafka)
        await producer.start()
        try:
            for i in range(5):
                await producer.send_and_wait(topic, f"a{i}".encode())
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(topic, auto_offset_reset="earliest", **secured.aiokafka)
        await consumer.start()
        got: list[bytes | None] = []
        try:
            async with asyncio.timeout(60):
                while len(got) < 5:
                    got.append((await consumer.getone()).value)
        finally:
            await consumer.stop()
        return got

    assert asyncio.run(round_trip()) == [f"a{i}".encode() for i in range(5)]
