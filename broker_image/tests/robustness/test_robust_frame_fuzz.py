"""Mutated request frames of every API key and version the broker serves, sent at a running
broker while real clients keep working (the network side of fuzz/requests.py, whose seed
corpus of kio-built frames they start from).

Each mutated frame is answered (with a Kafka error code, or whatever the mutation asked for)
or its connection is closed; meanwhile a confluent-kafka producer and consumer are served
before, during and after, the broker logs no error (an unexpected exception in a handler is
logged as one), and at the end it still answers, a topic written before holds exactly its
records, and every record the producer saw acknowledged is read back at contiguous offsets.
Seeded: every run sends the same bytes (``SAMSA_FUZZ_FRAMES`` frames, 1500 unless told).
"""

from __future__ import annotations

import logging
import os
import random
import socket
import struct
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from kafka_support import (
    ServedClients,
    Wire,
    api_versions_v3,
    assert_serves_clients,
    consume,
    create_topic,
    produce,
    unique,
    wait_until,
)

from samsa.handlers.registry import default_apis
from samsa.testing import InProcessBroker

pytestmark = pytest.mark.timeout(900)

CORPUS = Path(__file__).resolve().parents[3] / "fuzz" / "corpus" / "requests"
FRAMES = int(os.environ.get("SAMSA_FUZZ_FRAMES", "1500"))
SEED = 19
BEFORE = [f"before-{i}".encode() for i in range(20)]
_SIZE = struct.Struct(">i")
_KEY = struct.Struct(">h")
_INTERESTING = [
    b"\x00",
    b"\xff",
    b"\x7f",
    b"\x80",
    b"\xff\xff",
    b"\x7f\xff",
    b"\x80\x00",
    b"\xff\xff\xff\xff",
    b"\x7f\xff\xff\xff",
    b"\x80\x00\x00\x00",
    b"\x00\x00\x00\x00",
    b"\xff\xff\xff\xff\x0f",  # the largest 5-byte varint
]


def seeds() -> list[bytes]:
    """The kio-built frames of fuzz/corpus/requests, one or more per served API version."""
    served = {api.key for api in default_apis()}
    frames = [p.read_bytes() for p in sorted(CORPUS.iterdir())]
    assert {_KEY.unpack_from(f, 0)[0] for f in frames} == served, "rebuild: python -m fuzz.seeds"
    return frames


def mutate(rng: random.Random, frame: bytes, others: list[bytes]) -> bytes:
    """One to three mutations, past the API key and version most of the time (so the frame
    still reaches that API's decoder and handler)."""
    out = bytearray(frame)
    floor = 4 if rng.random() < 0.9 else 0
    for _ in range(rng.choice((1, 1, 1, 2, 2, 3))):
        if len(out) <= floor:
            out += rng.randbytes(rng.randint(1, 8))
            continue
        at = rng.randrange(floor, len(out))
        # Mostly values changed in place, so that most frames still decode and reach their
        # handler; sometimes the structure itself is cut, grown or spliced.
        kind = rng.choices(range(6), weights=(4, 4, 1, 1, 1, 1))[0]
        if kind == 0:
            out[at] ^= 1 << rng.randrange(8)
        elif kind == 1:
            value = rng.choice(_INTERESTING)
            out[at : at + len(value)] = value
        elif kind == 2:
            del out[at:]
        elif kind == 3:
            out[at:at] = rng.randbytes(rng.randint(1, 16))
        elif kind == 4:
            del out[at : at + rng.randint(1, 8)]
        else:  # this frame's head, another's tail
            other = rng.choice(others)
            out[at:] = other[rng.randrange(len(other)) :]
    return bytes(out)


