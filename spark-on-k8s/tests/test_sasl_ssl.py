"""The samsa source and sink, and the ad-clicks job, over SASL_SSL with SCRAM-SHA-512 against an
in-process broker whose ACL authorizer lets the Spark user touch only its own topics: the Java
client's settings (as Spark's connector takes them, and as a KafkaUser's Secret gives them) read
and write every record, and a wrong password fails at once with an error naming authentication.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
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
from pyspark.errors import PySparkException
from spark_support import consume_all, produce

from samsa.testing import InProcessBroker, free_port
from samsa.testing.pki import Pki
from samsa_spark.generator import generate, publish
from samsa_spark.jobs import ad_clicks

pytestmark = pytest.mark.timeout(300)
USER, PASSWORD = "spark", "spark-pw"
PREFIX = "spark-"  # the user's topics
JOB_TOPICS = ("ad-clicks", "ad-click-counts")  # the ad-clicks job's fixed topics
COMMIT_LOGS = "_samsa-sink-"  # the streaming sink's commit-log topics, one per query
JAAS = (
    "org.apache.kafka.common.security.scram.ScramLoginModule required "
    'username="{user}" password="{password}";'
)


@dataclass
class Secured:
    """A broker with a PLAINTEXT listener for the test's own admin (a super user) and a
    SASL_SSL one for Spark."""

    plaintext: str
    sasl_ssl: str
    ca: Path
    admin: AdminClient

    def topic(self, partitions: int) -> str:
        name = f"{PREFIX}{uuid.uuid4().hex[:8]}"
        self.admin.create_topics([NewTopic(name, partitions, 1)])[name].result(30)
        return name

    def java_options(self, password: str = PASSWORD) -> dict[str, str]:
        """What a Spark user gives Spark's own Kafka connector."""
        return {
            "kafka.bootstrap.servers": self.sasl_ssl,
            "kafka.security.protocol": "SASL_SSL",
            "kafka.sasl.mechanism": "SCRAM-SHA-512",
            "kafka.sasl.jaas.config": JAAS.format(user=USER, password=password),
            "kafka.ssl.truststore.type": "PEM",
            "kafka.ssl.truststore.location": str(self.ca),
        }


def _allow(rtype: ResourceType, name: str, pattern: ResourcePatternType) -> AclBinding:
    return AclBinding(
        rtype, name, pattern, f"User:{USER}", "*", AclOperation.ALL, AclPermissionType.ALLOW
    )


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Secured]:
    root = tmp_path_factory.mktemp("sasl-ssl")
    pki = Pki(root / "pki")
    keystore = pki.issue("broker", "broker", server=True).keystore
    ports = {"PLAINTEXT": free_port(), "SASL_SSL": free_port()}
    config = {
        "listeners": ",".join(f"{n}://127.0.0.1:{p}" for n, p in ports.items()),
        "inter.broker.listener.name": "PLAINTEXT",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(keystore),
        "sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "allow.everyone.if.no.acl.found": "false",
        "super.users": "User:ANONYMOUS",  # the PLAINTEXT listener: the test's admin
        "auto.create.topics.enable": "false",
    }
    with InProcessBroker(root / "data", config, port=ports["PLAINTEXT"]):
        plaintext = f"127.0.0.1:{ports['PLAINTEXT']}"
        admin = AdminClient({"bootstrap.servers": plaintext})
        up = UserScramCredentialUpsertion(
            USER, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), PASSWORD.encode()
        )
        admin.alter_user_scram_credentials([up])[USER].result(30)
        grants = (
            [_allow(ResourceType.TOPIC, PREFIX, ResourcePatternType.PREFIXED)]
            + [_allow(ResourceType.TOPIC, t, ResourcePatternType.LITERAL) for t in JOB_TOPICS]
            + [_allow(ResourceType.TOPIC, COMMIT_LOGS, ResourcePatternType.PREFIXED)]
        )
        for f in admin.create_acls(grants).values():
            f.result(30)
        yield Secured(plaintext, f"127.0.0.1:{ports['SASL_SSL']}", pki.ca, admin)


def test_batch_read_over_sasl_ssl_returns_every_record(spark, secured):
    topic = secured.topic(3)
    records = [(f"k{i}".encode(), f"v{i}".encode()) for i in range(300)]
    produce(secured.plaintext, topic, records)
    reader = spark.read.format("samsa").option("subscribe", topic)
    for k, v in secured.java_options().items():
        reader = reader.option(k, v)
    rows = reader.load().select("key", "value").collect()
    assert sorted((bytes(r.key), bytes(r.value)) for r in rows) == sorted(records)


def test_sink_writes_over_sasl_ssl(spark, secured):
    topic = secured.topic(2)
    rows = [(f"k{i}", f"v{i}") for i in range(200)]
    writer = (
        spark.createDataFrame(rows, "key string, value string")
        .write.format("samsa")
        .option("topic", topic)
    )
    for k, v in secured.java_options().items():
        writer = writer.option(k, v)
    writer.mode("append").save()
    got = {(m.key().decode(), m.value().decode()) for m in consume_all(secured.plaintext, topic)}
    assert got == set(rows)


@pytest.mark.timeout(120)
def test_wrong_password_fails_naming_authentication(spark, secured):
    """Refused credentials end a read or a write at once: with a metadata timeout longer than
    the test's own, only an error raised on the refusal itself lets the test finish."""
    topic = secured.topic(1)
    wrong = secured.java_options(password="not-the-password") | {"metadataTimeoutMs": "600000"}
    reader = spark.read.format("samsa").option("subscribe", topic)
    for k, v in wrong.items():
        reader = reader.option(k, v)
    with pytest.raises(PySparkException, match="authentication failed") as read_error:
        reader.load().collect()
    assert "SCRAM-SHA-512" in str(read_error.value)
    writer = spark.createDataFrame([("k", "v")], "key string, value string").write.format("samsa")
    for k, v in (wrong | {"topic": topic}).items():
        writer = writer.option(k, v)
    with pytest.raises(PySparkException, match="authentication failed"):
        writer.mode("append").save()


def _kafka_user_secret(folder: Path, user: str, password: str) -> Path:
    """The files of a KafkaUser's Secret (scram-sha-512) as Kubernetes mounts them."""
    folder.mkdir()
    (folder / "username").write_text(user)
    (folder / "password").write_text(password)
    (folder / "sasl.jaas.config").write_text(JAAS.format(user=user, password=password))
    return folder


@pytest.mark.slow
def test_ad_clicks_job_with_a_kafka_user_secret(spark, secured, tmp_path):
    for name, partitions in zip(JOB_TOPICS, (3, 1), strict=True):
        secured.admin.create_topics([NewTopic(name, partitions, 1)])[name].result(30)
    _imps, clicks = generate(600, seed=5, span_minutes=40)
    publish(secured.plaintext, JOB_TOPICS[0], clicks, {"enable.idempotence": False})
    secret = _kafka_user_secret(tmp_path / "user-secret", USER, PASSWORD)
    ad_clicks.main(
        [
            "--bootstrap",
            secured.sasl_ssl,
            "--kafka-user-secret",
            str(secret),
            "--kafka-ca",
            str(secured.ca),
            "--checkpoint",
            str(tmp_path / "ckpt"),
            "--available-now",
        ]
    )
    out = consume_all(secured.plaintext, JOB_TOPICS[1])
    assert out  # windows the watermark closed, counted from clicks read over SASL_SSL
    assert sum(json.loads(m.value())["clicks"] for m in out) > 0
