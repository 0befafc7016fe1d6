"""A secured KafkaCluster, pure: its PKI (which certificates to keep, issue or renew), the
Secrets that hold it, the security properties of each broker, and the principals.

- Two CAs per cluster, as Strimzi has: the cluster CA signs the brokers' and the operator's
  certificates; the clients CA signs the KafkaUsers' certificates. Their certificates are
  published in `<cluster>-cluster-ca-cert` and `<cluster>-clients-ca-cert`.
- Every broker serves TLS with its own certificate (its pod and Service names as SANs), and
  the REPLICATION listener (port 9091, mutual TLS against the cluster CA) is where the brokers
  (when `interBroker: tls`) and the operator talk to the cluster as super users.
- The brokers' certificates are renewed together, `renewalDays` before they expire; the
  rotation fingerprint goes into the pod template, so a renewal rolls every broker through
  the day-2 rolling restart.
- A TLS listener may serve a certificate of the user's own instead (cert-manager's, a
  company's or a public CA's), from a Secret the user keeps: copied into the brokers'
  Secret, and rolled out like a renewal when it is replaced.
"""

from __future__ import annotations

import base64
import datetime
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from samsa_operator import certs
from samsa_operator.certs import KeyPair
from samsa_operator.models import REPLICATION_PORT, KafkaClusterSpec, ListenerCertificate

if TYPE_CHECKING:
    from samsa_operator.resources import Cluster

TLS_DIR = "/etc/samsa/tls"
# In a broker's properties: where its TLS Secret is mounted, filled in by the init container
# (which mounts it too), as it fills in the pod's IP.
TLS_PLACEHOLDER = "$(TLS_DIR)"
REPLICATION = "REPLICATION"
ORGANIZATION = "samsa.dev"
OPERATOR_CN = "samsa-operator"
AUTHORIZER = "kafka.security.authorizer.AclAuthorizer"
SCRAM = "SCRAM-SHA-512"

Data = Mapping[str, str]


# -- names ------------------------------------------------------------------------------------


def cluster_ca_secret(cluster: str) -> str:
    return f"{cluster}-cluster-ca"


def cluster_ca_cert_secret(cluster: str) -> str:
    return f"{cluster}-cluster-ca-cert"


def clients_ca_secret(cluster: str) -> str:
    return f"{cluster}-clients-ca"


def clients_ca_cert_secret(cluster: str) -> str:
    return f"{cluster}-clients-ca-cert"


def broker_certs_secret(cluster: str) -> str:
    return f"{cluster}-kafka-certs"


def operator_certs_secret(cluster: str) -> str:
    return f"{cluster}-operator-certs"


def secret_names(cluster: str) -> list[str]:
    return [
        cluster_ca_secret(cluster),
        cluster_ca_cert_secret(cluster),
        clients_ca_secret(cluster),
        clients_ca_cert_secret(cluster),
        broker_certs_secret(cluster),
        operator_certs_secret(cluster),
    ]


def broker_name(cluster: str) -> certs.x509.Name:
    return certs.name(f"{cluster}-kafka", ORGANIZATION)


def operator_name() -> certs.x509.Name:
    return certs.name(OPERATOR_CN, ORGANIZATION)


def broker_principal(cluster: str) -> str:
    return f"User:{broker_name(cluster).rfc4514_string()}"


def operator_principal() -> str:
    return f"User:{operator_name().rfc4514_string()}"


def super_users(cluster: str, spec: KafkaClusterSpec) -> list[str]:
    extra = spec.authorization.super_users if spec.authorization else []
    return [broker_principal(cluster), operator_principal(), *extra]


def user_principal(username: str, authentication: str) -> str:
    """A KafkaUser's principal: its name over SASL, its certificate's subject over TLS."""
    if authentication == "tls":
        return f"User:{certs.name(username).rfc4514_string()}"
    return f"User:{username}"


# -- the PKI ----------------------------------------------------------------------------------