def send_and_answer(port: int, frame: bytes, wait: float = 2.0) -> bytes | None:
    """Send one frame on a new connection: its answer, or None if the broker closed the
    connection instead.  A request may rightly wait longer than `wait` (a fetch or a join
    with long timeouts): then the connection is closed from this side and b"" returned."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        got = bytearray()
        try:
            sock.sendall(_SIZE.pack(len(frame)) + frame)
            sock.settimeout(wait)
            while len(got) < 4 or len(got) < 4 + _SIZE.unpack_from(got)[0]:
                chunk = sock.recv(65536)
                if not chunk:
                    return None
                got += chunk
        except (ConnectionResetError, BrokenPipeError):
            return None
        except TimeoutError:
            return b""
    return bytes(got[4:])


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[InProcessBroker]:
    with InProcessBroker(tmp_path / "data") as broker:
        yield broker


def test_mutated_frames_of_every_api_while_clients_are_served(
    broker: InProcessBroker, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="samsa")
    bootstrap = broker.bootstrap_servers
    intact, served_topic = unique("intact"), unique("served")
    create_topic(bootstrap, intact)
    create_topic(bootstrap, served_topic)
    produce(bootstrap, intact, BEFORE)
    frames = seeds()
    rng = random.Random(SEED)
    served = ServedClients(bootstrap, served_topic, read=True)
    try:
        wait_until(lambda: served.read > 0 or served.errors, 60, what="clients served at first")
        at_start = served.delivered, served.read
        outcomes: Counter[str] = Counter()
        # One frame a connection: after a malformed one, the broker reads no further.
        for _ in range(FRAMES):
            frame = mutate(rng, rng.choice(frames), frames)
            answer = send_and_answer(broker.port, frame)
            outcomes["closed" if answer is None else "answered" if answer else "waiting"] += 1
            if answer:
                # An answer is to this request: its correlation id.
                assert answer[:4] == frame[4:8], (frame.hex(), answer[:16].hex())
        during = served.delivered, served.read
        with Wire(broker.port) as wire:
            assert 18 in api_versions_v3(wire), "the broker stopped answering"
        wait_until(
            lambda: served.read > during[1] or served.errors,
            60,
            what="clients served after the fuzzing",
        )
    finally:
        served.stop()
    print(f"{FRAMES} mutated frames: {dict(outcomes)}")
    assert served.errors == []
    assert during[0] > at_start[0] and during[1] > at_start[1], "clients starved during it"
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert errors == [], errors[:5]
    # Every acknowledged record is there, at contiguous offsets, and the consumer read them so.
    assert served.delivered_offsets == list(range(served.delivered))
    assert served.read_offsets == list(range(served.read))
    stored = consume(bootstrap, served_topic)
    assert [r.offset for r in stored] == list(range(len(stored)))
    assert len(stored) >= served.delivered
    assert_serves_clients(bootstrap, intact, BEFORE)


def test_a_count_no_frame_could_hold_closes_only_that_connection(
    broker: InProcessBroker,
) -> None:
    """The 17-byte Metadata v12 request that fuzzing found: its 2^33 topics once aborted the
    broker's process; now its connection is closed and the broker goes on serving."""
    frame = struct.pack(">hhih", 3, 12, 1, -1) + b"\x00" + b"\x81\x80\x80\x80\x20"
    with Wire(broker.port) as bystander, Wire(broker.port) as wire:
        wire.send(_SIZE.pack(len(frame)) + frame)
        assert wire.closed_by_peer(), "a count no frame could hold must close the connection"
        assert 3 in api_versions_v3(bystander)
    name = unique("after")
    create_topic(broker.bootstrap_servers, name)
    assert_serves_clients(broker.bootstrap_servers, name, [])


# Found by the fuzzing above, each once an unexpected exception in the broker (logged as an
# error, the connection dropped without a word): now refused as Kafka refuses them.
_HEADER_V1 = struct.Struct(">hhih")

REFUSED = {
    # ListOffsets v1: a null topics array, which the schema does not allow
    "null-non-nullable-array-in-offsets": _HEADER_V1.pack(2, 1, 7, -1) + struct.pack(">ii", -1, -1),
    # SyncGroup v0: a null assignments array
    "null-non-nullable-array-in-a-group": _HEADER_V1.pack(14, 0, 7, -1)
    + struct.pack(">h", 1)
    + b"g"
    + struct.pack(">ih", 1, 1)
    + b"m"
    + struct.pack(">i", -1),
    # Metadata v10: a topic asked for by id with a null name, before v12 allows it; its answer
    # could not even be written
    "metadata-by-id-before-v12": _HEADER_V1.pack(3, 10, 7, -1)
    + b"\x00"  # header tags
    + b"\x02"  # one topic
    + bytes(range(1, 17))  # its id
    + b"\x00\x00"  # null name, no tags
    + b"\x01\x00\x00\x00",  # auto creation; no cluster or topic operations; no tags
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_requests_the_fuzzer_found_close_the_connection_without_an_error(
    broker: InProcessBroker, caplog: pytest.LogCaptureFixture, case: str
) -> None:
    caplog.set_level(logging.INFO, logger="samsa")
    frame = REFUSED[case]
    with Wire(broker.port) as bystander, Wire(broker.port) as wire:
        wire.send(_SIZE.pack(len(frame)) + frame)
        assert wire.closed_by_peer(), f"{case}: the connection was left open"
        assert 3 in api_versions_v3(bystander)
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert errors == []
    assert any("closing connection" in r.getMessage() for r in caplog.records)
