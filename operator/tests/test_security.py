"""A secured KafkaCluster, without an API server: listener specs the operator refuses (and
why), the brokers' security properties as the broker itself reads them, the PKI (issued,
kept, renewed) checked with real TLS handshakes, the NetworkPolicy, and a KafkaUser's
credentials and ACLs."""

from __future__ import annotations

import datetime
import itertools
import socket
import ssl
import tempfile
import threading
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
from op_support import K8S_VERSIONS

from samsa.config import KafkaConfig
from samsa.security.principal import tls_principal
from samsa_operator import certs, models, resources, rolling, security, users
from samsa_operator.resources import Cluster

# Handshakes check validity against the real clock: the PKI is made now.
NOW = datetime.datetime.now(datetime.UTC)

SECURED: dict[str, Any] = {
    "brokers": {"replicas": 3},
    "listeners": {
        "clients": [
            {"name": "scram", "port": 9093, "type": "tls", "authentication": "scram-sha-512"},
            {"name": "mtls", "port": 9094, "type": "tls", "authentication": "tls"},
            {"name": "sasl", "port": 9095, "type": "plain", "authentication": "scram-sha-512"},
        ],
        "interBroker": "tls",
    },
    "authorization": {"superUsers": ["User:admin"]},
    "certificates": {"validityDays": 100, "renewalDays": 10},
}


def secured(spec: dict[str, Any] | None = None, **changes: Any) -> Cluster:
    raw = {**SECURED, **(spec or {})}
    c = Cluster("c", "ns1", "uid-1", models.KafkaClusterSpec.model_validate(raw))
    return Cluster(**{**c.__dict__, **changes})


@pytest.mark.parametrize(
    ("listeners", "extra", "complaint"),
    [
        (
            [{"name": "a", "port": 9093, "type": "plain", "authentication": "tls"}],
            {},
            "clients[0] (a): authentication tls needs type tls",
        ),
        (
            [{"name": "replication", "port": 9093}],
            {},
            "clients[0] (replication): the name is taken",
        ),
        (
            [{"name": "a", "port": 9093}, {"name": "a", "port": 9095}],
            {},
            "clients[1] (a): the name is taken",
        ),
        ([{"name": "a", "port": 9092}], {}, "port 9092 is taken by internalPort"),
        ([{"name": "a", "port": 9091}], {}, "port 9091 is taken by the replication listener"),
        (
            [{"name": "a", "port": 9093}, {"name": "b", "port": 9093}],
            {},
            "clients[1] (b): port 9093 is taken by clients[0] (a)",
        ),
        (
            [{"name": "a", "port": 9093}],
            {"authorization": {}},
            "authorization needs listeners.interBroker: tls",
        ),
        (
            [{"name": "a", "port": 9093}],
            {"certificates": {"validityDays": 30, "renewalDays": 30}},
            "renewalDays must be less than validityDays",
        ),
    ],
)
def test_listener_combinations_the_operator_refuses(
    listeners: list[dict[str, Any]], extra: dict[str, Any], complaint: str
) -> None:
    spec = {"listeners": {"clients": listeners}, **extra}
    with pytest.raises(models.SpecError) as refused:
        models.parse_spec(models.KafkaClusterSpec, spec)
    assert complaint in str(refused.value)


def test_security_settings_in_spec_config_are_the_operators() -> None:
    for key in ("super.users", "listener.name.scram.sasl.enabled.mechanisms"):
        with pytest.raises(models.SpecError, match="is set by the operator"):
            models.parse_spec(models.KafkaClusterSpec, {"config": {key: "x"}})


def started(c: Cluster, broker_id: int) -> dict[str, str]:
    """The properties as the init container writes them: the pod's IP and the TLS folder."""
    props = resources.broker_properties(c, broker_id)
    return {
        k: v.replace("$(POD_IP)", "10.0.0.7").replace(security.TLS_PLACEHOLDER, security.TLS_DIR)
        for k, v in props.items()
    }


