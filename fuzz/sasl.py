"""The broker's side of SASL: PLAIN and SCRAM-SHA-256/512 client messages fed to the real
SaslServer and credential store, as SaslAuthenticate (or bare v0 tokens) hand them over.
Each token must be answered or refused with SaslAuthenticationError (the client is told, then
the connection closes), and a SCRAM exchange must never authenticate on a forged proof.

An input is: one byte choosing the mechanism, one byte giving the first token's length, then
the first token and the second (SCRAM's client-final message).
"""

from __future__ import annotations

from collections.abc import Coroutine
from typing import Any

import atheris

with atheris.instrument_imports(include=["samsa.security", "samsa.protocol.scram"]):
    from samsa.security.sasl import SaslAuthenticationError, SaslServer
    from samsa.security.security_store import StandaloneSecurityStore
    from samsa.security.session import ConnectionSession

from fuzz.harness import main, scratch_dir
from samsa.config import KafkaConfig
from samsa.protocol.scram import make_credential

TARGET = "sasl"
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
LISTENER = "SASL_PLAINTEXT"
USER, PASSWORD = "alice", "alice-pw"


def _server() -> SaslServer:
    config = KafkaConfig(
        {
            "listeners": "SASL_PLAINTEXT://127.0.0.1:9092",
            "sasl.enabled.mechanisms": ",".join(MECHANISMS),
            "sasl.jaas.config": (
                "org.apache.kafka.common.security.plain.PlainLoginModule required "
                f'user_{USER}="{PASSWORD}" user_bob="bob-pw";'
            ),
        }
    )
    store = StandaloneSecurityStore(scratch_dir("samsa-fuzz-sasl-"))
    for mechanism in MECHANISMS[1:]:
        _run(store.set_credential(USER, mechanism, make_credential(mechanism, PASSWORD)))
    return SaslServer(config, store)


def _run(coro: Coroutine[Any, Any, Any]) -> Any:
    """Run a coroutine that never waits on anything (the local store reads a file): one step."""
    try:
        coro.send(None)
    except StopIteration as done:
        return done.value
    coro.close()
    raise AssertionError("a SASL step waited on something")


SERVER = _server()


def one_input(data: bytes) -> None:
    if len(data) < 2:
        return
    mechanism = MECHANISMS[data[0] % len(MECHANISMS)]
    first, second = data[2 : 2 + data[1]], data[2 + data[1] :]
    session = ConnectionSession(protocol=LISTENER, authenticated=False, mechanism=mechanism)
    try:
        _run(SERVER.step(session, LISTENER, first))
        if not session.authenticated:
            _run(SERVER.step(session, LISTENER, second))
    except SaslAuthenticationError:
        assert not session.authenticated
        return
    if session.authenticated and mechanism != "PLAIN":
        raise AssertionError(f"SCRAM authenticated {session.principal} on a forged proof")


def seed_inputs() -> dict[str, bytes]:
    def pack(mechanism: str, first: bytes, second: bytes = b"") -> bytes:
        return bytes([MECHANISMS.index(mechanism), len(first)]) + first + second

    scram_first = f"n,,n={USER},r=fyko+d2lbbFgONRv9qkxdawL".encode()
    scram_final = (
        b"c=biws,r=fyko+d2lbbFgONRv9qkxdawLnonce,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
    )
    return {
        "plain-ok": pack("PLAIN", f"\0{USER}\0{PASSWORD}".encode()),
        "plain-authzid": pack("PLAIN", f"{USER}\0{USER}\0wrong".encode()),
        "scram-256": pack("SCRAM-SHA-256", scram_first, scram_final),
        "scram-512": pack("SCRAM-SHA-512", scram_first, scram_final),
        "scram-escaped": pack("SCRAM-SHA-512", b"n,a=al=2Cice,n=al=2Cice,r=abc", b"c=eSws,r=abc"),
        "scram-unknown-user": pack("SCRAM-SHA-256", b"n,,n=mallory,r=abc", b""),
    }


if __name__ == "__main__":
    main(TARGET, one_input)
