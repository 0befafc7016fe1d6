"""A secured KafkaCluster run by the real operator on the real control plane, its broker
pods run by the node agent against one real ZooKeeper: a TLS listener with SCRAM-SHA-512,
brokers replicating over mutual TLS, ACLs. A KafkaUser's Secret lets a librdkafka client in
over SASL_SSL, trusting the CA the operator publishes; deleting the user takes its
credentials away. A listener spec the operator cannot run gets a condition saying why."""

from __future__ import annotations

import asyncio
import base64
import datetime
import json
import socket
import ssl
import subprocess
import sys
import time
from typing import Any
from urllib.parse import quote

import day2_scenarios as scenarios
import pytest
from cluster_support import LoadProducer, check_exactly_once, consume_all, create_topic
from day2_support import Brokers, acked, apply, in_thread, starts, wait_ready, wait_status
from kazoo.client import KazooClient
from kube_support import CHART, OPERATOR_ENV, condition

from samsa.local_cluster import ZooKeeperServer
from samsa.testing.cluster import FAST
from samsa_dev.kube.harness import KubeNamespace, eventually
from samsa_operator import certs

pytestmark = pytest.mark.timeout(600)
NAME = scenarios.NAME
SCRAM_PORT, MTLS_PORT = 9093, 9094


def secured_cluster(
    zk_connect: str, brokers: int, scram_certificate: str | None = None
) -> dict[str, Any]:
    """scram_certificate: the Secret of the SCRAM listener's own certificate, if it has one."""
    body = scenarios.cluster(brokers, zookeeper={"connect": zk_connect}, **FAST)
    body["spec"]["brokers"]["terminationGracePeriodSeconds"] = 30
    scram: dict[str, Any] = {
        "name": "scram",
        "port": SCRAM_PORT,
        "type": "tls",
        "authentication": "scram-sha-512",
    }
    if scram_certificate is not None:
        scram["certificate"] = {"secretName": scram_certificate}
    body["spec"]["listeners"] = {
        "clients": [
            scram,
            {"name": "mtls", "port": MTLS_PORT, "type": "tls", "authentication": "tls"},
        ],
        "interBroker": "tls",
    }
    body["spec"]["authorization"] = {"type": "simple"}
    return body


def user(
    name: str, kind: str, acls: list[dict[str, Any]], quotas: dict[str, Any] | None = None
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "clusterRef": NAME,
        "authentication": {"type": kind},
        "authorization": {"acls": acls},
    }
    if quotas is not None:
        spec["quotas"] = quotas
    return {
        "apiVersion": "kafka.samsa.dev/v1alpha1",
        "kind": "KafkaUser",
        "metadata": {"name": name},
        "spec": spec,
    }


def stored_quotas(zookeeper: ZooKeeperServer, entity: str) -> dict[str, str]:
    """A user entity's quotas where Kafka keeps them and `kafka-configs` reads them:
    /config/users/<entity, URL-encoded> (which also holds its SCRAM credentials)."""
    zk = KazooClient(hosts=zookeeper.connect_string, timeout=10)
    zk.start(timeout=10)
    try:
        if not zk.exists(f"/config/users/{quote(entity, safe='')}"):
            return {}
        data, _ = zk.get(f"/config/users/{quote(entity, safe='')}")
    finally:
        zk.stop()
        zk.close()
    config = json.loads(data)["config"]
    return {k: v for k, v in config.items() if not k.startswith("SCRAM-")}