def test_secured_properties_the_kafka_way() -> None:
    c = secured()
    props = started(c, 1)
    host = "c-kafka-1.c-kafka-brokers.ns1.svc"
    assert props["listeners"] == (
        "PLAINTEXT://10.0.0.7:9092,REPLICATION://10.0.0.7:9091,SCRAM://10.0.0.7:9093,"
        "MTLS://10.0.0.7:9094,SASL://10.0.0.7:9095"
    )
    assert props["advertised.listeners"] == (
        f"PLAINTEXT://10.0.0.7:9092,REPLICATION://{host}:9091,SCRAM://{host}:9093,"
        f"MTLS://{host}:9094,SASL://10.0.0.7:9095"
    )
    assert props["listener.security.protocol.map"] == (
        "PLAINTEXT:PLAINTEXT,REPLICATION:SSL,SCRAM:SASL_SSL,MTLS:SSL,SASL:SASL_PLAINTEXT"
    )
    assert props["inter.broker.listener.name"] == "REPLICATION"
    assert props["ssl.keystore.location"] == "/etc/samsa/tls/broker-1.pem"
    assert props["listener.name.replication.ssl.client.auth"] == "required"
    assert props["listener.name.mtls.ssl.client.auth"] == "required"
    assert props["listener.name.mtls.ssl.truststore.location"] == "/etc/samsa/tls/clients-ca.crt"
    assert props["listener.name.scram.sasl.enabled.mechanisms"] == "SCRAM-SHA-512"
    assert props["authorizer.class.name"] == "kafka.security.authorizer.AclAuthorizer"
    assert (
        props["super.users"]
        == "User:CN=c-kafka,O=samsa.dev;User:CN=samsa-operator,O=samsa.dev;User:admin"
    )
    # The broker's own reading of them.
    config = KafkaConfig(props)
    assert config.broker_id == 1
    assert config.for_listener("MTLS", "ssl.client.auth") == "required"
    assert config.for_listener("SCRAM", "sasl.enabled.mechanisms") == ["SCRAM-SHA-512"]


def test_plain_clusters_keep_their_properties_and_pod_template() -> None:
    plain = Cluster("c", "ns1", "u", models.KafkaClusterSpec())
    assert not plain.spec.secured
    props = resources.broker_properties(plain, 0)
    assert props["listeners"] == "PLAINTEXT://$(POD_IP):9092"
    assert not any(k.startswith(("ssl.", "listener.name.")) for k in props)
    sts = resources.broker_statefulset(plain)
    assert [v["name"] for v in sts["spec"]["template"]["spec"]["volumes"]] == [
        "config",
        "podinfo",
        "run",
        "tmp",
    ]


def test_security_keys_are_never_a_difference_to_act_on() -> None:
    reported = {
        "listener.name.mtls.ssl.client.auth": rolling.ReportedConfig("none", "static", True),
        "super.users": rolling.ReportedConfig("User:x", "static", True),
    }
    assert rolling.config_diff(started(secured(), 0), reported).empty


@pytest.mark.parametrize("version", K8S_VERSIONS[-1:])
def test_secured_children_are_valid_kubernetes(version: str) -> None:
    c = secured(pki_rotation="abc", network_policy=True)
    pki = security.plan_pki(c, {}, NOW)
    for obj in resources.children(c) + resources.pki_secrets(c, pki):
        kubernetes_validate.validate(obj, version, strict=True)
    sts = resources.broker_statefulset(c)
    template = sts["spec"]["template"]
    assert template["metadata"]["annotations"][resources.CERTIFICATES_ANNOTATION] == "abc"
    [broker] = template["spec"]["containers"]
    assert {"name": "tls", "mountPath": "/etc/samsa/tls", "readOnly": True} in broker[
        "volumeMounts"
    ]
    assert {p["containerPort"] for p in broker["ports"]} >= {9091, 9093, 9094, 9095}
    bootstrap = next(
        o for o in resources.children(c) if o["metadata"]["name"] == "c-kafka-bootstrap"
    )
    assert [p["port"] for p in bootstrap["spec"]["ports"]] == [9092, 9091, 9093, 9094, 9095]


def test_network_policy_opens_the_listeners_and_the_replication_port_to_brokers_only() -> None:
    policy = resources.network_policy(secured())
    [open_, replication] = policy["spec"]["ingress"]
    assert "from" not in open_
    assert {p["port"] for p in open_["ports"]} == {9092, 9644, 9093, 9094, 9095}
    assert replication["ports"] == [{"protocol": "TCP", "port": 9091}]
    sources = replication["from"]
    assert sources[0]["podSelector"]["matchLabels"]["app.kubernetes.io/component"] == "kafka"
    assert sources[1]["podSelector"]["matchLabels"] == {"app.kubernetes.io/name": "samsa-operator"}
    assert not any(
        o["kind"] == "NetworkPolicy" for o in resources.children(secured(network_policy=False))
    )


