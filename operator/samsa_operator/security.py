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
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from samsa_operator import certs
from samsa_operator.certs import KeyPair
from samsa_operator.models import REPLICATION_PORT, CertificateSecret, KafkaClusterSpec

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
    listeners: dict[str, KeyPair]
    # The CA certificates the brokers, the operator and clients trust: the CA's alone, or
    # while a CA's key is replaced, the old ones beside it.
    trusted: tuple[str, ...]
    trusted_clients: tuple[str, ...]
    # The CAs are the user's own: their keys stay in the user's Secrets.
    own_cluster_ca: bool
    own_clients_ca: bool

    @property
    def rotation(self) -> str:
        """Changes when the brokers must restart to serve new certificates: a CA renewed or
        trusted, the brokers' certificates renewed (together; a new broker's first one is no
        change), or a listener's own certificate replaced."""
        issued = min(
            (kp.certificate.not_valid_before_utc for kp in self.brokers.values()),
            default=None,
        )
        own = [kp.keystore for _, kp in sorted(self.listeners.items())]
        steady = certs.fingerprint(self.cluster_ca.cert, self.clients_ca.cert, str(issued), *own)
        # While a CA's key changes: what is trusted, and which brokers' certificates are
        # not yet of the new key (a reissue within the second of the last is a change too).
        # Without one, the fingerprint is the one clusters had before, and rolls nothing.
        changing = []
        if self.ca_bundle != self.cluster_ca.cert:
            changing += ["trusted", self.ca_bundle]
        if self.clients_ca_bundle != self.clients_ca.cert:
            changing += ["trusted clients", self.clients_ca_bundle]
        old = sorted(
            i for i, kp in self.brokers.items() if not certs.signed_by(kp.cert, self.cluster_ca)
        )
        if old:
            changing += ["issued by an older key", str(old)]
        return certs.fingerprint(steady, *changing) if changing else steady

    def ends(self) -> dict[str, float]:
        """When each certificate ends (Unix time), by name: what expiry alerts watch."""
        pairs = {"cluster-ca": self.cluster_ca, "clients-ca": self.clients_ca}
        pairs |= {f"broker-{i}": kp for i, kp in self.brokers.items()}
        pairs |= {"operator": self.operator}
        pairs |= {f"listener-{n}": kp for n, kp in self.listeners.items()}
        return {n: kp.certificate.not_valid_after_utc.timestamp() for n, kp in pairs.items()}

    @property
    def ca_bundle(self) -> str:
        return "".join(self.trusted)

    @property
    def clients_ca_bundle(self) -> str:
        return "".join(self.trusted_clients)


def listener_certificates(spec: KafkaClusterSpec) -> dict[str, CertificateSecret]:
    """Listener name -> where its own certificate is, for the listeners that have one."""
    return {c.name: c.certificate for c in spec.listeners.clients if c.certificate}


def listener_keystore(listener: str) -> str:
    return f"listener-{listener}.pem"


def _own_certificate(
    what: str, where: CertificateSecret, existing: Mapping[str, Data], now: datetime.datetime
) -> KeyPair:
    data = existing.get(where.secret_name)
    said = f"{what}: Secret {where.secret_name}"
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


def own_secret_names(spec: KafkaClusterSpec) -> list[str]:
    """The user's Secrets the PKI reads: their own CAs' and listeners' certificates."""
    found = [spec.certificates.cluster_ca, spec.certificates.clients_ca]
    found += listener_certificates(spec).values()
    return sorted({w.secret_name for w in found if w is not None})


def _own_ca(
    what: str, where: CertificateSecret, existing: Mapping[str, Data], now: datetime.datetime
) -> KeyPair:
    pair = _own_certificate(what, where, existing, now)
    if not certs.is_ca(pair.cert):
        raise PkiError(f"{what}: Secret {where.secret_name}: the certificate is not a CA's")
    return pair


def _trust(held: list[str], ca: KeyPair, settled: bool) -> tuple[str, ...]:
    """The CA certificates to trust. A CA renewed with its own key replaces its old
    certificate at once (what it signed verifies with either). A new key is trusted beside
    the old ones first, and the old ones are let go once `settled`: every broker serves a
    certificate of the new key and runs trusting it."""
    others = [c for c in held if certs.key_id(c) != certs.key_id(ca.cert)]
    if others and not settled:
        return (*others, ca.cert)
    return (ca.cert,)