# Produces 50 records to a topic it creates and reads them back in group g, or says why it
# could not connect. In a process that resolves names as the pods do (nss_wrapper). Brokers
# re-read ACLs every 2 s: a refusal for want of one is tried again, within a deadline.
CLIENT = """
import json, sys, time
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

conf, mode, topic, group = json.loads(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
errors = []
conf["error_cb"] = errors.append
if mode == "describe":
    found = AdminClient(conf).list_topics(topic, timeout=20).topics.get(topic)
    error = "ABSENT" if found is None else found.error.name() if found.error else None
    print(json.dumps({"error": error}))
    sys.exit(0)
if mode == "refused":
    # librdkafka reports a failed authentication to error_cb, served by poll().
    admin = AdminClient(conf)
    try:
        admin.list_topics(timeout=10)
        print(json.dumps({"connected": True}))
        sys.exit(0)
    except KafkaException as exc:
        errors.append(exc.args[0])
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and not any(
        e.code() == KafkaError._AUTHENTICATION for e in errors
    ):
        admin.poll(0.5)
    print(json.dumps({"connected": False,
                      "authentication": any(e.code() == KafkaError._AUTHENTICATION for e in errors),
                      "errors": [str(e) for e in errors][:3]}))
    sys.exit(0)
NOT_YET = (KafkaError.TOPIC_AUTHORIZATION_FAILED, KafkaError.GROUP_AUTHORIZATION_FAILED,
           KafkaError.CLUSTER_AUTHORIZATION_FAILED)
deadline = time.monotonic() + 60
admin = AdminClient(conf)
while mode == "use":
    try:
        admin.create_topics([NewTopic(topic, 3, 3)])[topic].result(30)
        break
    except KafkaException as exc:
        if exc.args[0].code() not in NOT_YET or time.monotonic() > deadline:
            raise
        time.sleep(0.5)
p = Producer({**conf, "acks": "all"})
pending = set(range(50)) if mode == "use" else set()
while pending:
    failed = []
    def report(err, msg):
        if err is None:
            pending.discard(int(msg.key()))
        elif err.code() in NOT_YET and time.monotonic() < deadline:
            failed.append(err)
        else:
            raise SystemExit(f"record {msg.key()} not delivered: {err}")
    for i in sorted(pending):
        try:
            p.produce(topic, key=b"%d" % i, value=b"v%d" % i, on_delivery=report)
        except KafkaException as exc:  # the topic is known unauthorized: not yet, maybe
            if exc.args[0].code() not in NOT_YET or time.monotonic() > deadline:
                raise
            failed.append(exc.args[0])
            break
    assert p.flush(60) == 0, "records left unsent"
    if failed:
        time.sleep(0.5)
        p.list_topics(topic, timeout=10)  # librdkafka learns the topic's state again


# Every record, or None to start over: a refusal while the ACL caches catch up, or nothing
# for 20 s (librdkafka keeps a refused subscription's state).
def consume():
    c = Consumer({**conf, "group.id": group, "auto.offset.reset": "earliest",
                  "enable.auto.commit": False, "topic.metadata.refresh.interval.ms": 1000})
    c.subscribe([topic])
    seen, quiet = set(), time.monotonic() + 20
    try:
        while len(seen) < 50:
            m = c.poll(1)
            if m is None:
                if time.monotonic() > quiet:
                    return None
                continue
            if m.error() is not None:
                if m.error().code() in NOT_YET and time.monotonic() < deadline:
                    return None
                raise SystemExit(str(m.error()))
            seen.add(m.value())
        return seen
    finally:
        c.close()


deadline = time.monotonic() + 90
while (seen := consume()) is None:
    if time.monotonic() > deadline:
        raise SystemExit("no records within 90 s")
print(json.dumps({"consumed": len(seen)}))
"""


async def client(
    kube: KubeNamespace, conf: dict[str, Any], mode: str, topic: str, group: str = "g"
) -> dict[str, Any]:
    """mode: use (create the topic, produce, consume), read (consume), describe (the
    topic's metadata error), refused (whether authentication failed). Off the event loop:
    the node agent lives on it."""
    return await asyncio.to_thread(run_client, kube, conf, mode, topic, group)


def run_client(
    kube: KubeNamespace, conf: dict[str, Any], mode: str, topic: str, group: str
) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-c", CLIENT, json.dumps(conf), mode, topic, group],
        capture_output=True,
        text=True,
        timeout=200,
        env={**kube.env(), **kube.agent.name_env()},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


async def secret(kube: KubeNamespace, name: str) -> dict[str, str]:
    found = await kube.get("secret", name)
    return {k: base64.b64decode(v).decode() for k, v in found["data"].items()}


async def ready_user(kube: KubeNamespace, name: str) -> dict[str, Any]:
    async def ready() -> dict[str, Any] | None:
        found = await kube.maybe_get("kafkauser", name)
        return found if condition(found).get("status") == "True" else None

    return await eventually(ready, 90, f"KafkaUser {name} ready")


