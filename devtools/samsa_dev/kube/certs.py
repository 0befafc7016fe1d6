"""The control plane's keys and certificates, made with `cryptography`: a cluster CA, the API
server's serving certificate (127.0.0.1 and the in-cluster names), an admin client
certificate (group system:masters) and the ServiceAccount token signing key pair; and, for the
real nodes, client certificates issued by the same CA (`client`): each kubelet's
(system:node:<name>), kube-proxy's, and the API server's own for calling the kubelets."""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

VALID = datetime.timedelta(days=365)
API_NAMES = (
    "localhost",
    "kubernetes",
    "kubernetes.default",
    "kubernetes.default.svc",
    "kubernetes.default.svc.cluster.local",
)


@dataclass(frozen=True)
class Pki:
    """Where the files are, in one folder."""

    folder: Path

    def __getattr__(self, name: str) -> Path:
        files = {
            "ca_cert": "ca.crt",
            "ca_key": "ca.key",
            "server_cert": "apiserver.crt",
            "server_key": "apiserver.key",
            "admin_cert": "admin.crt",
            "admin_key": "admin.key",
            "sa_key": "sa.key",
            "sa_pub": "sa.pub",
        }
        if name not in files:
            raise AttributeError(name)
        return self.folder / files[name]


def _pem_key(key: ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def _name(common: str, org: str | None = None) -> x509.Name:
    attrs = [x509.NameAttribute(NameOID.COMMON_NAME, common)]
    if org:
        attrs.append(x509.NameAttribute(NameOID.ORGANIZATION_NAME, org))
    return x509.Name(attrs)


def _certificate(
    subject: x509.Name,
    key: ec.EllipticCurvePrivateKey,
    issuer: x509.Name,
    issuer_key: ec.EllipticCurvePrivateKey,
    *,
    ca: bool = False,
    usage: tuple[x509.ObjectIdentifier, ...] = (),
    names: list[x509.GeneralName] | None = None,
) -> x509.Certificate:
    now = datetime.datetime.now(datetime.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + VALID)
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )
    if usage:
        builder = builder.add_extension(x509.ExtendedKeyUsage(list(usage)), critical=False)
    if names:
        builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
    return builder.sign(issuer_key, hashes.SHA256())


def make(folder: Path) -> Pki:
    """Every key and certificate, once: files already there are kept."""
    pki = Pki(folder)
    if pki.sa_pub.exists():
        return pki
    folder.mkdir(parents=True, exist_ok=True)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = _name("samsa-dev-k8s-ca")
    ca = _certificate(ca_name, ca_key, ca_name, ca_key, ca=True)
    server_key = ec.generate_private_key(ec.SECP256R1())
    names: list[x509.GeneralName] = [x509.DNSName(n) for n in API_NAMES]
    # 127.0.0.1 for the tests; the real nodes' bridge address, which the API server then
    # advertises; the `kubernetes` Service's address, which pods call.
    for address in ("127.0.0.1", "172.30.0.1", "10.96.0.1"):
        names.append(x509.IPAddress(ipaddress.ip_address(address)))
    server = _certificate(
        _name("kube-apiserver"),
        server_key,
        ca_name,
        ca_key,
        usage=(ExtendedKeyUsageOID.SERVER_AUTH,),
        names=names,
    )
    admin_key = ec.generate_private_key(ec.SECP256R1())
    admin = _certificate(
        _name("samsa-dev-admin", "system:masters"),
        admin_key,
        ca_name,
        ca_key,
        usage=(ExtendedKeyUsageOID.CLIENT_AUTH,),
    )
    sa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = serialization.Encoding.PEM
    files = {
        pki.ca_key: _pem_key(ca_key),
        pki.ca_cert: ca.public_bytes(pem),
        pki.server_key: _pem_key(server_key),
        pki.server_cert: server.public_bytes(pem),
        pki.admin_key: _pem_key(admin_key),
        pki.admin_cert: admin.public_bytes(pem),
        pki.sa_key: _pem_key(sa_key),
    }
    for path, data in files.items():
        path.write_bytes(data)
        path.chmod(0o600)
    # Written last: its presence says the set is complete.
    pki.sa_pub.write_bytes(
        sa_key.public_key().public_bytes(pem, serialization.PublicFormat.SubjectPublicKeyInfo)
    )
    return pki


def client(folder: Path, stem: str, common: str, org: str | None = None) -> tuple[Path, Path]:
    """A client certificate from the CA of `make` (made first): ``<stem>.crt`` and
    ``<stem>.key`` in ``folder``, kept if there."""
    pki = make(folder)
    cert, key = folder / f"{stem}.crt", folder / f"{stem}.key"
    if cert.exists() and key.exists():
        return cert, key
    ca = x509.load_pem_x509_certificate(pki.ca_cert.read_bytes())
    ca_key = serialization.load_pem_private_key(pki.ca_key.read_bytes(), password=None)
    assert isinstance(ca_key, ec.EllipticCurvePrivateKey)
    own = ec.generate_private_key(ec.SECP256R1())
    issued = _certificate(
        _name(common, org),
        own,
        ca.subject,
        ca_key,
        usage=(ExtendedKeyUsageOID.CLIENT_AUTH,),
    )
    key.write_bytes(_pem_key(own))
    key.chmod(0o600)
    cert.write_bytes(issued.public_bytes(serialization.Encoding.PEM))
    return cert, key
