"""SCRAM (RFC 5802, RFC 7677) with SHA-256 and SHA-512: the key derivations and the message
syntax both ends share. No I/O; the broker's server side is samsa.security.scram, the client's
samsa.client.sasl."""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from dataclasses import dataclass

MECHANISMS = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
# Kafka refuses fewer (ScramMechanism.minIterations) and writes this many by default.
MIN_ITERATIONS = 4096
MAX_ITERATIONS = 16384
# The mechanism numbers of Describe/AlterUserScramCredentials.
MECHANISM_IDS = {1: "SCRAM-SHA-256", 2: "SCRAM-SHA-512"}
GS2_HEADER = "n,,"


class ScramError(ValueError):
    """A malformed or failed SCRAM exchange."""


@dataclass(frozen=True)
class ScramCredential:
    """What a server stores for a user: never the password (Kafka's ScramCredential)."""

    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int


def _hmac(hash_name: str, key: bytes, msg: bytes) -> bytes:
    return hmac.new(key, msg, hash_name).digest()


def salted_password(hash_name: str, password: str, salt: bytes, iterations: int) -> bytes:
    return hashlib.pbkdf2_hmac(hash_name, password.encode(), salt, iterations)


def client_key(hash_name: str, salted: bytes) -> bytes:
    return _hmac(hash_name, salted, b"Client Key")


def make_credential(
    mechanism: str, password: str, iterations: int = MIN_ITERATIONS, salt: bytes | None = None
) -> ScramCredential:
    salt = salt if salt is not None else secrets.token_bytes(32)
    salted = salted_password(MECHANISMS[mechanism], password, salt, iterations)
    return credential_from_salted(mechanism, salted, salt, iterations)


def credential_from_salted(
    mechanism: str, salted: bytes, salt: bytes, iterations: int
) -> ScramCredential:
    """What AlterUserScramCredentials sends (the salted password) to what a server keeps."""
    hash_name = MECHANISMS[mechanism]
    return ScramCredential(
        salt,
        hashlib.new(hash_name, client_key(hash_name, salted)).digest(),
        _hmac(hash_name, salted, b"Server Key"),
        iterations,
    )


def signature(hash_name: str, key: bytes, auth_message: str) -> bytes:
    return _hmac(hash_name, key, auth_message.encode())


def xor(a: bytes, b: bytes) -> bytes:
    return bytes(x ^ y for x, y in zip(a, b, strict=True))


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def unb64(text: str) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except ValueError as exc:
        raise ScramError(f"bad base64: {exc}") from None


def escape_name(name: str) -> str:
    return name.replace("=", "=3D").replace(",", "=2C")


def unescape_name(text: str) -> str:
    if "=" in text.replace("=3D", "").replace("=2C", ""):
        raise ScramError("invalid username encoding")
    return text.replace("=2C", ",").replace("=3D", "=")


def attributes(message: str) -> dict[str, str]:
    """``a=1,b=2`` -> {'a': '1', 'b': '2'}; values may hold '='."""
    out: dict[str, str] = {}
    for part in message.split(","):
        key, sep, value = part.partition("=")
        if not sep or len(key) != 1:
            raise ScramError(f"malformed attribute {part!r}")
        out.setdefault(key, value)
    return out


def nonce() -> str:
    return secrets.token_urlsafe(24)


def format_credential(cred: ScramCredential) -> str:
    """Kafka's text form, as kept under /config/users/<user>."""
    return (
        f"salt={b64(cred.salt)},stored_key={b64(cred.stored_key)},"
        f"server_key={b64(cred.server_key)},iterations={cred.iterations}"
    )


def parse_credential(text: str) -> ScramCredential:
    fields = dict(part.partition("=")[::2] for part in text.split(","))
    try:
        return ScramCredential(
            unb64(fields["salt"]),
            unb64(fields["stored_key"]),
            unb64(fields["server_key"]),
            int(fields["iterations"]),
        )
    except (KeyError, ValueError) as exc:
        raise ScramError(f"malformed SCRAM credential: {exc}") from None