@pytest.mark.slow
async def test_a_kafka_user_connects_over_sasl_ssl_and_is_refused_once_deleted(
    kube: KubeNamespace, zookeeper: ZooKeeperServer
) -> None:
    await kube.install_operator(CHART, **OPERATOR_ENV)
    # The SCRAM listener serves a certificate of the company's own CA, as cert-manager would
    # keep it in a Secret; the cluster waits for that Secret and says so.
    await apply(kube, json.dumps(secured_cluster(zookeeper.connect_string, 3, "scram-tls")))

    async def waiting_for_certificate() -> dict[str, Any] | None:
        found = condition(await kube.maybe_get("kafkacluster", NAME))
        return found if found.get("reason") == "InvalidCertificate" else None

    waiting = await eventually(waiting_for_certificate, 60, "a condition naming the Secret")
    assert "Secret scram-tls not found" in waiting["message"], waiting
    company = certs.new_ca("company-ca", datetime.datetime.now(datetime.UTC), 30)
    names = [f"*.{NAME}-kafka-brokers.{kube.name}.svc", f"{NAME}-kafka-bootstrap.{kube.name}.svc"]
    own = certs.issue(company, certs.name("kafka"), datetime.datetime.now(datetime.UTC), 30, names)
    await apply(
        kube,
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": "scram-tls"},
                "type": "kubernetes.io/tls",
                "stringData": {"tls.crt": own.cert, "tls.key": own.key, "ca.crt": company.cert},
            }
        ),
    )
    # Ready needs the controller's id, which the operator asks for over mutual TLS.
    status = await wait_ready(kube, 3, within=240)
    assert status["controllerId"] is not None
    ca = (await secret(kube, f"{NAME}-cluster-ca-cert"))["ca.crt"]
    assert "BEGIN CERTIFICATE" in ca and "PRIVATE KEY" not in ca

    acls = [
        {"resource": {"type": "topic", "name": "secured"}, "operations": ["All"]},
        {"resource": {"type": "group", "name": "g"}, "operations": ["Read"]},
    ]
    quotas = {"producerByteRate": 1048576, "consumerByteRate": 2097152}
    await apply(kube, json.dumps(user("alice", "scram-sha-512", acls, quotas)))
    found = await ready_user(kube, "alice")
    assert found["status"]["username"] == "User:alice"
    assert found["status"]["acls"] == 2
    assert found["status"]["quotas"] == {
        "producer_byte_rate": 1048576,
        "consumer_byte_rate": 2097152,
    }
    assert stored_quotas(zookeeper, "alice") == {
        "producer_byte_rate": "1048576",
        "consumer_byte_rate": "2097152",
    }
    creds = await secret(kube, "alice")
    bootstrap = f"{NAME}-kafka-bootstrap.{kube.name}.svc:{SCRAM_PORT}"
    conf = {
        "bootstrap.servers": bootstrap,
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "alice",
        "sasl.password": creds["password"],
        "ssl.ca.pem": company.cert,  # the SCRAM listener's certificate is the company's
    }
    assert await client(kube, conf, "use", "secured") == {"consumed": 50}
    wrong = await client(kube, {**conf, "sasl.password": "not-it"}, "refused", "secured")
    assert wrong["connected"] is False and wrong["authentication"], wrong

    # A TLS user: its certificate from the clients CA, over the mutual-TLS listener.
    reader_acls = [
        {"resource": {"type": "topic", "name": "secured"}, "operations": ["Read"]},
        {
            "resource": {"type": "group", "name": "readers-", "patternType": "prefix"},
            "operations": ["Read"],
        },
    ]
    await apply(kube, json.dumps(user("bob", "tls", reader_acls, {"requestPercentage": 40})))
    found = await ready_user(kube, "bob")
    assert found["status"]["username"] == "User:CN=bob"
    assert stored_quotas(zookeeper, "CN=bob") == {"request_percentage": "40.0"}
    # A quota taken out of the spec is taken out of the cluster, and out of the status.
    await apply(kube, json.dumps(user("alice", "scram-sha-512", acls, {"consumerByteRate": 4096})))

    async def alice_quotas() -> dict[str, Any] | None:
        found = await kube.maybe_get("kafkauser", "alice")
        status = (found or {}).get("status") or {}
        return status if status.get("quotas") == {"consumer_byte_rate": 4096} else None

    await eventually(alice_quotas, 60, "alice's quotas changed")
    assert stored_quotas(zookeeper, "alice") == {"consumer_byte_rate": "4096"}
    bob = await secret(kube, "bob")
    tls_conf = {
        "bootstrap.servers": f"{NAME}-kafka-bootstrap.{kube.name}.svc:{MTLS_PORT}",
        "security.protocol": "SSL",
        "ssl.ca.pem": ca,
        "ssl.certificate.pem": bob["user.crt"],
        "ssl.key.pem": bob["user.key"],
    }
    assert await client(kube, tls_conf, "read", "secured", "readers-1") == {"consumed": 50}

    await kube.kubectl("delete", "kafkauser", "alice", "bob", "--timeout=90s", within=120)
    assert await kube.maybe_get("secret", "alice") is None
    assert stored_quotas(zookeeper, "alice") == {} and stored_quotas(zookeeper, "CN=bob") == {}
    refused = await client(kube, conf, "refused", "secured")
    assert refused["connected"] is False and refused["authentication"], refused

    # A certificate cannot be taken back; its ACLs are, within the brokers' ACL refresh.
    async def bob_denied() -> bool:
        found = await client(kube, tls_conf, "describe", "secured")
        return found["error"] == "TOPIC_AUTHORIZATION_FAILED"

    await eventually(bob_denied, 60, "bob's ACLs gone")