# -- the PKI ----------------------------------------------------------------------------------


def data_of(c: Cluster, pki: security.Pki) -> dict[str, dict[str, str]]:
    return security.secret_data(c, pki)


def handshake(
    server_pem: str, server_ca: str, client_ca: str, hostname: str, client_pem: str | None
) -> str:
    """A real TLS handshake (OpenSSL, through the ssl module) between a server with
    `server_pem` that wants a client certificate from `server_ca`, and a client that trusts
    `client_ca` and checks `hostname`. Returns the client's principal as the broker sees it."""
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)

        def file(name: str, text: str) -> str:
            (folder / name).write_text(text)
            return str(folder / name)

        server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        server_ctx.load_cert_chain(file("server.pem", server_pem))
        server_ctx.verify_mode = ssl.CERT_OPTIONAL
        server_ctx.load_verify_locations(cadata=server_ca)
        client_ctx = ssl.create_default_context(cadata=client_ca)
        if client_pem:
            client_ctx.load_cert_chain(file("client.pem", client_pem))
        a, b = socket.socketpair()
        seen: dict[str, Any] = {}

        def serve() -> None:
            try:
                with server_ctx.wrap_socket(a, server_side=True) as s:
                    seen["peer"] = s.getpeercert()
            except ssl.SSLError as exc:
                seen["error"] = exc

        thread = threading.Thread(target=serve)
        thread.start()
        try:
            with client_ctx.wrap_socket(b, server_hostname=hostname):
                pass
        finally:
            thread.join(10)
        if "error" in seen:
            raise seen["error"]
        return str(tls_principal(seen.get("peer") or None))


def test_pki_serves_the_brokers_names_and_authenticates_the_operator() -> None:
    c = secured()
    pki = security.plan_pki(c, {}, NOW)
    data = data_of(c, pki)
    ca = data["c-cluster-ca-cert"]["ca.crt"]
    assert data["c-cluster-ca-cert"] == {"ca.crt": pki.cluster_ca.cert}
    assert "ca.key" not in data["c-clients-ca-cert"]
    broker = data["c-kafka-certs"]["broker-2.pem"]
    operator = pki.operator.keystore
    for name in ("c-kafka-2.c-kafka-brokers.ns1.svc", "c-kafka-bootstrap.ns1.svc"):
        principal = handshake(broker, ca, ca, name, operator)
        assert principal == security.operator_principal()
    # Brokers authenticate each other with their own certificates: the super user.
    assert handshake(broker, ca, ca, "c-kafka-bootstrap", broker) == security.broker_principal("c")
    with pytest.raises(ssl.SSLCertVerificationError):
        handshake(broker, ca, ca, "c-kafka-2.elsewhere.svc", operator)
    with pytest.raises(ssl.SSLCertVerificationError):
        handshake(broker, ca, pki.clients_ca.cert, "c-kafka-bootstrap", operator)


# Two listeners served outside only, through NodePorts, and no plain listener at all.
OUTSIDE: dict[str, Any] = {
    "plain": False,
    "clients": [
        {
            "name": "scram",
            "port": 9093,
            "type": "tls",
            "authentication": "scram-sha-512",
            "external": {
                "type": "NodePort",
                "nodePortBase": 31100,
                "advertisedHostTemplate": "172.30.0.1{id}",
            },
        },
        {
            "name": "mtls",
            "port": 9094,
            "type": "tls",
            "authentication": "tls",
            "external": {
                "type": "LoadBalancer",
                "port": 9443,
                "advertisedHostTemplate": "kafka-{id}.example.com",
            },
        },
    ],
    "interBroker": "tls",
}


