"""A 3-broker cluster whose one listener is SASL_SSL with client certificates required, so the
replica fetchers, the controller's channel and the liveness probes authenticate too (PLAIN
between brokers, mutual TLS underneath), while clients use SCRAM-SHA-512. The ACL authorizer
is on, with allow.everyone.if.no.acl.found=false and the brokers' principal a super user.

Changes made through one broker hold at every broker promptly: an ACL created or deleted
through broker 0 is enforced at brokers 1 and 2 (announced under /kafka-acl-changes and
watched), and a deleted SCRAM user can no longer authenticate anywhere.

Sessions last REAUTH_MS (connections.max.reauth.ms, KIP-368): the brokers' own connections and
librdkafka's re-authenticate, so replication and clients go on with no session cut short.
"""

from __future__ import annotations

import ssl
import time
from collections.abc import Callable, Iterator
from functools import partial
from typing import Any

import pytest
from confluent_kafka import KafkaError, Producer
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
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)
from security_support import Client, Issued, Pki, confluent_round_trip

from samsa.local_cluster.cluster import LocalCluster
from samsa.testing.cluster import replicated_cluster

pytestmark = [pytest.mark.timeout(300), pytest.mark.slow]
JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'username="broker" password="broker-pw" user_broker="broker-pw" user_watcher="watcher-pw";'
)
TOPIC_AUTHORIZATION_FAILED = 29
REAUTH_MS = 3000
# Well under the 60 s safety-net reload: a change seen within it was announced and watched.
PROMPTLY_S = 15.0


class Env:
    def __init__(self, cluster: LocalCluster, pki: Pki, client: Issued) -> None:
        self.cluster = cluster
        self.pki = pki
        self.client = client

    def tls(self, bootstrap: str | None = None) -> dict[str, Any]:
        return {
            "bootstrap.servers": bootstrap or self.cluster.bootstrap_servers,
            "security.protocol": "SASL_SSL",
            "ssl.ca.location": str(self.pki.ca),
            "ssl.certificate.location": str(self.client.cert),
            "ssl.key.location": str(self.client.key),
        }

    def admin(self, bootstrap: str | None = None) -> AdminClient:
        plain = {"sasl.mechanism": "PLAIN", "sasl.username": "broker", "sasl.password": "broker-pw"}
        return AdminClient(self.tls(bootstrap) | plain)

    def scram(self, user: str, password: str, bootstrap: str | None = None) -> dict[str, Any]:
        return self.tls(bootstrap) | {
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.username": user,
            "sasl.password": password,
        }

    def raw(self, broker_id: int, user: str, password: str) -> Client:
        """A connection to one broker in particular, as a PLAIN user."""
        context = ssl.create_default_context(cafile=str(self.pki.ca))
        context.load_cert_chain(str(self.client.cert), str(self.client.key))
        port = self.cluster.broker(broker_id).port
        return Client(port, "PLAIN", user, password, tls=context)


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    tmp = tmp_path_factory.mktemp("secured-cluster")
    pki = Pki(tmp / "pki")
    broker = pki.issue("broker", "broker", server=True)
    client = pki.issue("client", "client")
    overrides = {
        "listener.security.protocol.map": "PLAINTEXT:SASL_SSL",
        "ssl.keystore.location": str(broker.keystore),
        "ssl.truststore.location": str(pki.ca),
        "ssl.client.auth": "required",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512",
        "sasl.mechanism.inter.broker.protocol": "PLAIN",
        "sasl.jaas.config": JAAS,
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "allow.everyone.if.no.acl.found": "false",
        "super.users": "User:broker",
        "connections.max.reauth.ms": str(REAUTH_MS),
    }
    with replicated_cluster(tmp / "cluster", 3, overrides) as cluster:
        yield Env(cluster, pki, client)


def _add_user(env: Env, user: str, password: str) -> None:
    up = UserScramCredentialUpsertion(
        user, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), password.encode()
    )
    admin = env.admin()  # held: a client dropped mid-call fails its futures
    for f in admin.alter_user_scram_credentials([up]).values():
        f.result(30)


def _allow(principal: str, rtype: ResourceType, name: str, op: AclOperation) -> AclBinding:
    pattern = ResourcePatternType.PREFIXED if name.endswith("-") else ResourcePatternType.LITERAL
    return AclBinding(rtype, name, pattern, principal, "*", op, AclPermissionType.ALLOW)


def test_replication_over_a_secured_inter_broker_listener(env: Env) -> None:
    admin = env.admin()
    _add_user(env, "alice", "alice-pw")
    grants = [
        _allow("User:alice", ResourceType.TOPIC, "replicated", AclOperation.ALL),
        _allow("User:alice", ResourceType.GROUP, "replicated-", AclOperation.READ),
    ]
    for f in admin.create_acls(grants).values():
        f.result(30)
    admin.create_topics([NewTopic("replicated", 1, 3)])["replicated"].result(30)
    alice = env.scram("alice", "alice-pw") | {"acks": "all"}
    got = confluent_round_trip(alice, "replicated", 20)
    assert got == [f"v{i}".encode() for i in range(20)]
    # acks=all succeeded with min.insync.replicas=2: a follower fetched over SASL_SSL.
    meta = admin.list_topics("replicated", timeout=10).topics["replicated"].partitions[0]
    assert len(meta.replicas) == 3 and len(meta.isrs) >= 2


