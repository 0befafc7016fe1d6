"""The server side of a SCRAM exchange (RFC 5802): two client messages, two answers. Pure: the
user's stored credential is looked up by the caller between the two steps."""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass

from samsa.protocol import scram
from samsa.protocol.scram import ScramCredential, ScramError


@dataclass
class ClientFirst:
    username: str
    nonce: str
    bare: str
    gs2_header: str


def parse_client_first(message: bytes) -> ClientFirst:
    try:
        text = message.decode()
    except UnicodeDecodeError:
        raise ScramError("client-first-message is not UTF-8") from None
    cbind, sep1, rest = text.partition(",")
    authzid, sep2, bare = rest.partition(",")
    if not (sep1 and sep2) or cbind not in ("n", "y"):
        raise ScramError("channel binding is not supported (gs2 header must be n,, or y,,)")
    attrs = scram.attributes(bare)
    if "n" not in attrs or "r" not in attrs or "m" in attrs:
        raise ScramError("client-first-message needs n= and r=")
    username = scram.unescape_name(attrs["n"])
    if authzid and authzid != f"a={scram.escape_name(username)}":
        raise ScramError("authorization id must be the user itself")
    return ClientFirst(username, attrs["r"], bare, f"{cbind},{authzid},")


class ScramServer:
    """One exchange: ``first`` with the user's credential, then ``final``."""

    def __init__(self, mechanism: str) -> None:
        self.mechanism = mechanism
        self.hash_name = scram.MECHANISMS[mechanism]
        self.client_first: ClientFirst | None = None
        self.server_first = ""
        self.credential: ScramCredential | None = None

    def first(self, client_first: ClientFirst, credential: ScramCredential) -> bytes:
        self.client_first = client_first
        self.credential = credential
        nonce = client_first.nonce + scram.nonce()
        self.server_first = f"r={nonce},s={scram.b64(credential.salt)},i={credential.iterations}"
        return self.server_first.encode()

    def final(self, message: bytes) -> bytes:
        """The server-final-message; ScramError when the proof is wrong."""
        first, cred = self.client_first, self.credential
        assert first is not None and cred is not None
        text = message.decode(errors="replace")
        without_proof, sep, proof_part = text.rpartition(",p=")
        if not sep:
            raise ScramError("client-final-message has no proof")
        attrs = scram.attributes(without_proof)
        if attrs.get("c") != scram.b64(first.gs2_header.encode()):
            raise ScramError("channel binding does not match the gs2 header")
        # endswith, as Kafka's ScramSaslServer checks: older librdkafka (Debian's kcat) sends
        # its own nonce again in front of the server's; the proof covers what it sent.
        if not attrs.get("r", "").endswith(scram.attributes(self.server_first)["r"]):
            raise ScramError("Invalid client nonce in the final client message.")
        auth_message = f"{first.bare},{self.server_first},{without_proof}"
        proof = scram.unb64(proof_part)
        signature = scram.signature(self.hash_name, cred.stored_key, auth_message)
        if len(proof) != len(signature):
            raise ScramError("invalid proof")
        client_key = scram.xor(proof, signature)
        if not hmac.compare_digest(
            hashlib.new(self.hash_name, client_key).digest(), cred.stored_key
        ):
            raise ScramError("invalid proof")
        server_signature = scram.signature(self.hash_name, cred.server_key, auth_message)
        return f"v={scram.b64(server_signature)}".encode()
