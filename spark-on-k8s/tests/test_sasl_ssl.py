"""The samsa source and sink, and the ad-clicks job, over SASL_SSL with SCRAM-SHA-512 against an
in-process broker whose ACL authorizer lets the Spark user touch only its own topics: the Java
client's settings (as Spark's connector takes them, and as a KafkaUser's Secret gives them) read
and write every record, and a wrong password fails at once with an error naming authentication.
"""

from __future__ import annotations

import json
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
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
from samsa_dev.pki import Pki
from samsa_spark.generator import generate, publish
from samsa_spark.jobs import ad_clicks

pytestmark = pytest.mark.timeout(300)
USER, PASSWORD = "spark", "spark-pw"
PREFIX = "spark-"  # the user's topics
JOB_TOPICS = ("ad-clicks", "ad-click-counts")  # the ad-clicks job's fixed topics
FIVE_MIN, TEN_MIN = 5 * 60_000, 10 * 60_000
MANIFEST = Path(__file__).parents[1] / "manifests" / "secured" / "ad-clicks-sasl-ssl.yaml"
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


def _iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


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
        grant = _allow(ResourceType.TOPIC, PREFIX, ResourcePatternType.PREFIXED)
        for f in admin.create_acls([grant]).values():
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


def _manifest_kafka_user(secured: Secured) -> tuple[str, dict[str, str]]:
    """The KafkaUser of manifests/secured/ad-clicks-sasl-ssl.yaml made as the operator makes
    it: its SCRAM credential, only the ACLs its spec declares, and its Secret's data."""
    import yaml

    from samsa_operator import models, users

    user = next(yaml.safe_load_all((MANIFEST).read_text()))
    name = user["metadata"]["name"]
    spec = models.parse_spec(models.KafkaUserSpec, user["spec"])
    data = users.scram_secret(name, {})
    up = UserScramCredentialUpsertion(
        name,
        ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, users.SCRAM_ITERATIONS),
        data["password"].encode(),
    )
    secured.admin.alter_user_scram_credentials([up])[name].result(30)
    grants = [
        AclBinding(
            ResourceType[a.resource_type],
            a.name,
            ResourcePatternType[a.pattern],
            a.principal,
            a.host,
            AclOperation[a.operation],
            AclPermissionType[a.permission],
        )
        for a in users.desired_acls(spec, users.principal(name, spec))
    ]
    for f in secured.admin.create_acls(grants).values():
        f.result(30)
    return name, data


@pytest.mark.slow
def test_ad_clicks_job_with_a_kafka_user_secret(spark, secured, tmp_path):
    """Job (a) as manifests/secured runs it: --kafka-user-secret over the files of the
    KafkaUser's Secret, --kafka-ca over the cluster CA's ca.crt, as that user and its ACLs."""
    for name, partitions in zip(JOB_TOPICS, (3, 1), strict=True):
        secured.admin.create_topics([NewTopic(name, partitions, 1)])[name].result(30)
    _imps, clicks = generate(600, seed=5, span_minutes=40)
    publish(secured.plaintext, JOB_TOPICS[0], clicks, {"enable.idempotence": False})
    _name, data = _manifest_kafka_user(secured)
    secret = tmp_path / "kafka-user"  # one file per key, as Kubernetes mounts a Secret
    secret.mkdir()
    for key, value in data.items():
        (secret / key).write_text(value)
    ca = tmp_path / "kafka-ca"
    ca.mkdir()
    (ca / "ca.crt").write_bytes(secured.ca.read_bytes())
    ad_clicks.main(
        [
            "--bootstrap",
            secured.sasl_ssl,
            "--kafka-user-secret",
            str(secret),
            "--kafka-ca",
            str(ca / "ca.crt"),
            "--checkpoint",
            str(tmp_path / "ckpt"),
            "--available-now",
        ]
    )
    # By hand: every five-minute window the watermark (latest click - 10 min) has closed.
    watermark = max(c.event_time_ms for c in clicks) - TEN_MIN
    expected = Counter(
        (c.campaign_id, _iso(c.event_time_ms // FIVE_MIN * FIVE_MIN))
        for c in clicks
        if c.event_time_ms // FIVE_MIN * FIVE_MIN + FIVE_MIN <= watermark
    )
    out = [json.loads(m.value()) for m in consume_all(secured.plaintext, JOB_TOPICS[1])]
    got = {(r["campaign_id"], r["window_start"]): r["clicks"] for r in out}
    assert len(got) == len(out)
    assert got == dict(expected)
    assert got


def test_spark_kafka_connector_reads_over_sasl_ssl_with_the_same_options(spark, secured):
    """The options of the samsa tests above, unchanged, with Spark's own connector."""
    topic = secured.topic(2)
    records = [(f"k{i}".encode(), f"v{i}".encode()) for i in range(100)]
    produce(secured.plaintext, topic, records)
    reader = spark.read.format("kafka").option("subscribe", topic)
    for k, v in secured.java_options().items():
        reader = reader.option(k, v)
    rows = reader.load().select("key", "value").collect()
    assert sorted((bytes(r.key), bytes(r.value)) for r in rows) == sorted(records)