def test_listeners_served_outside_advertise_their_addresses_with_no_plain_listener() -> None:
    c = secured({"listeners": OUTSIDE})
    props = started(c, 1)
    assert props["listeners"] == (
        "REPLICATION://10.0.0.7:9091,SCRAM://10.0.0.7:9093,MTLS://10.0.0.7:9094"
    )
    assert props["advertised.listeners"] == (
        "REPLICATION://c-kafka-1.c-kafka-brokers.ns1.svc:9091,"
        "SCRAM://172.30.0.11:31101,MTLS://kafka-1.example.com:9443"
    )
    assert props["listener.security.protocol.map"] == "REPLICATION:SSL,SCRAM:SASL_SSL,MTLS:SSL"
    assert props["inter.broker.listener.name"] == "REPLICATION"
    assert KafkaConfig(props).broker_id == 1  # the broker takes them

    children = {(o["kind"], o["metadata"]["name"]): o for o in resources.children(c)}
    scram = children[("Service", "c-kafka-scram-1")]["spec"]
    assert scram["type"] == "NodePort"
    assert scram["ports"] == [
        {"name": "scram", "port": 31101, "targetPort": "scram", "nodePort": 31101}
    ]
    assert scram["selector"]["statefulset.kubernetes.io/pod-name"] == "c-kafka-1"
    assert children[("Service", "c-kafka-mtls-bootstrap")]["spec"]["ports"] == [
        {"name": "mtls", "port": 9443, "targetPort": "mtls"}
    ]
    assert ("Service", "c-kafka-scram-bootstrap") not in children  # any node port bootstraps
    # Nothing plain: not in the pods, the Services or the network policy.
    pod = children[("StatefulSet", "c-kafka")]["spec"]["template"]["spec"]
    ports = {p["name"]: p["containerPort"] for p in pod["containers"][0]["ports"]}
    assert ports == {"http": 9644, "replication": 9091, "scram": 9093, "mtls": 9094}
    bootstrap = children[("Service", "c-kafka-bootstrap")]["spec"]["ports"]
    assert 9092 not in {p["port"] for p in bootstrap}
    [open_, _] = resources.network_policy(c)["spec"]["ingress"]
    assert {p["port"] for p in open_["ports"]} == {9644, 9093, 9094}
    assert c.bootstrap_servers is None
    assert c.external_bootstrap_servers(c.spec.listeners.clients[0].external) == (
        "172.30.0.10:31100,172.30.0.11:31101,172.30.0.12:31102"
    )

    # Clients outside check the address they were told: a node's IP, or the balancer's name.
    pki = security.plan_pki(c, {}, NOW)
    ca, broker, operator = pki.cluster_ca.cert, pki.brokers[1].keystore, pki.operator.keystore
    for name in ("172.30.0.11", "kafka-1.example.com", "c-kafka-1.c-kafka-brokers.ns1.svc"):
        assert handshake(broker, ca, ca, name, operator) == security.operator_principal()
    for name in ("172.30.0.12", "kafka-2.example.com"):
        with pytest.raises(ssl.SSLCertVerificationError):
            handshake(broker, ca, ca, name, operator)
    # Certificates issued before the listeners went outside no longer fit: issued anew.
    before = security.plan_pki(secured(), {}, NOW)
    again = security.plan_pki(c, data_of(secured(), before), NOW)
    assert again.brokers[1] != before.brokers[1] and again.cluster_ca == before.cluster_ca


@pytest.mark.parametrize(
    ("listeners", "complaint"),
    [
        ({**OUTSIDE, "interBroker": "plain"}, "plain: false needs interBroker: tls"),
        (
            {**OUTSIDE, "external": {"type": "LoadBalancer", "advertisedHostTemplate": "x"}},
            "plain: false leaves no plain listener for external",
        ),
        ({"plain": False, "interBroker": "tls"}, "plain: false needs a listener in clients"),
        (
            {
                "clients": [
                    {
                        "name": "a",
                        "port": 9093,
                        "external": {"type": "NodePort", "advertisedHostTemplate": "x"},
                    }
                ]
            },
            "needs nodePortBase",
        ),
    ],
)
def test_outside_listener_specs_the_operator_refuses(
    listeners: dict[str, Any], complaint: str
) -> None:
    with pytest.raises(models.SpecError, match=complaint):
        models.parse_spec(models.KafkaClusterSpec, {"listeners": listeners})


def own_certificate(
    ca: certs.KeyPair, *names: str, issued: datetime.datetime = NOW
) -> dict[str, str]:
    """A Secret's data as cert-manager writes it: a server certificate from a CA of one's own,
    valid for 30 days from `issued`."""
    pair = certs.issue(ca, certs.name("kafka.example.com"), issued, 30, list(names))
    return {"tls.crt": pair.cert, "tls.key": pair.key, "ca.crt": ca.cert}