def served_certificate(address: str, ca: str) -> bytes:
    """The certificate (DER) a broker's TLS listener serves, checked against the CA."""
    host, port = address.rsplit(":", 1)
    ctx = ssl.create_default_context(cadata=ca)
    ctx.check_hostname = False  # by IP here: its DNS name is the pods' (nss_wrapper)
    with (
        socket.create_connection((host, int(port)), timeout=10) as sock,
        ctx.wrap_socket(sock) as tls,
    ):
        der = tls.getpeercert(binary_form=True)
    assert der is not None
    return der


def pem_to_der(pem: str) -> bytes:
    return ssl.PEM_cert_to_DER_cert(pem[pem.index("-----BEGIN CERTIFICATE-----") :])


@pytest.mark.slow
@pytest.mark.e2e  # day-2 under load: `make e2e` (docs/kubernetes.md)
async def test_a_certificate_renewal_rolls_the_brokers_under_load_losing_nothing(
    kube: KubeNamespace, zookeeper: ZooKeeperServer
) -> None:
    # TLS listeners and replication, no authorization: the load runs on the plain listener.
    body = secured_cluster(zookeeper.connect_string, 3)
    del body["spec"]["authorization"]
    await kube.install_operator(CHART, **OPERATOR_ENV)
    await apply(kube, json.dumps(body))
    status = await wait_ready(kube, 3, within=240)
    brokers = Brokers(kube.agent)
    ca = (await secret(kube, f"{NAME}-cluster-ca-cert"))["ca.crt"]
    before = await secret(kube, f"{NAME}-kafka-certs")
    await in_thread(create_topic, brokers, "load", 6, 3, **{"min.insync.replicas": "2"})
    load = LoadProducer(brokers, "load").start()
    try:
        await eventually(lambda: acked(load, 500), 60, "records acknowledged")
        started = time.monotonic()
        await kube.kubectl("annotate", "kc", NAME, "kafka.samsa.dev/force-renew=true")
        status = await wait_status(kube, scenarios.roll_finished(3), "the roll to finish", 300)
        count = load.oracle.count()
        await eventually(lambda: acked(load, count + 300), 60, "records after the roll")
    finally:
        oracle = load.stop()
    assert sorted(starts(kube, started)) == [0, 1, 2]
    assert not oracle.errors, oracle.errors[:3]
    check_exactly_once(oracle, await in_thread(consume_all, brokers, "load", 6))
    after = await secret(kube, f"{NAME}-kafka-certs")
    assert after["ca.crt"] == before["ca.crt"]
    annotations = (await kube.get("kc", NAME))["metadata"].get("annotations") or {}
    assert "kafka.samsa.dev/force-renew" not in annotations
    # Every broker serves its renewed certificate.
    for b in range(3):
        assert before[f"broker-{b}.pem"] != after[f"broker-{b}.pem"]
        [run] = [r for r in kube.agent.pods.values() if r.name == f"{NAME}-kafka-{b}"]
        served = await in_thread(served_certificate, f"{run.ip}:{SCRAM_PORT}", ca)
        assert served == pem_to_der(after[f"broker-{b}.pem"])
    assert scenarios.condition(status, "RollingRestart")["reason"] == "Idle"


