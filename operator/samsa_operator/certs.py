"""The operator's PKI, with `cryptography`: CAs, the certificates they sign, and when each is
due for renewal. No I/O: keys and certificates are PEM text in and out.

A CA is renewed with its own key and subject, so certificates it signed before verify against
the renewed one, and clients holding either CA certificate trust the brokers throughout.
"""

from __future__ import annotations

import datetime
import hashlib
import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

# Certificates start a little in the past: clocks of the peers that check them may lag.
BACKDATE = datetime.timedelta(minutes=5)


@dataclass(frozen=True)
class KeyPair:
    """A private key and its certificate, PEM."""

    key: str
    cert: str

    @property
    def keystore(self) -> str:
        """KIP-651's single PEM key store: the key, then the certificate."""
        return self.key.rstrip("\n") + "\n" + self.cert

    @property
    def certificate(self) -> x509.Certificate:
        return x509.load_pem_x509_certificate(self.cert.encode())


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _pem_key(key: ec.EllipticCurvePrivateKey) -> str:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()


def _load_key(pem: str) -> ec.EllipticCurvePrivateKey:
    key = serialization.load_pem_private_key(pem.encode(), password=None)
    assert isinstance(key, ec.EllipticCurvePrivateKey), "the operator makes EC keys only"
    return key


def name(common_name: str, organization: str | None = None) -> x509.Name:
    attrs = []
    if organization:
        attrs.append(x509.NameAttribute(NameOID.ORGANIZATION_NAME, organization))
    attrs.append(x509.NameAttribute(NameOID.COMMON_NAME, common_name))
    return x509.Name(attrs)


def _ca_cert(
    key: ec.EllipticCurvePrivateKey, subject: x509.Name, now: datetime.datetime, days: int
) -> str:
    public = key.public_key()
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(public)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - BACKDATE)
        .not_valid_after(now + datetime.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=False,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(public), critical=False)
        .sign(key, hashes.SHA256())
    )
    return cert.public_bytes(serialization.Encoding.PEM).decode()


def new_ca(common_name: str, now: datetime.datetime, days: int) -> KeyPair:
    key = _key()
    return KeyPair(_pem_key(key), _ca_cert(key, name(common_name, "samsa.dev"), now, days))


def renew_ca(ca: KeyPair, now: datetime.datetime, days: int) -> KeyPair:
    """The same CA (key and subject) with a new validity."""
    return KeyPair(ca.key, _ca_cert(_load_key(ca.key), ca.certificate.subject, now, days))


def issue(
    ca: KeyPair,
    subject: x509.Name,
    now: datetime.datetime,
    days: int,
    names: Sequence[str] = (),
    *,
    server: bool = True,
) -> KeyPair:
    """A certificate signed by `ca`, for a server (its DNS names and IP addresses as SANs)
    and a client."""
    key = _key()
    issuer = ca.certificate
    usages = [ExtendedKeyUsageOID.CLIENT_AUTH]
    if server:
        usages.insert(0, ExtendedKeyUsageOID.SERVER_AUTH)
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - BACKDATE)
        .not_valid_after(min(now + datetime.timedelta(days=days), issuer.not_valid_after_utc))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(issuer.public_key()),  # type: ignore[arg-type]
            critical=False,
        )
    )
    if names:
        builder = builder.add_extension(
            x509.SubjectAlternativeName([_general_name(n) for n in names]), critical=False
        )
    cert = builder.sign(_load_key(ca.key), hashes.SHA256())
    return KeyPair(_pem_key(key), cert.public_bytes(serialization.Encoding.PEM).decode())


def due(cert_pem: str, now: datetime.datetime, renewal_days: int) -> bool:
    """True when the certificate expires within `renewal_days` (or is unreadable)."""
    try:
        cert = x509.load_pem_x509_certificate(cert_pem.encode())
    except ValueError:
        return True
    return cert.not_valid_after_utc - now <= datetime.timedelta(days=renewal_days)