def test_a_listener_serves_a_certificate_of_ones_own_from_a_secret() -> None:
    company = certs.new_ca("company-ca", NOW, 60)
    listeners = {
        **SECURED["listeners"],
        "clients": [
            {**SECURED["listeners"]["clients"][0], "certificate": {"secretName": "scram-tls"}},
            *SECURED["listeners"]["clients"][1:],
        ],
    }
    c = secured({"listeners": listeners})
    names = ("*.c-kafka-brokers.ns1.svc", "c-kafka-bootstrap.ns1.svc")
    secret = own_certificate(company, *names)
    pki = security.plan_pki(c, {"scram-tls": secret}, NOW)
    assert pki.listeners == {"scram": certs.KeyPair(secret["tls.key"], secret["tls.crt"])}
    stored = data_of(c, pki)["c-kafka-certs"]
    assert stored["listener-scram.pem"] == pki.listeners["scram"].keystore
    props = started(c, 1)
    assert props["listener.name.scram.ssl.keystore.location"] == "/etc/samsa/tls/listener-scram.pem"
    assert "listener.name.mtls.ssl.keystore.location" not in props
    assert (
        KafkaConfig(props)
        .for_listener("SCRAM", "ssl.keystore.location")
        .endswith("listener-scram.pem")
    )
    # A client that trusts only the company's CA connects to every broker by its name.
    own = stored["listener-scram.pem"]
    for name in ("c-kafka-1.c-kafka-brokers.ns1.svc", "c-kafka-bootstrap.ns1.svc"):
        handshake(own, company.cert, company.cert, name, None)
    with pytest.raises(ssl.SSLCertVerificationError):
        handshake(own, company.cert, pki.cluster_ca.cert, "c-kafka-bootstrap.ns1.svc", None)

    # Replacing it rolls the brokers (the rotation changes); the cluster CA's are kept.
    replaced = security.plan_pki(
        c, {**decoded(c, pki), "scram-tls": own_certificate(company, *names)}, NOW
    )
    assert replaced.rotation != pki.rotation
    assert replaced.brokers == pki.brokers and replaced.cluster_ca == pki.cluster_ca
    assert security.plan_pki(c, {**decoded(c, pki), "scram-tls": secret}, NOW).rotation == (
        pki.rotation
    )

    # What cannot be served is refused, and says why.
    other = own_certificate(company, *names)
    for data, complaint in [
        (None, "Secret scram-tls not found"),
        ({"tls.crt": secret["tls.crt"]}, "Secret scram-tls has no tls.key"),
        ({**secret, "tls.key": other["tls.key"]}, "the key is not the certificate's"),
        (
            own_certificate(company, *names, issued=NOW - datetime.timedelta(days=31)),
            "the certificate is valid from",
        ),
        ({"tls.crt": "junk", "tls.key": "junk"}, "not a PEM certificate"),
    ]:
        existing = {} if data is None else {"scram-tls": data}
        with pytest.raises(security.PkiError, match=complaint):
            security.plan_pki(c, existing, NOW)
    plain = {"name": "a", "port": 9093, "type": "plain", "certificate": {"secretName": "x"}}
    with pytest.raises(models.SpecError, match="a certificate needs type tls"):
        models.parse_spec(models.KafkaClusterSpec, {"listeners": {"clients": [plain]}})


def decoded(c: Cluster, pki: security.Pki) -> dict[str, dict[str, str]]:
    """What the Secrets read back give (base64 and back)."""
    return {n: security.decode(security.encode(d)) for n, d in data_of(c, pki).items()}


def test_pki_is_kept_then_renewed_before_expiry_with_a_new_rotation() -> None:
    c = secured()
    first = security.plan_pki(c, {}, NOW)
    again = security.plan_pki(c, decoded(c, first), NOW + datetime.timedelta(days=80))
    assert data_of(c, again) == data_of(c, first)
    assert again.rotation == first.rotation

    # A new broker gets its certificate; the others keep theirs, and nothing rolls.
    grown = secured({"brokers": {"replicas": 4}})
    bigger = security.plan_pki(grown, decoded(c, first), NOW + datetime.timedelta(days=1))
    assert {i: bigger.brokers[i] for i in range(3)} == first.brokers
    assert 3 in bigger.brokers and bigger.rotation == first.rotation

    # Within renewalDays of the end: the CAs (same keys) and every broker renewed.
    late = NOW + datetime.timedelta(days=91)
    renewed = security.plan_pki(c, decoded(c, first), late)
    assert renewed.cluster_ca.key == first.cluster_ca.key
    assert renewed.cluster_ca.cert != first.cluster_ca.cert
    assert certs.expiry(renewed.cluster_ca.cert) > late + datetime.timedelta(days=90)
    assert all(renewed.brokers[i].cert != first.brokers[i].cert for i in range(3))
    assert renewed.operator.cert != first.operator.cert
    assert renewed.rotation != first.rotation
    # Clients that hold the old CA certificate still trust the renewed brokers, and the
    # renewed CA still trusts what the old one signed (same subject, same key).
    assert certs.signed_by(renewed.brokers[0].cert, first.cluster_ca)
    assert certs.signed_by(first.brokers[0].cert, renewed.cluster_ca)