def tls_secret(name: str, pair: certs.KeyPair) -> dict[str, Any]:
    """A Secret as cert-manager keeps a CA Issuer's key pair."""
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name},
        "type": "kubernetes.io/tls",
        "stringData": {"tls.crt": pair.cert, "tls.key": pair.key, "ca.crt": pair.cert},
    }


@pytest.mark.slow
@pytest.mark.e2e  # day-2 under load: `make e2e` (docs/kubernetes.md)
@pytest.mark.timeout(1200)
async def test_a_ca_of_ones_own_and_its_key_replaced_under_load_lose_nothing(
    kube: KubeNamespace, zookeeper: ZooKeeperServer
) -> None:
    """The cluster CA is the company's, from a cert-manager-style Secret: the brokers'
    certificates are of it and clients trust it. Its key is replaced in the Secret while an
    idempotent acks=all producer runs: the new CA is trusted beside the old, the brokers'
    certificates are issued from it, then the old is let go, a roll after each step, and not
    one acknowledged record is lost or doubled."""
    now = datetime.datetime.now(datetime.UTC)
    old_ca = certs.new_ca("company-ca", now, 30)
    await apply(kube, json.dumps(tls_secret("company-ca", old_ca)))
    body = secured_cluster(zookeeper.connect_string, 3)
    del body["spec"]["authorization"]  # the load runs on the plain listener
    body["spec"]["certificates"] = {"clusterCa": {"secretName": "company-ca"}}
    await kube.install_operator(CHART, **OPERATOR_ENV)
    await apply(kube, json.dumps(body))
    await wait_ready(kube, 3, within=240)
    assert (await secret(kube, f"{NAME}-cluster-ca-cert"))["ca.crt"] == old_ca.cert
    assert await kube.maybe_get("secret", f"{NAME}-cluster-ca") is None  # the key is not copied
    brokers = Brokers(kube.agent)
    await in_thread(create_topic, brokers, "load", 6, 3, **{"min.insync.replicas": "2"})
    load = LoadProducer(brokers, "load").start()
    new_ca = certs.new_ca("company-ca", now, 30)
    try:
        await eventually(lambda: acked(load, 500), 60, "records acknowledged")
        started = time.monotonic()
        await apply(kube, json.dumps(tls_secret("company-ca", new_ca)))

        async def only_the_new_ca() -> dict[str, str] | None:
            held = await secret(kube, f"{NAME}-kafka-certs")
            issued = [held[f"broker-{b}.pem"] for b in range(3)]
            done = held["ca.crt"] == new_ca.cert and all(
                certs.signed_by(pem[pem.index("-----BEGIN CERTIFICATE") :], new_ca)
                for pem in issued
            )
            return held if done else None

        after = await eventually(only_the_new_ca, 900, "the new CA alone, and rolled out")

        # The last step's roll may not have begun when its certificates are stored: done
        # once every broker has started three times and no roll runs.
        def three_rolls(status: dict[str, Any]) -> bool:
            return len(starts(kube, started)) >= 9 and scenarios.roll_finished(3)(status)

        await wait_status(kube, three_rolls, "the last of three rolls to finish", 300)
        count = load.oracle.count()
        await eventually(lambda: acked(load, count + 300), 60, "records after the change")
    finally:
        oracle = load.stop()
    # Three rolls: each broker restarted once for each step.
    assert sorted(starts(kube, started)) == [0, 0, 0, 1, 1, 1, 2, 2, 2]
    assert not oracle.errors, oracle.errors[:3]
    check_exactly_once(oracle, await in_thread(consume_all, brokers, "load", 6))
    assert (await secret(kube, f"{NAME}-cluster-ca-cert"))["ca.crt"] == new_ca.cert
    for b in range(3):
        [run] = [r for r in kube.agent.pods.values() if r.name == f"{NAME}-kafka-{b}"]
        served = await in_thread(served_certificate, f"{run.ip}:{SCRAM_PORT}", new_ca.cert)
        assert served == pem_to_der(after[f"broker-{b}.pem"])


