"""The client side of SASL on a Kafka connection: SaslHandshake v1, then SaslAuthenticate v1
carrying PLAIN or SCRAM-SHA-256/512 (RFC 5802) messages."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from samsa.protocol import scram
from samsa.protocol.errors import ErrorCode
from samsa.protocol.messages import build, request_type

if TYPE_CHECKING:
    from samsa.client.connection import BrokerConnection, ClientSecurity

SASL_HANDSHAKE, SASL_AUTHENTICATE = 17, 36


class SaslAuthenticationFailed(ConnectionError):
    """The broker refused our credentials or mechanism."""


async def _authenticate(conn: BrokerConnection, token: bytes, timeout_s: float) -> bytes:
    body = build(request_type(SASL_AUTHENTICATE, 1), {"auth_bytes": token})
    response: Any = await conn.send_now(SASL_AUTHENTICATE, 1, body, timeout_s)
    if response.error_code != ErrorCode.none:
        raise SaslAuthenticationFailed(
            f"{conn.host}:{conn.port}: {response.error_message or response.error_code}"
        )
    lifetime = response.session_lifetime
    conn.session_lifetime_ms = int(lifetime.total_seconds() * 1000) if lifetime else 0
    return bytes(response.auth_bytes)


async def authenticate(conn: BrokerConnection, security: ClientSecurity, timeout_s: float) -> None:
    """Authenticate (or re-authenticate, KIP-368) on the connection; the broker's session
    lifetime is left in ``conn.session_lifetime_ms``."""
    mechanism = security.sasl_mechanism or ""
    body = build(request_type(SASL_HANDSHAKE, 1), {"mechanism": mechanism})
    response: Any = await conn.send_now(SASL_HANDSHAKE, 1, body, timeout_s)
    if response.error_code != ErrorCode.none:
        raise SaslAuthenticationFailed(
            f"{conn.host}:{conn.port} does not offer {mechanism}"
            f" (it offers {', '.join(response.mechanisms)})"
        )
    if mechanism == "PLAIN":
        token = f"\0{security.username}\0{security.password}".encode()
        await _authenticate(conn, token, timeout_s)
        return
    hash_name = scram.MECHANISMS[mechanism]
    first_bare = f"n={scram.escape_name(security.username)},r={scram.nonce()}"
    server_first = (
        await _authenticate(conn, (scram.GS2_HEADER + first_bare).encode(), timeout_s)
    ).decode()
    attrs = scram.attributes(server_first)
    client_nonce = first_bare.rsplit("r=", 1)[1]
    if not attrs.get("r", "").startswith(client_nonce):
        raise SaslAuthenticationFailed("the server's SCRAM nonce does not extend ours")
    salted = scram.salted_password(
        hash_name, security.password, scram.unb64(attrs["s"]), int(attrs["i"])
    )
    without_proof = f"c={scram.b64(scram.GS2_HEADER.encode())},r={attrs['r']}"
    auth_message = f"{first_bare},{server_first},{without_proof}"
    key = scram.client_key(hash_name, salted)
    stored = scram.hashlib.new(hash_name, key).digest()
    proof = scram.xor(key, scram.signature(hash_name, stored, auth_message))
    final = f"{without_proof},p={scram.b64(proof)}"
    server_final = scram.attributes((await _authenticate(conn, final.encode(), timeout_s)).decode())
    server_key = scram.signature(hash_name, salted, "Server Key")
    expected = scram.signature(hash_name, server_key, auth_message)
    if scram.unb64(server_final.get("v", "")) != expected:
        raise SaslAuthenticationFailed("the server's SCRAM signature is wrong")