def renewable(cert_pem: str, ca: KeyPair, now: datetime.datetime, renewal_days: int) -> bool:
    """Due for renewal, and a new certificate from `ca` would last longer: one that its
    CA's end cuts short (a CA of the user's own, near its end) is not issued again at every
    reconcile, which would roll the brokers without end."""
    if not due(cert_pem, now, renewal_days):
        return False
    try:
        end = x509.load_pem_x509_certificate(cert_pem.encode()).not_valid_after_utc
    except ValueError:
        return True
    return ca.certificate.not_valid_after_utc > end


def signed_by(cert_pem: str, ca: KeyPair) -> bool:
    """True when the certificate's signature is by the CA's key."""
    return signed_by_cert(cert_pem, ca.cert)


def signed_by_cert(cert_pem: str, ca_cert_pem: str) -> bool:
    """`signed_by` for a CA of which only the certificate is at hand (one trusted before)."""
    try:
        cert = x509.load_pem_x509_certificate(cert_pem.encode())
        cert.verify_directly_issued_by(x509.load_pem_x509_certificate(ca_cert_pem.encode()))
    except (ValueError, TypeError, InvalidSignature):
        return False
    return True


def key_id(cert_pem: str) -> str:
    """The certificate's public key, as a digest: a CA renewed with its own key keeps it."""
    cert = x509.load_pem_x509_certificate(cert_pem.encode())
    spki = cert.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return hashlib.sha256(spki).hexdigest()


def is_ca(cert_pem: str) -> bool:
    try:
        cert = x509.load_pem_x509_certificate(cert_pem.encode())
        return bool(cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca)
    except (ValueError, x509.ExtensionNotFound):
        return False


def split(bundle: str | None) -> list[str]:
    """The certificates of a PEM bundle, each as its own PEM text (none if unreadable)."""
    try:
        found = x509.load_pem_x509_certificates((bundle or "").encode())
    except ValueError:
        return []
    return [c.public_bytes(serialization.Encoding.PEM).decode() for c in found]


def _general_name(name: str) -> x509.GeneralName:
    """An address as a SAN: an IP address entry for an IP (a client connecting to a node's
    address checks that), a DNS name otherwise."""
    try:
        return x509.IPAddress(ipaddress.ip_address(name))
    except ValueError:
        return x509.DNSName(name)


def san_names(cert_pem: str) -> list[str]:
    """The certificate's SANs, DNS names and IP addresses, as `issue` was given them."""
    cert = x509.load_pem_x509_certificate(cert_pem.encode())
    try:
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return []
    ips = [str(ip) for ip in san.get_values_for_type(x509.IPAddress)]
    return list(san.get_values_for_type(x509.DNSName)) + ips


def problem(pair: KeyPair, now: datetime.datetime) -> str | None:
    """What is wrong with a key pair given by a user, or None: the PEM unreadable, a key that
    is not the certificate's, or a certificate out of its validity."""
    try:
        cert = pair.certificate
        key = serialization.load_pem_private_key(pair.key.encode(), password=None)
    except (ValueError, TypeError) as exc:
        return f"not a PEM certificate and unencrypted key ({exc})"
    spki = serialization.PublicFormat.SubjectPublicKeyInfo
    der = serialization.Encoding.DER
    if key.public_key().public_bytes(der, spki) != cert.public_key().public_bytes(der, spki):
        return "the key is not the certificate's"
    if not cert.not_valid_before_utc <= now <= cert.not_valid_after_utc:
        start, end = cert.not_valid_before_utc, cert.not_valid_after_utc
        return f"the certificate is valid from {start} to {end}"
    return None


def expiry(cert_pem: str) -> datetime.datetime:
    return x509.load_pem_x509_certificate(cert_pem.encode()).not_valid_after_utc


def principal(cert_pem: str) -> str:
    """The Kafka principal of a client presenting this certificate (RFC 2253 subject)."""
    subject = x509.load_pem_x509_certificate(cert_pem.encode()).subject
    return f"User:{subject.rfc4514_string()}"


def fingerprint(*pems: str) -> str:
    return hashlib.sha256("".join(pems).encode()).hexdigest()[:16]