async def test_a_listener_spec_the_brokers_cannot_run_gets_a_condition(
    kube: KubeNamespace,
) -> None:
    kube.run_only_the_operator()
    await kube.install_operator(CHART, **OPERATOR_ENV)
    body = scenarios.cluster(1)
    body["spec"]["listeners"] = {
        "clients": [{"name": "mtls", "port": MTLS_PORT, "type": "plain", "authentication": "tls"}]
    }
    await apply(kube, json.dumps(body))

    async def invalid() -> dict[str, Any] | None:
        cond = condition(await kube.maybe_get("kc", NAME))
        return cond if cond.get("reason") == "InvalidSpec" else None

    cond = await eventually(invalid, 60, "Ready=False InvalidSpec")
    assert cond["status"] == "False"
    assert "clients[0] (mtls): authentication tls needs type tls" in cond["message"]
    # Nothing was made of it: no certificates, no brokers.
    assert await kube.maybe_get("sts", f"{NAME}-kafka") is None
    assert await kube.maybe_get("secret", f"{NAME}-cluster-ca") is None


async def test_the_chart_s_network_policy_and_the_pki_s_secrets_of_a_secured_cluster(
    kube: KubeNamespace,
) -> None:
    """The objects only (the brokers stay Pending): with networkPolicy.enabled the operator,
    under the chart's RBAC, writes the cluster's NetworkPolicy; the PKI's Secrets are owned
    by the cluster; a KafkaUser waits for a ready broker and says so."""
    kube.run_only_the_operator()
    kube.operator_values = {"networkPolicy": {"enabled": True}}
    await kube.install_operator(CHART, **OPERATOR_ENV)
    await apply(kube, json.dumps(secured_cluster("zookeeper.example:2181", 3)))
    policy = await eventually(
        lambda: kube.maybe_get("networkpolicy", f"{NAME}-kafka"), 60, "the NetworkPolicy"
    )
    [open_, replication] = policy["spec"]["ingress"]
    assert {p["port"] for p in open_["ports"]} == {9092, 9644, SCRAM_PORT, MTLS_PORT}
    assert replication["ports"] == [{"protocol": "TCP", "port": 9091}]
    cluster = await kube.get("kc", NAME)
    for name in (
        f"{NAME}-cluster-ca",
        f"{NAME}-cluster-ca-cert",
        f"{NAME}-clients-ca",
        f"{NAME}-clients-ca-cert",
        f"{NAME}-kafka-certs",
        f"{NAME}-operator-certs",
    ):
        found = await kube.get("secret", name)
        [owner] = found["metadata"]["ownerReferences"]
        assert owner["uid"] == cluster["metadata"]["uid"]
    assert set(await secret(kube, f"{NAME}-kafka-certs")) >= {
        "broker-0.pem",
        "broker-2.pem",
        "ca.crt",
        "clients-ca.crt",
    }
    sts = await kube.get("sts", f"{NAME}-kafka")
    annotations = sts["spec"]["template"]["metadata"]["annotations"]
    assert annotations["kafka.samsa.dev/certificates"]

    await apply(kube, json.dumps(user("carol", "scram-sha-512", [])))

    async def waiting() -> dict[str, Any] | None:
        cond = condition(await kube.maybe_get("kafkauser", "carol"))
        return cond if cond.get("reason") == "ClusterNotReady" else None

    cond = await eventually(waiting, 60, "carol waiting for the cluster")
    assert "no ready broker" in cond["message"]
    # Its Secret is there already, owned by it.
    assert (await secret(kube, "carol"))["username"] == "carol"