class PkiError(ValueError):
    """A certificate the user gave that the brokers cannot serve; the message says which."""


@dataclass(frozen=True)
class Pki:
    cluster_ca: KeyPair
    clients_ca: KeyPair
    brokers: dict[int, KeyPair]
    operator: KeyPair
    # Listener name -> the certificate of the user's own that its brokers serve.
    listeners: dict[str, KeyPair] = field(default_factory=dict)

    @property
    def rotation(self) -> str:
        """Changes when the brokers must restart to serve new certificates: a CA renewed,
        the brokers' certificates renewed (together; a new broker's first one is no change),
        or a listener's own certificate replaced."""
        issued = min(
            (kp.certificate.not_valid_before_utc for kp in self.brokers.values()),
            default=None,
        )
        own = [kp.keystore for _, kp in sorted(self.listeners.items())]
        return certs.fingerprint(self.cluster_ca.cert, self.clients_ca.cert, str(issued), *own)


def listener_certificates(spec: KafkaClusterSpec) -> dict[str, ListenerCertificate]:
    """Listener name -> where its own certificate is, for the listeners that have one."""
    return {c.name: c.certificate for c in spec.listeners.clients if c.certificate}


def listener_keystore(listener: str) -> str:
    return f"listener-{listener}.pem"


def _own_certificate(
    listener: str, where: ListenerCertificate, existing: Mapping[str, Data], now: datetime.datetime
) -> KeyPair:
    data = existing.get(where.secret_name)
    said = f"listener {listener}: Secret {where.secret_name}"
    if data is None:
        raise PkiError(f"{said} not found")
    missing = [k for k in (where.certificate, where.key) if not data.get(k)]
    if missing:
        raise PkiError(f"{said} has no {' or '.join(missing)}")
    pair = KeyPair(data[where.key], data[where.certificate])
    wrong = certs.problem(pair, now)
    if wrong is not None:
        raise PkiError(f"{said}: {wrong}")
    return pair


def _pair(data: Data | None, key: str, cert: str) -> KeyPair | None:
    if not data or not data.get(key) or not data.get(cert):
        return None
    return KeyPair(data[key], data[cert])


def _split_keystore(pem: str | None) -> KeyPair | None:
    if not pem:
        return None
    marker = "-----BEGIN CERTIFICATE-----"
    key, sep, rest = pem.partition(marker)
    return KeyPair(key.strip() + "\n", sep + rest) if sep and key.strip() else None


def _ca(existing: KeyPair | None, cn: str, now: datetime.datetime, spec: Any) -> KeyPair:
    if existing is None:
        return certs.new_ca(cn, now, spec.validity_days)
    if certs.due(existing.cert, now, spec.renewal_days):
        return certs.renew_ca(existing, now, spec.validity_days)
    return existing


def broker_san_names(cluster: Cluster, broker_id: int) -> list[str]:
    ns = cluster.namespace
    pod = cluster.broker_pod(broker_id)
    names = [
        f"{pod}.{cluster.broker_headless}.{ns}.svc",
        f"{pod}.{cluster.broker_headless}.{ns}.svc.cluster.local",
        f"{pod}.{cluster.broker_headless}.{ns}",
        f"{pod}.{cluster.broker_headless}",
    ]
    for service in (cluster.bootstrap, cluster.broker_headless):
        names += [service, f"{service}.{ns}", f"{service}.{ns}.svc"]
        names.append(f"{service}.{ns}.svc.cluster.local")
    external = cluster.external_address(broker_id)
    if external is not None and not external[0].replace(".", "").isdigit():
        names.append(external[0])
    # A TLS listener served outside: clients check the address they were told, a node's IP
    # address as much as a name.
    for c in cluster.spec.listeners.clients:
        if c.external is not None and c.type == "tls":
            host = c.external.address(broker_id)[0]
            if host not in names:
                names.append(host)
    return names