def test_forced_renewal_reissues_the_brokers_and_changes_the_rotation() -> None:
    c = secured()
    first = security.plan_pki(c, {}, NOW)
    forced = security.plan_pki(c, decoded(c, first), NOW + datetime.timedelta(minutes=1), True)
    assert forced.cluster_ca == first.cluster_ca
    assert all(forced.brokers[i].cert != first.brokers[i].cert for i in range(3))
    assert forced.rotation != first.rotation


def test_a_new_ca_key_is_rolled_out_in_three_steps_without_a_moment_of_distrust() -> None:
    c = secured()
    first = security.plan_pki(c, {}, NOW)
    held = decoded(c, first)
    del held["c-cluster-ca"]  # a new key, as when a CA of one's own is replaced
    # 1. The new CA is trusted beside the old; every certificate is kept; the brokers roll.
    one = security.plan_pki(c, held, NOW, rolled=True)
    assert one.cluster_ca.cert != first.cluster_ca.cert
    assert one.trusted == (first.cluster_ca.cert, one.cluster_ca.cert)
    assert one.brokers == first.brokers and one.operator == first.operator
    assert one.rotation != first.rotation
    assert decoded(c, one)["c-cluster-ca-cert"]["ca.crt"] == one.ca_bundle
    # Nothing more until that roll is over.
    waiting = security.plan_pki(c, decoded(c, one), NOW, rolled=False)
    assert waiting.brokers == first.brokers and waiting.rotation == one.rotation
    # 2. Rolled: the brokers' and the operator's certificates are of the new key; the old
    # CA is still trusted; the brokers roll.
    two = security.plan_pki(c, decoded(c, one), NOW, rolled=True)
    assert all(certs.signed_by(kp.cert, one.cluster_ca) for kp in two.brokers.values())
    assert certs.signed_by(two.operator.cert, one.cluster_ca)
    assert two.trusted == one.trusted and two.rotation != one.rotation
    waiting = security.plan_pki(c, decoded(c, two), NOW, rolled=False)
    assert waiting.trusted == one.trusted and waiting.rotation == two.rotation
    # 3. Rolled: the old CA is let go; the brokers roll; then nothing changes any more.
    three = security.plan_pki(c, decoded(c, two), NOW, rolled=True)
    assert three.trusted == (one.cluster_ca.cert,) and three.brokers == two.brokers
    assert three.rotation != two.rotation
    assert security.plan_pki(c, decoded(c, three), NOW, rolled=True).rotation == three.rotation
    # A roll mixes brokers of two steps: each verifies the other, either way round.
    steps = [first, one, two, three]
    for before, after in itertools.pairwise(steps):
        for server, client in ((before, after), (after, before)):
            principal = handshake(
                server.brokers[0].keystore,
                server.ca_bundle,
                client.ca_bundle,
                "c-kafka-0.c-kafka-brokers.ns1.svc",
                client.brokers[1].keystore,
            )
            assert principal == security.broker_principal("c")


