"""SASL and TLS handshakes fuzzed (hypothesis, derandomized so every run sends the same
bytes): malformed SaslHandshake and SaslAuthenticate frames, truncated SCRAM messages,
garbage before and within a TLS ClientHello, and plaintext Kafka requests sent to TLS ports.

Each fuzzed connection is refused (an error answer, an alert, or a closed connection) and
nothing else happens: the broker logs no unexpected error, nothing is written (no topic, no
record, no credential), and a client on another listener is served throughout, its requests
answered while the fuzzing runs.
"""

from __future__ import annotations

import hashlib
import logging
import os
import socket
import ssl
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import (
    AdminClient,
    NewTopic,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka_support import ServedClients, encode_request, header_only_frame, wait_until
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.sasl_authenticate.v2.request import SaslAuthenticateRequest
from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest
from security_support import Pki

from samsa.protocol import scram
from samsa.testing import InProcessBroker, free_port

pytestmark = pytest.mark.timeout(300)
FUZZ = settings(
    max_examples=int(os.environ.get("SAMSA_FUZZ_EXAMPLES", "150")),
    derandomize=True,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
SERVED_TOPIC, SENTINEL = "served", "sentinel"
_SIZE = struct.Struct(">i")


class Env:
    def __init__(self, root: Path) -> None:
        self.pki = Pki(root / "pki")
        keystore = self.pki.issue("broker", "broker", server=True).keystore
        self.ports = {n: free_port() for n in ("PLAINTEXT", "SASL_PLAINTEXT", "SSL", "SASL_SSL")}
        self.broker = InProcessBroker(
            root / "data",
            {
                "listeners": ",".join(f"{n}://127.0.0.1:{p}" for n, p in self.ports.items()),
                "inter.broker.listener.name": "PLAINTEXT",
                "ssl.keystore.location": str(keystore),
                "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512",
                "sasl.jaas.config": (
                    "org.apache.kafka.common.security.plain.PlainLoginModule required "
                    'user_bob="bob-pw";'
                ),
            },
            port=self.ports["PLAINTEXT"],
        )
        self.data = root / "data"

    def admin(self) -> AdminClient:
        return AdminClient({"bootstrap.servers": f"127.0.0.1:{self.ports['PLAINTEXT']}"})

    def written(self) -> dict[str, Any]:
        """What a fuzzed connection must not change: topics, the sentinel's records, users."""
        admin = self.admin()
        topics = set(admin.list_topics(timeout=10).topics)
        users: Any = admin.describe_user_scram_credentials()
        consumer_offsets = {t for t in topics if t.startswith("__")}
        return {
            "topics": topics - consumer_offsets,
            "sentinel files": sorted(
                (p.name, p.stat().st_size) for p in self.data.glob(f"{SENTINEL}-0/*.log")
            ),
            "users": sorted(users.result(10)),
        }


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    env = Env(tmp_path_factory.mktemp("fuzz"))
    with env.broker:
        admin = env.admin()
        topics = [NewTopic(SERVED_TOPIC, 1, 1), NewTopic(SENTINEL, 1, 1)]
        for f in admin.create_topics(topics).values():
            f.result(20)
        up = UserScramCredentialUpsertion(
            "alice", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), b"alice-pw"
        )
        admin.alter_user_scram_credentials([up])["alice"].result(20)
        yield env


@pytest.fixture
def guarded(env: Env, caplog: pytest.LogCaptureFixture) -> Iterator[Env]:
    """Around one fuzz test: the served client runs throughout and must be served during it,
    nothing may be written, and the broker must log no error."""
    caplog.set_level(logging.WARNING, logger="samsa")
    before = env.written()
    served = ServedClients(f"127.0.0.1:{env.ports['PLAINTEXT']}", SERVED_TOPIC)
    try:
        # Served before the fuzzing starts, then served again once it has run: a busy machine
        # may take longer to connect the producer than the fuzzing takes.
        wait_until(lambda: served.delivered > 0, 60, what="the other client served at first")
        at_start = served.delivered
        yield env
        wait_until(
            lambda: served.delivered > at_start or served.errors,
            60,
            what="the other client served through the fuzzing",
        )
    finally:
        served.stop()
    assert served.errors == []
    assert env.written() == before
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert errors == []


def _tls_context() -> ssl.SSLContext:
    # Nothing is verified, so no CA store is loaded: create_default_context() parses the
    # system's, 50 ms of CPU for each of the TLS examples' one or two contexts.
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return context


def _client_hello() -> bytes:
    """A real ClientHello, as Python's TLS client first sends it."""
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    tls = _tls_context().wrap_bio(incoming, outgoing, server_hostname="127.0.0.1")
    with pytest.raises(ssl.SSLWantReadError):
        tls.do_handshake()
    return outgoing.read()


def _send_and_drain(port: int, data: bytes, tls: bool = False) -> bytes:
    """Send bytes, close our side, and read what comes back until the broker closes."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    got = bytearray()
    try:
        if tls:
            sock = _tls_context().wrap_socket(sock, server_hostname="127.0.0.1")
        sock.sendall(data)
        # Our side is done: the broker sees end of stream (under TLS too: no close_notify).
        sock.shutdown(socket.SHUT_WR)
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                break
            got += chunk
    except (ConnectionError, ssl.SSLError, TimeoutError):
        pass
    finally:
        sock.close()
    return bytes(got)


def _frame(api_key: int, version: int, body: Any) -> bytes:
    return encode_request(api_key, version, body)


# -- SASL --------------------------------------------------------------------------------


@FUZZ
@given(version=st.integers(-2, 4), body=st.binary(max_size=80))
def test_malformed_sasl_handshake_frames(guarded: Env, version: int, body: bytes) -> None:
    _send_and_drain(guarded.ports["SASL_PLAINTEXT"], header_only_frame(17, version, 1, body))


@FUZZ
@given(data=st.binary(max_size=120))
def test_raw_garbage_to_a_sasl_listener(guarded: Env, data: bytes) -> None:
    _send_and_drain(guarded.ports["SASL_PLAINTEXT"], data)


@FUZZ
@given(
    mechanism=st.sampled_from(["PLAIN", "SCRAM-SHA-512"]),
    version=st.integers(0, 3),
    body=st.binary(max_size=80),
)
def test_malformed_sasl_authenticate_frames(
    guarded: Env, mechanism: str, version: int, body: bytes
) -> None:
    handshake = _frame(17, 1, SaslHandshakeRequest(mechanism=mechanism))
    _send_and_drain(
        guarded.ports["SASL_PLAINTEXT"], handshake + header_only_frame(36, version, 2, body)
    )


@FUZZ
@given(
    mechanism=st.sampled_from(["PLAIN", "SCRAM-SHA-512"]),
    token=st.one_of(
        st.binary(max_size=100),
        st.builds(
            lambda user, password: f"\0{user}\0{password}".encode(),
            st.text(max_size=12),
            st.text(max_size=12),
        ),
    ),
)
def test_refused_sasl_tokens_in_well_formed_frames(
    guarded: Env, mechanism: str, token: bytes
) -> None:
    handshake = _frame(17, 1, SaslHandshakeRequest(mechanism=mechanism))
    authenticate = _frame(36, 2, SaslAuthenticateRequest(auth_bytes=token))
    answer = _send_and_drain(guarded.ports["SASL_PLAINTEXT"], handshake + authenticate)
    # The handshake is answered; the token is refused (SASL_AUTHENTICATION_FAILED, code 58),
    # unless it is the first SCRAM message, which gets the server's first message back.
    assert answer, "the handshake went unanswered"


def _scram_messages() -> tuple[bytes, str]:
    first_bare = f"n=alice,r={scram.nonce()}"
    return f"n,,{first_bare}".encode(), first_bare


def _read_frame(sock: socket.socket) -> bytes:
    def exactly(n: int) -> bytes:
        out = bytearray()
        while len(out) < n:
            chunk = sock.recv(n - len(out))
            if not chunk:
                raise ConnectionError("closed")
            out += chunk
        return bytes(out)

    (size,) = _SIZE.unpack(exactly(4))
    return exactly(size)


@FUZZ
@given(which=st.sampled_from(["first", "final"]), cut=st.floats(0.0, 1.0, exclude_max=True))
def test_truncated_scram_messages(guarded: Env, which: str, cut: float) -> None:
    """A SCRAM exchange with one message cut short (v0 bare tokens, so the cut is the whole
    token the broker sees): never authenticated; refused with the connection closed, as Kafka
    closes a v0 exchange that fails."""
    sock = socket.create_connection(("127.0.0.1", guarded.ports["SASL_PLAINTEXT"]), timeout=10)
    try:
        sock.sendall(encode_request(17, 0, _handshake_v0("SCRAM-SHA-512")))
        _read_frame(sock)
        first, first_bare = _scram_messages()
        if which == "first":
            token = first[: int(len(first) * cut)]
            sock.sendall(_SIZE.pack(len(token)) + token)
            # A cut that leaves a shorter nonce is still a client-first message, answered
            # with the server's first message; any other cut is refused.
            answer = _frame_or_close(sock)
            assert answer is None or answer.startswith(b"r="), answer
        else:
            sock.sendall(_SIZE.pack(len(first)) + first)
            server_first = _read_frame(sock).decode()
            final = _client_final(first_bare, server_first, "alice-pw")
            token = final[: int(len(final) * cut)]
            sock.sendall(_SIZE.pack(len(token)) + token)
            # Without its whole proof the final message never authenticates.
            assert _frame_or_close(sock) is None, "a truncated client-final was answered"
    finally:
        sock.close()


def _frame_or_close(sock: socket.socket) -> bytes | None:
    """The next frame, or None when the broker closes the connection instead."""
    try:
        return _read_frame(sock)
    except ConnectionError:
        return None


def _handshake_v0(mechanism: str) -> Any:
    from kio.schema.sasl_handshake.v0.request import SaslHandshakeRequest as V0

    return V0(mechanism=mechanism)


def _client_final(first_bare: str, server_first: str, password: str) -> bytes:
    attrs = scram.attributes(server_first)
    salt, iterations = scram.unb64(attrs["s"]), int(attrs["i"])
    hash_name = scram.MECHANISMS["SCRAM-SHA-512"]
    without_proof = f"c=biws,r={attrs['r']}"
    auth_message = f"{first_bare},{server_first},{without_proof}"
    key = scram.client_key(hash_name, scram.salted_password(hash_name, password, salt, iterations))
    stored = hashlib.new(hash_name, key).digest()
    proof = scram.xor(key, scram.signature(hash_name, stored, auth_message))
    return f"{without_proof},p={scram.b64(proof)}".encode()


def test_the_scram_helper_authenticates_when_nothing_is_cut(env: Env) -> None:
    """The truncation test's messages, uncut, do authenticate: the cuts are what is refused."""
    sock = socket.create_connection(("127.0.0.1", env.ports["SASL_PLAINTEXT"]), timeout=10)
    try:
        sock.sendall(encode_request(17, 0, _handshake_v0("SCRAM-SHA-512")))
        _read_frame(sock)
        first, first_bare = _scram_messages()
        sock.sendall(_SIZE.pack(len(first)) + first)
        final = _client_final(first_bare, _read_frame(sock).decode(), "alice-pw")
        sock.sendall(_SIZE.pack(len(final)) + final)
        assert _read_frame(sock).startswith(b"v=")
    finally:
        sock.close()


# -- TLS ---------------------------------------------------------------------------------


@FUZZ
@given(garbage=st.binary(min_size=1, max_size=64), port=st.sampled_from(["SSL", "SASL_SSL"]))
def test_garbage_before_a_client_hello(guarded: Env, garbage: bytes, port: str) -> None:
    _send_and_drain(guarded.ports[port], garbage + _client_hello())


@FUZZ
@given(
    flips=st.lists(st.tuples(st.integers(0, 10_000), st.integers(1, 255)), min_size=1, max_size=8),
    cut=st.one_of(st.none(), st.integers(0, 10_000)),
    port=st.sampled_from(["SSL", "SASL_SSL"]),
)
def test_corrupted_client_hellos(
    guarded: Env, flips: list[tuple[int, int]], cut: int | None, port: str
) -> None:
    hello = bytearray(_client_hello())
    for at, mask in flips:
        hello[at % len(hello)] ^= mask
    _send_and_drain(guarded.ports[port], bytes(hello[:cut] if cut is not None else hello))


@pytest.mark.parametrize("port", ["SSL", "SASL_SSL"])
def test_plaintext_kafka_requests_to_a_tls_port_are_dropped(guarded: Env, port: str) -> None:
    request = _frame(
        18, 3, ApiVersionsRequest(client_software_name="x", client_software_version="1")
    )
    for _ in range(20):
        answer = _send_and_drain(guarded.ports[port], request)
        # Whatever comes back is a TLS alert record (content type 21), never a Kafka answer.
        assert answer == b"" or answer[0] == 21, answer[:16]


@FUZZ
@given(data=st.binary(max_size=200))
def test_garbage_inside_an_established_tls_session(guarded: Env, data: bytes) -> None:
    _send_and_drain(guarded.ports["SASL_SSL"], data, tls=True)