def plan_pki(
    cluster: Cluster, existing: Mapping[str, Data], now: datetime.datetime, renew: bool = False
) -> Pki:
    """The cluster's PKI: what the Secrets hold, kept; what is missing, due for renewal or
    no longer fitting (SANs, signer), issued anew. `renew`: the brokers' certificates are
    renewed now (the force-renew annotation). The listeners' own certificates are taken from
    their Secrets in `existing`, or a PkiError says why they cannot be."""
    name, spec = cluster.name, cluster.spec.certificates
    cluster_ca = _ca(
        _pair(existing.get(cluster_ca_secret(name)), "ca.key", "ca.crt"),
        f"{name}-cluster-ca",
        now,
        spec,
    )
    clients_ca = _ca(
        _pair(existing.get(clients_ca_secret(name)), "ca.key", "ca.crt"),
        f"{name}-clients-ca",
        now,
        spec,
    )
    held = existing.get(broker_certs_secret(name)) or {}
    current = {i: _split_keystore(held.get(f"broker-{i}.pem")) for i in range(cluster.broker_count)}

    def fits(i: int, kp: KeyPair | None) -> bool:
        return (
            kp is not None
            and certs.signed_by(kp.cert, cluster_ca)
            and sorted(certs.san_names(kp.cert)) == sorted(broker_san_names(cluster, i))
        )

    renew_all = renew or any(
        kp and certs.due(kp.cert, now, spec.renewal_days) for kp in current.values()
    )
    brokers = {}
    for i, kp in current.items():
        if renew_all or kp is None or not fits(i, kp):
            kp = certs.issue(
                cluster_ca, broker_name(name), now, spec.validity_days, broker_san_names(cluster, i)
            )
        brokers[i] = kp
    operator = _pair(existing.get(operator_certs_secret(name)), "tls.key", "tls.crt")
    if (
        operator is None
        or not certs.signed_by(operator.cert, cluster_ca)
        or certs.due(operator.cert, now, spec.renewal_days)
    ):
        operator = certs.issue(cluster_ca, operator_name(), now, spec.validity_days, server=False)
    own = {
        listener: _own_certificate(listener, where, existing, now)
        for listener, where in listener_certificates(cluster.spec).items()
    }
    return Pki(cluster_ca, clients_ca, brokers, operator, own)


def secret_data(cluster: Cluster, pki: Pki) -> dict[str, dict[str, str]]:
    """Secret name -> its data (text), for every Secret of the cluster's PKI."""
    name = cluster.name
    brokers = {f"broker-{i}.pem": kp.keystore for i, kp in sorted(pki.brokers.items())}
    brokers |= {listener_keystore(n): kp.keystore for n, kp in sorted(pki.listeners.items())}
    return {
        cluster_ca_secret(name): {"ca.key": pki.cluster_ca.key, "ca.crt": pki.cluster_ca.cert},
        cluster_ca_cert_secret(name): {"ca.crt": pki.cluster_ca.cert},
        clients_ca_secret(name): {"ca.key": pki.clients_ca.key, "ca.crt": pki.clients_ca.cert},
        clients_ca_cert_secret(name): {"ca.crt": pki.clients_ca.cert},
        broker_certs_secret(name): {
            **brokers,
            "ca.crt": pki.cluster_ca.cert,
            "clients-ca.crt": pki.clients_ca.cert,
        },
        operator_certs_secret(name): {
            "tls.key": pki.operator.key,
            "tls.crt": pki.operator.cert,
            "ca.crt": pki.cluster_ca.cert,
        },
    }


def encode(data: Mapping[str, str]) -> dict[str, str]:
    return {k: base64.b64encode(v.encode()).decode() for k, v in data.items()}


def decode(data: Mapping[str, str] | None) -> dict[str, str]:
    return {k: base64.b64decode(v).decode() for k, v in (data or {}).items()}


# -- broker properties ------------------------------------------------------------------------