def test_a_ca_of_ones_own_signs_the_brokers_and_its_key_stays_in_its_secret() -> None:
    company, people = certs.new_ca("company-ca", NOW, 90), certs.new_ca("people-ca", NOW, 90)
    own = {
        "certificates": {
            "validityDays": 30,
            "renewalDays": 10,
            "clusterCa": {"secretName": "company-ca"},
            "clientsCa": {"secretName": "people-ca", "certificate": "ca.crt", "key": "ca.key"},
        }
    }
    c = secured(own)
    existing = {
        "company-ca": {"tls.crt": company.cert, "tls.key": company.key},
        "people-ca": {"ca.crt": people.cert, "ca.key": people.key},
    }
    pki = security.plan_pki(c, existing, NOW)
    assert pki.cluster_ca == company and pki.clients_ca == people
    assert all(certs.signed_by(kp.cert, company) for kp in pki.brokers.values())
    data = data_of(c, pki)
    assert "c-cluster-ca" not in data and "c-clients-ca" not in data  # no copy of the keys
    assert data["c-cluster-ca-cert"] == {"ca.crt": company.cert}
    assert data["c-clients-ca-cert"] == {"ca.crt": people.cert}
    assert security.own_secret_names(c.spec) == ["company-ca", "people-ca"]
    # Clients that trust the company's CA trust the brokers.
    principal = handshake(
        pki.brokers[2].keystore,
        company.cert,
        company.cert,
        "c-kafka-bootstrap",
        pki.operator.keystore,
    )
    assert principal == security.operator_principal()
    # A CA near its end cuts its certificates short: they are not issued again at every
    # reconcile (which would roll the brokers without end), however soon they end.
    brief = certs.new_ca("brief-ca", NOW, 20)
    short = secured({"certificates": {"renewalDays": 30, "clusterCa": {"secretName": "brief"}}})
    mine = {"brief": {"tls.crt": brief.cert, "tls.key": brief.key}}
    once = security.plan_pki(short, mine, NOW)
    again = security.plan_pki(short, {**decoded(short, once), **mine}, NOW)
    assert again.brokers == once.brokers and again.operator == once.operator
    assert again.rotation == once.rotation
    server = certs.issue(company, certs.name("x"), NOW, 10, ["x"])
    for data_, complaint in [
        ({}, "certificates.clusterCa: Secret company-ca not found"),
        ({"company-ca": {"tls.crt": server.cert, "tls.key": server.key}}, "is not a CA's"),
    ]:
        with pytest.raises(security.PkiError, match=complaint):
            security.plan_pki(
                c, {**existing, **data_} if data_ else {"people-ca": existing["people-ca"]}, NOW
            )


# -- KafkaUser --------------------------------------------------------------------------------


def user_spec(kind: str, acls: list[dict[str, Any]] | None = None) -> models.KafkaUserSpec:
    raw: dict[str, Any] = {"clusterRef": "c", "authentication": {"type": kind}}
    if acls is not None:
        raw["authorization"] = {"acls": acls}
    return models.parse_spec(models.KafkaUserSpec, raw)


def test_user_acls_in_kafkas_terms_and_the_plan_to_reach_them() -> None:
    spec = user_spec(
        "scram-sha-512",
        [
            {"resource": {"type": "topic", "name": "a"}, "operations": ["Write", "Describe"]},
            {
                "resource": {"type": "group", "name": "g-", "patternType": "prefix"},
                "operations": ["Read"],
                "type": "deny",
            },
            {"resource": {"type": "cluster"}, "operations": ["IdempotentWrite"]},
        ],
    )
    acls = users.desired_acls(spec, "User:alice")
    assert sorted(acls) == [
        users.Acl(
            "BROKER", "kafka-cluster", "LITERAL", "User:alice", "*", "IDEMPOTENT_WRITE", "ALLOW"
        ),
        users.Acl("GROUP", "g-", "PREFIXED", "User:alice", "*", "READ", "DENY"),
        users.Acl("TOPIC", "a", "LITERAL", "User:alice", "*", "DESCRIBE", "ALLOW"),
        users.Acl("TOPIC", "a", "LITERAL", "User:alice", "*", "WRITE", "ALLOW"),
    ]
    stale = users.Acl("TOPIC", "b", "LITERAL", "User:alice", "*", "READ", "ALLOW")
    kept = users.Acl("TOPIC", "a", "LITERAL", "User:alice", "*", "WRITE", "ALLOW")
    plan = users.plan_acls(acls, {stale, kept})
    assert plan.delete == [stale]
    assert kept not in plan.create and len(plan.create) == 3


def test_user_acl_operations_are_refused_unless_kafkas() -> None:
    with pytest.raises(models.SpecError, match="operations"):
        user_spec("tls", [{"resource": {"type": "topic"}, "operations": ["Eat"]}])


def test_scram_secret_keeps_its_password() -> None:
    first = users.scram_secret("alice", {})
    assert len(first["password"]) >= 32
    assert 'username="alice"' in first["sasl.jaas.config"]
    assert users.scram_secret("alice", first) == first
    assert users.scram_secret("bob", {})["password"] != first["password"]