def _metadata_error(env: Env, broker_id: int, topic: str) -> int:
    """The error broker `broker_id` itself answers the watcher's Metadata for `topic` with."""
    with env.raw(broker_id, "watcher", "watcher-pw") as client:
        body = {
            "topics": [{"name": topic, "topic_id": None}],
            "allow_auto_topic_creation": False,
            "include_topic_authorized_operations": False,
        }
        (found,) = client.call(3, 12, body).topics
        return int(found.error_code)


def _within(seconds: float, what: str, get: Callable[[], int], expected: int) -> None:
    deadline = time.monotonic() + seconds
    while get() != expected:
        assert time.monotonic() < deadline, f"not within {seconds:.0f} s: {what}"
        time.sleep(0.1)


def _acl_call(env: Env, key: int, body: dict[str, Any]) -> Any:
    """CreateAcls (30) or DeleteAcls (31) sent to broker 0 itself, as a super user."""
    with env.raw(0, "broker", "broker-pw") as client:
        return client.call(key, 1, body)


def test_an_acl_changed_through_broker_0_holds_at_every_broker_promptly(env: Env) -> None:
    admin = env.admin()
    admin.create_topics([NewTopic("watched", 1, 3)])["watched"].result(30)
    assert [_metadata_error(env, b, "watched") for b in (0, 1, 2)] == [
        TOPIC_AUTHORIZATION_FAILED
    ] * 3
    acl = {
        "resource_type": 2,  # topic
        "resource_name": "watched",
        "resource_pattern_type": 3,  # literal
        "principal": "User:watcher",
        "host": "*",
        "operation": 8,  # describe
        "permission_type": 3,  # allow
    }
    created = _acl_call(env, 30, {"creations": [acl]})
    assert [r.error_code for r in created.results] == [0]
    for b in (2, 1):
        _within(PROMPTLY_S, f"broker {b} allows", partial(_metadata_error, env, b, "watched"), 0)

    flt = {
        "resource_type_filter": 2,
        "resource_name_filter": "watched",
        "pattern_type_filter": 3,
        "principal_filter": "User:watcher",
        "host_filter": None,
        "operation": 8,
        "permission_type": 3,
    }
    deleted = _acl_call(env, 31, {"filters": [flt]})
    assert [len(r.matching_acls) for r in deleted.filter_results] == [1]
    for b in (2, 1):
        _within(
            PROMPTLY_S,
            f"broker {b} refuses again",
            partial(_metadata_error, env, b, "watched"),
            TOPIC_AUTHORIZATION_FAILED,
        )


def _authentication_error(conf: dict[str, Any]) -> KafkaError | None:
    """The first authentication error a producer meets, or None once it has metadata."""
    errors: list[KafkaError] = []
    producer = Producer(conf | {"error_cb": errors.append})
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        auth = [e for e in errors if e.code() == KafkaError._AUTHENTICATION]
        if auth:
            return auth[0]
        try:
            producer.list_topics(timeout=1)
            return None
        except Exception:  # not connected yet: keep polling until the deadline
            producer.poll(0.1)
    raise AssertionError(f"neither metadata nor an authentication error in 30 s: {errors}")


def test_a_user_deleted_through_one_broker_cannot_authenticate_at_any(env: Env) -> None:
    _add_user(env, "dora", "dora-pw")
    at = {b: env.cluster.broker(b).bootstrap for b in (0, 1, 2)}
    for b, address in at.items():
        assert _authentication_error(env.scram("dora", "dora-pw", address)) is None, b
    gone = UserScramCredentialDeletion("dora", ScramMechanism.SCRAM_SHA_512)
    admin = env.admin(at[0])
    admin.alter_user_scram_credentials([gone])["dora"].result(30)
    for b, address in at.items():
        error = _authentication_error(env.scram("dora", "dora-pw", address))
        assert error is not None, f"broker {b} still let dora in"


def test_sessions_reauthenticate_under_load_and_none_expires(env: Env) -> None:
    """Records with acks=all (so followers fetch throughout) for three session lifetimes; each
    acknowledged, and no broker had to close an expired session: the replica fetchers, the
    controller's channel and librdkafka all re-authenticated in time."""
    admin = env.admin()
    _add_user(env, "rita", "rita-pw")
    grant = _allow("User:rita", ResourceType.TOPIC, "reauth", AclOperation.WRITE)
    for f in admin.create_acls([grant]).values():
        f.result(30)
    admin.create_topics([NewTopic("reauth", 3, 3)])["reauth"].result(30)
    reports: list[Any] = []
    producer = Producer(env.scram("rita", "rita-pw") | {"acks": "all"})

    def visible() -> int:
        # The ACL reaches the other brokers an instant after the one that wrote it.
        return int(producer.list_topics("reauth", timeout=10).topics["reauth"].error is None)

    _within(PROMPTLY_S, "rita may describe reauth everywhere", visible, 1)
    deadline = time.monotonic() + 3 * REAUTH_MS / 1000
    sent = 0
    while time.monotonic() < deadline:
        producer.produce("reauth", b"r", on_delivery=lambda err, msg: reports.append(err))
        sent += 1
        producer.poll(0.05)
    assert producer.flush(30) == 0
    assert reports == [None] * sent
    expired = [
        line
        for b in (0, 1, 2)
        for line in (env.cluster.data_dir / f"broker-{b}.log").read_text().splitlines()
        if "SASL session expired" in line
    ]
    assert expired == []