def listener_properties(cluster: Cluster, broker_id: int, pod_ip: str) -> dict[str, str]:
    """listeners, advertised.listeners, the protocol map and the security settings of one
    broker of a secured cluster. TLS listeners advertise the pod's DNS name, which its
    certificate names; plain ones keep the pod's IP."""
    spec = cluster.spec
    listeners = spec.listeners
    host = cluster.broker_host(broker_id)
    first = "INTERNAL" if listeners.external is not None else "PLAINTEXT"
    # (name, port, protocol, advertised host:port)
    bound = [(first, cluster.internal_port, "PLAINTEXT", f"{pod_ip}:{cluster.internal_port}")]
    if not listeners.plain:
        bound.clear()
    bound.append((REPLICATION, REPLICATION_PORT, "SSL", f"{host}:{REPLICATION_PORT}"))
    for c in listeners.clients:
        advertised = f"{host if c.type == 'tls' else pod_ip}:{c.port}"
        if c.external is not None:
            advertised = "{}:{}".format(*c.external.address(broker_id))
        bound.append((c.name.upper(), c.port, c.security_protocol, advertised))
    props: dict[str, str] = {}
    listen = [f"{n}://{pod_ip}:{port}" for n, port, _, _ in bound]
    advertise = [f"{n}://{adv}" for n, _, _, adv in bound]
    protocols = [f"{n}:{proto}" for n, _, proto, _ in bound]
    external = cluster.external_address(broker_id)
    if external is not None:
        from samsa_operator.resources import external_container_port

        listen.append(f"EXTERNAL://{pod_ip}:{external_container_port(cluster)}")
        advertise.append(f"EXTERNAL://{external[0]}:{external[1]}")
        protocols.append("EXTERNAL:PLAINTEXT")
    props["listeners"] = ",".join(listen)
    props["advertised.listeners"] = ",".join(advertise)
    props["listener.security.protocol.map"] = ",".join(protocols)
    props["inter.broker.listener.name"] = REPLICATION if listeners.inter_broker == "tls" else first
    props["ssl.keystore.type"] = "PEM"
    props["ssl.keystore.location"] = f"{TLS_PLACEHOLDER}/broker-{broker_id}.pem"
    props["ssl.truststore.type"] = "PEM"
    props["ssl.truststore.location"] = f"{TLS_PLACEHOLDER}/ca.crt"
    props[f"listener.name.{REPLICATION.lower()}.ssl.client.auth"] = "required"
    mechanisms = False
    for c in listeners.clients:
        prefix = f"listener.name.{c.name}."
        if c.certificate is not None:
            props[prefix + "ssl.keystore.location"] = (
                f"{TLS_PLACEHOLDER}/{listener_keystore(c.name)}"
            )
        if c.authentication == "tls":
            props[prefix + "ssl.client.auth"] = "required"
            props[prefix + "ssl.truststore.location"] = f"{TLS_PLACEHOLDER}/clients-ca.crt"
        elif c.authentication == "scram-sha-512":
            props[prefix + "sasl.enabled.mechanisms"] = SCRAM
            mechanisms = True
    if mechanisms:
        props["sasl.enabled.mechanisms"] = SCRAM
    if spec.authorization is not None:
        props["authorizer.class.name"] = AUTHORIZER
        props["super.users"] = ";".join(super_users(cluster.name, spec))
    return props


# -- the operator's connection ----------------------------------------------------------------


@dataclass(frozen=True)
class ClientTls:
    """What a client needs for mutual TLS: the CA to trust, its certificate and key (PEM)."""

    ca: str
    cert: str
    key: str

    @property
    def fingerprint(self) -> str:
        return certs.fingerprint(self.ca, self.cert)


def operator_tls(data: Data) -> ClientTls | None:
    """The operator's credentials from its Secret's (decoded) data."""
    if not all(data.get(k) for k in ("ca.crt", "tls.crt", "tls.key")):
        return None
    return ClientTls(data["ca.crt"], data["tls.crt"], data["tls.key"])


def operator_bootstrap(cluster: Cluster) -> str:
    return f"{cluster.bootstrap}.{cluster.namespace}.svc:{REPLICATION_PORT}"