def plan_pki(
    cluster: Cluster,
    existing: Mapping[str, Data],
    now: datetime.datetime,
    renew: bool = False,
    rolled: bool = True,
) -> Pki:
    """The cluster's PKI: what the Secrets hold, kept; what is missing, due for renewal or
    no longer fitting (SANs, signer), issued anew. `renew`: the brokers' certificates are
    renewed now (the force-renew annotation). The user's own CAs and listeners' certificates
    are taken from their Secrets in `existing`, or a PkiError says why they cannot be.

    `rolled`: every broker runs with the certificates last stored. A CA's new key is rolled
    out in three steps, each waiting for the roll before it: trusted beside the old one;
    the brokers' and the operator's certificates issued from it; the old one let go."""
    name, spec = cluster.name, cluster.spec.certificates
    if spec.cluster_ca is not None:
        cluster_ca = _own_ca("certificates.clusterCa", spec.cluster_ca, existing, now)
    else:
        held_ca = _pair(existing.get(cluster_ca_secret(name)), "ca.key", "ca.crt")
        cluster_ca = _ca(held_ca, f"{name}-cluster-ca", now, spec)
    if spec.clients_ca is not None:
        clients_ca = _own_ca("certificates.clientsCa", spec.clients_ca, existing, now)
    else:
        held_clients = _pair(existing.get(clients_ca_secret(name)), "ca.key", "ca.crt")
        clients_ca = _ca(held_clients, f"{name}-clients-ca", now, spec)
    held = existing.get(broker_certs_secret(name)) or {}
    trusted_before = certs.split(held.get("ca.crt"))
    current = {i: _split_keystore(held.get(f"broker-{i}.pem")) for i in range(cluster.broker_count)}
    # The brokers may be given certificates of the CA's key once they all trust it (a new
    # cluster trusts nothing yet).
    trusting = not trusted_before or (
        rolled and certs.key_id(cluster_ca.cert) in {certs.key_id(c) for c in trusted_before}
    )

    def from_trusted_ca(cert: str) -> bool:
        if certs.signed_by(cert, cluster_ca):
            return True
        # Of a CA trusted before: kept until the brokers trust the new one.
        return not trusting and any(certs.signed_by_cert(cert, c) for c in trusted_before)

    def fits(i: int, kp: KeyPair | None) -> bool:
        return (
            kp is not None
            and from_trusted_ca(kp.cert)
            and sorted(certs.san_names(kp.cert)) == sorted(broker_san_names(cluster, i))
        )

    renew_all = renew or any(
        kp and certs.renewable(kp.cert, cluster_ca, now, spec.renewal_days)
        for kp in current.values()
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
        or not from_trusted_ca(operator.cert)
        or certs.renewable(operator.cert, cluster_ca, now, spec.renewal_days)
    ):
        operator = certs.issue(cluster_ca, operator_name(), now, spec.validity_days, server=False)
    settled = rolled and all(
        kp is not None and certs.signed_by(kp.cert, cluster_ca) for kp in current.values()
    )
    # A clients CA's old keys stay trusted until they expire: the users' certificates they
    # signed are renewed by the KafkaUsers' reconciles, and their holders take time to
    # pick the new ones up.
    clients_before = [
        c for c in certs.split(held.get("clients-ca.crt")) if not certs.due(c, now, 0)
    ]
    own = {
        listener: _own_certificate(f"listener {listener}", where, existing, now)
        for listener, where in listener_certificates(cluster.spec).items()
    }
    return Pki(
        cluster_ca,
        clients_ca,
        brokers,
        operator,
        own,
        _trust(trusted_before, cluster_ca, settled),
        _trust(clients_before, clients_ca, settled=False),
        own_cluster_ca=spec.cluster_ca is not None,
        own_clients_ca=spec.clients_ca is not None,
    )


def secret_data(cluster: Cluster, pki: Pki) -> dict[str, dict[str, str]]:
    """Secret name -> its data (text), for every Secret of the cluster's PKI."""
    name = cluster.name
    brokers = {f"broker-{i}.pem": kp.keystore for i, kp in sorted(pki.brokers.items())}
    brokers |= {listener_keystore(n): kp.keystore for n, kp in sorted(pki.listeners.items())}
    out = {
        cluster_ca_secret(name): {"ca.key": pki.cluster_ca.key, "ca.crt": pki.cluster_ca.cert},
        cluster_ca_cert_secret(name): {"ca.crt": pki.ca_bundle},
        clients_ca_secret(name): {"ca.key": pki.clients_ca.key, "ca.crt": pki.clients_ca.cert},
        clients_ca_cert_secret(name): {"ca.crt": pki.clients_ca_bundle},
        broker_certs_secret(name): {
            **brokers,
            "ca.crt": pki.ca_bundle,
            "clients-ca.crt": pki.clients_ca_bundle,
        },
        operator_certs_secret(name): {
            "tls.key": pki.operator.key,
            "tls.crt": pki.operator.cert,
            "ca.crt": pki.ca_bundle,
        },
    }
    # A CA of the user's own keeps its key in the user's Secret: no copy of it is made.
    if pki.own_cluster_ca:
        del out[cluster_ca_secret(name)]
    if pki.own_clients_ca:
        del out[clients_ca_secret(name)]
    return out


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
    port = cluster.internal_port
    bound = [(first, port, "PLAINTEXT", f"{pod_ip}:{port}")] if listeners.plain else []
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
