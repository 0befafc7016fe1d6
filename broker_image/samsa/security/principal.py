"""KafkaPrincipal, and Kafka's default principal builder: ``User:<name>`` from SASL, or
``User:<subject DN>`` from a TLS client certificate (RFC 2253, as Java's X500Principal
writes it), else ``User:ANONYMOUS``."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class KafkaPrincipal:
    type: str
    name: str

    def __str__(self) -> str:
        return f"{self.type}:{self.name}"

    @classmethod
    def parse(cls, text: str) -> KafkaPrincipal:
        type_, sep, name = text.partition(":")
        if not sep or not type_ or not name:
            raise ValueError(f"{text!r} is not a principal (Type:name, e.g. User:alice)")
        return cls(type_, name)


ANONYMOUS = KafkaPrincipal("User", "ANONYMOUS")

# The attribute keywords Java's RFC 2253 output uses (others appear as dotted OIDs).
_KEYWORDS = {
    "commonName": "CN",
    "countryName": "C",
    "localityName": "L",
    "stateOrProvinceName": "ST",
    "organizationName": "O",
    "organizationalUnitName": "OU",
    "streetAddress": "STREET",
    "domainComponent": "DC",
    "userId": "UID",
}


def _escape(value: str) -> str:
    out = []
    for i, ch in enumerate(value):
        if ch in ',+"\\<>;' or (ch == "#" and i == 0) or (ch == " " and i in (0, len(value) - 1)):
            out.append("\\" + ch)
        else:
            out.append(ch)
    return "".join(out)


def subject_dn(subject: Sequence[Sequence[tuple[str, str]]]) -> str:
    """The RFC 2253 distinguished name of a subject as ``ssl.getpeercert()`` gives it (its
    RDNs in certificate order; RFC 2253 writes them last first)."""
    rdns = []
    for rdn in reversed(subject):
        rdns.append("+".join(f"{_KEYWORDS.get(k, k)}={_escape(v)}" for k, v in rdn))
    return ",".join(rdns)


def tls_principal(peercert: dict[str, Any] | None) -> KafkaPrincipal:
    """The principal of a TLS connection: the client certificate's subject, or ANONYMOUS when
    the client sent none (ssl.client.auth=none or requested)."""
    if not peercert or not peercert.get("subject"):
        return ANONYMOUS
    return KafkaPrincipal("User", subject_dn(peercert["subject"]))
