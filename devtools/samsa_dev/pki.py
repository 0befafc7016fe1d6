"""A test PKI made with `cryptography` (a development dependency, imported only here): a CA,
broker certificates for 127.0.0.1 and localhost, and client certificates, written as the PEM
files Kafka's PEM key and trust stores take. Used by the security tests and benchmarks."""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID


def _name(cn: str, ou: str | None = None) -> x509.Name:
    attrs = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, "Samsa Test")]
    if ou:
        attrs.append(x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, ou))
    attrs.append(x509.NameAttribute(NameOID.COMMON_NAME, cn))
    return x509.Name(attrs)


def _pem_key(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


@dataclass
class Issued:
    """A certificate and key on disk: ``keystore`` holds both (KIP-651's single PEM file)."""

    cert: Path
    key: Path
    keystore: Path


class Pki:
    def __init__(self, root: Path, name: str = "ca") -> None:
        self.root = root
        root.mkdir(parents=True, exist_ok=True)
        self.key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        subject = _name(f"Samsa Test {name}")
        self.cert = (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(subject)
            .public_key(self.key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(
                x509.KeyUsage(False, False, False, False, False, True, True, False, False),
                critical=True,
            )
            .sign(self.key, hashes.SHA256())
        )
        self.ca = root / f"{name}.pem"
        self.ca.write_bytes(self.cert.public_bytes(serialization.Encoding.PEM))

    def issue(
        self,
        name: str,
        cn: str,
        ou: str | None = None,
        *,
        server: bool = False,
        expired: bool = False,
    ) -> Issued:
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        start = now - datetime.timedelta(days=2 if expired else 0, minutes=5)
        end = now - datetime.timedelta(days=1) if expired else now + datetime.timedelta(days=1)
        builder = (
            x509.CertificateBuilder()
            .subject_name(_name(cn, ou))
            .issuer_name(self.cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(start)
            .not_valid_after(end)
        )
        if server:
            builder = builder.add_extension(
                x509.SubjectAlternativeName(
                    [
                        x509.DNSName("localhost"),
                        x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
                    ]
                ),
                critical=False,
            )
        cert = builder.sign(self.key, hashes.SHA256())
        cert_pem = cert.public_bytes(serialization.Encoding.PEM)
        chain = cert_pem + self.cert.public_bytes(serialization.Encoding.PEM)
        paths = Issued(
            self.root / f"{name}.crt", self.root / f"{name}.key", self.root / f"{name}-keystore.pem"
        )
        paths.cert.write_bytes(chain)
        paths.key.write_bytes(_pem_key(key))
        paths.keystore.write_bytes(_pem_key(key) + chain)
        return paths