def test_tls_user_certificate_is_the_principal_the_broker_sees() -> None:
    c = secured()
    pki = security.plan_pki(c, {}, NOW)
    data = users.tls_secret("alice", {}, pki.clients_ca, NOW, 100, 10)
    assert users.tls_secret("alice", data, pki.clients_ca, NOW, 100, 10) == data
    ca = pki.cluster_ca.cert
    broker = pki.brokers[0].keystore
    seen = handshake(broker, pki.clients_ca.cert, ca, "c-kafka-bootstrap", data["user.pem"])
    assert seen == security.user_principal("alice", "tls") == "User:CN=alice"
    # Near its end, once the clients CA is renewed (as the cluster's reconcile renews it
    # first), the user's certificate is issued again.
    later = NOW + datetime.timedelta(days=95)
    late = users.tls_secret("alice", data, pki.clients_ca, later, 100, 10)
    assert late == data  # a certificate the CA's own end cuts short gains nothing anew
    renewed = certs.renew_ca(pki.clients_ca, later, 100)
    late = users.tls_secret("alice", data, renewed, later, 100, 10)
    assert late["user.crt"] != data["user.crt"]


def test_the_brokers_own_tls_code_takes_the_operators_pki(tmp_path: Path) -> None:
    """The Secret as the pod mounts it and the properties as the broker starts with them:
    the broker's TLS contexts load, and one broker reaches another's replication listener
    with mutual TLS and the hostname checked (Kafka's default, https)."""
    from samsa.security.sasl_config import enabled_mechanisms
    from samsa.security.tls import client_context, server_context

    c = secured()
    pki = security.plan_pki(c, {}, NOW)
    for name, text in security.secret_data(c, pki)[security.broker_certs_secret("c")].items():
        (tmp_path / name).write_text(text)
    props = {k: v.replace(security.TLS_DIR, str(tmp_path)) for k, v in started(c, 0).items()}
    config = KafkaConfig(props)
    for listener in ("REPLICATION", "SCRAM", "MTLS"):
        server_context(config, listener)
    assert enabled_mechanisms(config, "SCRAM") == ["SCRAM-SHA-512"]
    server = server_context(config, "REPLICATION")
    client = client_context(config, "REPLICATION")
    assert client.check_hostname
    a, b = socket.socketpair()
    seen: dict[str, Any] = {}

    def serve() -> None:
        with server.wrap_socket(a, server_side=True) as s:
            seen["peer"] = s.getpeercert()

    thread = threading.Thread(target=serve)
    thread.start()
    with client.wrap_socket(b, server_hostname=c.broker_host(0)):
        pass
    thread.join(10)
    assert str(tls_principal(seen["peer"])) == security.broker_principal("c")


def test_the_secured_init_container_fills_in_the_tls_folder(tmp_path: Path) -> None:
    """The init container writes the pod's IP and the TLS Secret's mount into the broker's
    properties (the node agent of the tests mounts it elsewhere, as it maps the command)."""
    import subprocess

    c = secured()
    [init] = resources.broker_statefulset(c)["spec"]["template"]["spec"]["initContainers"]
    assert {"name": "tls", "mountPath": security.TLS_DIR, "readOnly": True} in init["volumeMounts"]
    script = init["command"][2]
    folders = {d: tmp_path / d for d in ("tls", "config", "run", "podinfo")}
    for folder in folders.values():
        folder.mkdir()
    (folders["config"] / "broker-1.properties").write_text(
        resources.render_properties(resources.broker_properties(c, 1))
    )
    (folders["podinfo"] / "annotations").write_text("")
    for path, folder in (
        (security.TLS_DIR, "tls"),
        (resources.CONFIG_DIR, "config"),
        (resources.RUN_DIR, "run"),
        (resources.PODINFO_DIR, "podinfo"),
    ):
        script = script.replace(path, str(folders[folder]))
    env = {
        "HOSTNAME": "c-kafka-1",
        "RACK_ENABLED": "false",
        "POD_IP": "10.1.2.3",
        "PATH": "/usr/bin:/bin",
    }
    subprocess.run(["sh", "-c", script], env=env, check=True, timeout=10)
    written = (folders["run"] / "server.properties").read_text()
    assert f"ssl.keystore.location={folders['tls']}/broker-1.pem\n" in written
    assert f"ssl.truststore.location={folders['tls']}/ca.crt\n" in written
    assert "$(" not in written and "listeners=PLAINTEXT://10.1.2.3:9092," in written
    # An unsecured cluster's script is what it was: its pods do not roll for this.
    plain = Cluster("c", "ns1", "u", models.KafkaClusterSpec())
    [init] = resources.broker_statefulset(plain)["spec"]["template"]["spec"]["initContainers"]
    assert init["command"][2] == resources._COMPOSE_CONFIG
