"""Bad input from the network: each kind is refused the way Kafka refuses it, and afterwards the
broker still serves a normal client on another connection with its log intact."""

from __future__ import annotations

import datetime
import gc
import random
import socket
import struct
import threading
import urllib.request
import zlib
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import NewTopic
from kafka_support import (
    CORRUPT_MESSAGE,
    INVALID_CONFIG,
    INVALID_PARTITIONS,
    INVALID_TOPIC_EXCEPTION,
    MESSAGE_TOO_LARGE,
    NONE,
    UNKNOWN_TOPIC_OR_PARTITION,
    UNSUPPORTED_VERSION,
    Wire,
    admin,
    api_versions_v3,
    assert_contiguous,
    assert_serves_clients,
    consume,
    create_topic,
    decode_response,
    encode_request,
    header_only_frame,
    log_end,
    produce,
    produce_request,
    producer,
    raw_produce,
    topic_error,
    unique,
    wait_until,
)
from kio.index import load_request_schema

from samsa.protocol.record_batch import BATCH_HEADER_SIZE, BATCH_LENGTH_OFFSET, build_batch
from samsa.protocol.replica_fetch import encode_replica_fetch
from samsa.testing import InProcessBroker

MAX_REQUEST = 1_048_576
CONFIG = {"socket.request.max.bytes": str(MAX_REQUEST), "message.max.bytes": "1000000"}
BEFORE = [f"before-{i}".encode() for i in range(20)]


@pytest.fixture
def broker(start_broker: Callable[..., InProcessBroker]) -> InProcessBroker:
    return start_broker(CONFIG, http=True)


@pytest.fixture
def topic(broker: InProcessBroker) -> str:
    """A topic holding BEFORE at offsets 0..19, for checking the log stays intact."""
    name = unique("intact")
    create_topic(broker.bootstrap_servers, name)
    produce(broker.bootstrap_servers, name, BEFORE)
    return name


def _still_fine(broker: InProcessBroker, topic: str) -> None:
    assert_serves_clients(broker.bootstrap_servers, topic, BEFORE)


# -- framing ---------------------------------------------------------------------------------


def test_frame_larger_than_socket_request_max_bytes_closes_only_that_connection(
    broker: InProcessBroker, topic: str
) -> None:
    with Wire(broker.port) as bystander, Wire(broker.port) as wire:
        before = api_versions_v3(bystander)
        wire.send(struct.pack(">i", MAX_REQUEST + 1) + b"\x00" * 1024)
        assert wire.closed_by_peer(), "an over-limit size prefix must close the connection"
        # The other connection, open the whole time, is unaffected.
        assert api_versions_v3(bystander) == before
    _still_fine(broker, topic)


def test_a_long_poll_cut_short_by_a_bad_frame_behind_it_leaves_nothing_unawaited(
    broker: InProcessBroker, topic: str, recwarn: pytest.WarningsRecorder
) -> None:
    # A Fetch at the log end, to be parked for 5 s, and in the same read a size prefix over
    # the limit: the connection closes before the Fetch's coroutine has taken a step.
    flexible_header = struct.pack(">hhih", 1, 12, 1, 0) + b"\x00"
    body = encode_replica_fetch(
        -1, 5000, 1, MAX_REQUEST, [(topic, [(0, -1, log_end(broker.port, topic), -1, -1, 4096)])]
    )
    fetch = struct.pack(">i", len(flexible_header) + len(body)) + flexible_header + body
    with Wire(broker.port) as wire:
        wire.send(fetch + struct.pack(">i", MAX_REQUEST + 1))
        assert wire.closed_by_peer()
    gc.collect()
    unawaited = [str(w.message) for w in recwarn if "was never awaited" in str(w.message)]
    assert not unawaited
    _still_fine(broker, topic)


def _produce_frame_of_size(topic: str, size: int) -> bytes:
    """A valid one-record Produce request frame whose size prefix is exactly `size`."""
    fill = size - 200
    for _ in range(10):
        batch = build_batch([(None, b"z" * fill, [])])
        frame = encode_request(0, 9, produce_request(topic, {0: batch}))
        missing = size - (len(frame) - 4)
        if missing == 0:
            return frame
        fill += missing
    raise AssertionError(f"could not build a frame of exactly {size} bytes")


def test_frame_of_exactly_socket_request_max_bytes_is_served(
    broker: InProcessBroker, topic: str
) -> None:
    """The limit is inclusive, as in Kafka: a request of exactly socket.request.max.bytes is
    read and answered, even when it arrives in pieces."""
    name = unique("edge")
    create_topic(broker.bootstrap_servers, name, config={"max.message.bytes": str(MAX_REQUEST)})
    frame = _produce_frame_of_size(name, MAX_REQUEST)
    with Wire(broker.port) as wire:
        wire.send(frame[: len(frame) // 2])
        assert not wire.closed_by_peer(0.5), "closed before the frame was complete"
        wire.send(frame[len(frame) // 2 :])
        _, response = decode_response(0, 9, wire.read_frame())
        (partition,) = response.responses[0].partition_responses
        assert (int(partition.error_code.value), partition.base_offset) == (NONE, 0)
    assert log_end(broker.port, name) == 1
    _still_fine(broker, topic)


GARBAGE = {
    "http": b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n",
    "random": random.Random(7).randbytes(4096),
    "tls-hello": bytes.fromhex("160301012c010001280303") + random.Random(8).randbytes(290),
    # A plausible size prefix, then a header naming ApiVersions v3 and a body of noise.
    "noise-body": struct.pack(">ihhih", 40, 18, 3, 1, 2) + b"ab" + random.Random(9).randbytes(30),
    # A Metadata v12 header whose client id length runs past the end of the frame.
    "client-id-overrun": struct.pack(">ihhih", 12, 3, 12, 5, 500) + b"xx",
}


@pytest.mark.parametrize("kind", sorted(GARBAGE))
def test_garbage_bytes_close_the_connection(broker: InProcessBroker, topic: str, kind: str) -> None:
    with Wire(broker.port) as wire:
        wire.send(GARBAGE[kind])
        assert wire.closed_by_peer(), f"{kind}: the broker kept a connection talking garbage"
    _still_fine(broker, topic)


def test_truncated_frame_then_close(broker: InProcessBroker, topic: str) -> None:
    frame = encode_request(0, 9, produce_request(topic, {0: build_batch([(b"k", b"lost", [])])}))
    for cut in (2, 4, 10, len(frame) // 2, len(frame) - 1):
        with Wire(broker.port) as wire:
            wire.send(frame[:cut])
            wire.sock.shutdown(socket.SHUT_WR)
            # At the end of the stream Kafka closes its side: no answer, nothing appended.
            assert wire.closed_by_peer(), f"cut at {cut}: the connection was left open"
    _still_fine(broker, topic)  # nothing of the truncated produce reached the log


@pytest.mark.parametrize("size", [0, -1, -(2**31)])
def test_zero_or_negative_size_prefix_closes_the_connection(
    broker: InProcessBroker, topic: str, size: int
) -> None:
    with Wire(broker.port) as wire:
        wire.send(struct.pack(">i", size) + b"\x00" * 16)
        assert wire.closed_by_peer()
    _still_fine(broker, topic)


def test_trailing_bytes_after_a_request_body_are_ignored(
    broker: InProcessBroker, topic: str
) -> None:
    """Kafka reads the fields it knows and ignores whatever follows (librdkafka relies on it,
    see the next test): a request with bytes after its body is answered, not refused."""
    cls = load_request_schema(3, 12)
    frame = encode_request(
        3,
        12,
        cls(
            topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False
        ),
        77,
    )
    padded = frame + b"\x01\x00\x00"
    with Wire(broker.port) as wire:
        wire.send(struct.pack(">i", len(padded) - 4) + padded[4:])
        correlation, response = decode_response(3, 12, wire.read_frame())
    assert correlation == 77
    assert topic in {t.name for t in response.topics}
    _still_fine(broker, topic)


def test_admin_client_can_list_topics(broker: InProcessBroker, topic: str) -> None:
    """confluent-kafka's list_topics() (librdkafka 2.x: Metadata v13 with stray bytes)."""
    client = admin(broker.bootstrap_servers)
    assert topic in client.list_topics(timeout=10).topics


def test_requests_before_a_bad_frame_are_still_answered(
    broker: InProcessBroker, topic: str
) -> None:
    """Three pipelined requests, then a bad size prefix, in one write: the three answers
    arrive, in order, and only then is the connection closed."""
    cls = load_request_schema(18, 3)
    body = cls(client_software_name="pipelined", client_software_version="1.0")
    frames = b"".join(encode_request(18, 3, body, correlation_id=c) for c in (101, 102, 103))
    with Wire(broker.port) as wire:
        wire.send(frames + struct.pack(">i", -5) + b"\x00" * 8)
        answered = [decode_response(18, 3, wire.read_frame())[0] for _ in range(3)]
        assert answered == [101, 102, 103]
        assert wire.closed_by_peer()
    _still_fine(broker, topic)


# -- API keys and versions -------------------------------------------------------------------


@pytest.mark.parametrize("api_key", [999, -1, 32767])
def test_unknown_api_key_closes_the_connection(
    broker: InProcessBroker, topic: str, api_key: int
) -> None:
    with Wire(broker.port) as wire:
        wire.send(header_only_frame(api_key, 0, 11, b"\x00" * 8))
        assert wire.closed_by_peer()
    _still_fine(broker, topic)


@pytest.mark.parametrize(("api_key", "version"), [(3, 99), (0, 13), (1, 0), (19, 0), (3, -1)])
def test_unsupported_version_of_a_supported_api_closes_the_connection(
    broker: InProcessBroker, topic: str, api_key: int, version: int
) -> None:
    with Wire(broker.port) as wire:
        supported = api_versions_v3(wire)
        assert api_key in supported
        low, high = supported[api_key]
        assert not low <= version <= high
        wire.send(header_only_frame(api_key, version, 12, b"\x00" * 8))
        assert wire.closed_by_peer()
    _still_fine(broker, topic)


@pytest.mark.parametrize("version", [0, 1, 2])
def test_legacy_produce_closes_the_connection_and_appends_nothing(
    broker: InProcessBroker, topic: str, version: int
) -> None:
    """Produce v0-v2 is advertised (old librdkafka needs the range to start at 0 to compress)
    but, as in Kafka 4, closes the connection: message format v0/v1 is never stored."""
    name = topic.encode()
    # A v0 message set of one message: offset, size, crc, magic 0, attributes, key, value.
    message = struct.pack(">bbi", 0, 0, -1) + struct.pack(">i", 5) + b"hello"
    message_set = struct.pack(">qi", 0, 4 + len(message)) + struct.pack(">I", 0) + message
    body = (
        struct.pack(">hi", 1, 5000)
        + struct.pack(">i", 1)
        + struct.pack(">h", len(name))
        + name
        + struct.pack(">ii", 1, 0)
        + struct.pack(">i", len(message_set))
        + message_set
    )
    end = log_end(broker.port, topic, 0)
    with Wire(broker.port) as wire:
        wire.send(header_only_frame(0, version, 77, body))
        assert wire.closed_by_peer()
    assert log_end(broker.port, topic, 0) == end
    _still_fine(broker, topic)


def test_api_versions_newer_than_supported_gets_a_v0_unsupported_version_answer(
    broker: InProcessBroker, topic: str
) -> None:
    correlation_id = 0x5A5A1234
    # What a future client would send: a flexible v2 header, then a body we cannot know.
    client = b"future-client"
    payload = (
        struct.pack(">hhih", 18, 9, correlation_id, len(client))
        + client
        + b"\x00"  # no tagged fields in the header
        + b"\x07future\x041.0\x00"  # compact strings and tagged fields, as v3 would have
        + b"\x01\x02\x03"
    )
    with Wire(broker.port) as wire:
        wire.send(struct.pack(">i", len(payload)) + payload)
        frame = wire.read_frame()
        # ApiVersions response v0, parsed by hand: header v0, error code, [key min max].
        (got_correlation, error_code, count) = struct.unpack_from(">ihi", frame, 0)
        assert got_correlation == correlation_id
        assert error_code == UNSUPPORTED_VERSION
        assert count > 0
        assert len(frame) == 10 + 6 * count, "a v0 response has nothing after the array"
        ranges = {
            key: (low, high)
            for key, low, high in (
                struct.unpack_from(">hhh", frame, 10 + 6 * i) for i in range(count)
            )
        }
        # The connection stays open, and the ranges are the real ones (Kafka sends only
        # ApiVersions' own; more is fine): the client retries with a version it can use.
        supported = api_versions_v3(wire)
        assert ranges[18] == supported[18]
        assert ranges[18][0] == 0 and ranges[18][1] < 9
        assert {k: supported.get(k) for k in ranges} == ranges
    _still_fine(broker, topic)


# -- Produce with bad record batches ---------------------------------------------------------


def _batch(n: int = 3, size: int = 10) -> bytes:
    return build_batch([(f"k{i}".encode(), b"v" * size, []) for i in range(n)], 0, 1_700_000_000)


def _bad_crc() -> bytes:
    data = bytearray(_batch())
    data[-1] ^= 0xFF  # a bit flip in the last record
    return bytes(data)


def _legacy_v1_message_set() -> bytes:
    """A v1 (magic 1) message set holding one message, with a correct CRC-32."""
    body = struct.pack(">bbq", 1, 0, 1_700_000_000) + struct.pack(">i", 1) + b"k"
    body += struct.pack(">i", 5) + b"value"
    message = struct.pack(">I", zlib.crc32(body)) + body
    return struct.pack(">qi", 0, len(message)) + message


def _batch_length(delta: int) -> bytes:
    data = bytearray(_batch())
    (length,) = struct.unpack_from(">i", data, BATCH_LENGTH_OFFSET)
    struct.pack_into(">i", data, BATCH_LENGTH_OFFSET, length + delta)
    return bytes(data)


def _magic(value: int) -> bytes:
    data = bytearray(_batch())
    data[16] = value
    return bytes(data)


INVALID_RECORD = 87
# Each bad batch, and Kafka's answer: CORRUPT_MESSAGE for a batch whose bytes do not check out,
# INVALID_RECORD where a producer did not send exactly one whole v2 batch.
CORRUPT = {
    "bad-crc": (_bad_crc, CORRUPT_MESSAGE),
    "v1-message-set": (_legacy_v1_message_set, INVALID_RECORD),
    "magic-3": (lambda: _magic(3), CORRUPT_MESSAGE),
    "batch-length-too-long": (lambda: _batch_length(+7), INVALID_RECORD),
    "batch-length-too-short": (lambda: _batch_length(-7), CORRUPT_MESSAGE),
    "batch-length-below-header": (
        lambda: _batch_length(-(len(_batch()) - BATCH_HEADER_SIZE + 40)),
        CORRUPT_MESSAGE,
    ),
    "truncated-header": (lambda: _batch()[:40], INVALID_RECORD),
    "second-batch-bad": (lambda: _batch() + _bad_crc(), INVALID_RECORD),
    "two-batches": (lambda: _batch() + _batch(), INVALID_RECORD),
    "empty": (lambda: b"", INVALID_RECORD),
}


@pytest.mark.parametrize("kind", sorted(CORRUPT))
def test_corrupt_batch_gets_kafkas_error_and_appends_nothing(
    broker: InProcessBroker, kind: str
) -> None:
    name = unique("corrupt")
    create_topic(broker.bootstrap_servers, name, partitions=2)
    produce(broker.bootstrap_servers, name, BEFORE, partition=0)
    produce(broker.bootstrap_servers, name, BEFORE[:3], partition=1)
    with Wire(broker.port) as wire:
        make, expected = CORRUPT[kind]
        results = raw_produce(wire, name, {0: make(), 1: _batch()})
        assert results[0].error_code == expected, results[0]
        assert results[0].base_offset == -1
        # The good partition of the same request is appended as usual.
        assert results[1].error_code == NONE, results[1]
        assert results[1].base_offset == 3
        # The connection survives a refused batch, like Kafka's.
        again = raw_produce(wire, name, {0: _batch(1)})
        assert again[0].error_code == NONE
        assert again[0].base_offset == len(BEFORE)
    assert log_end(broker.port, name, 0) == len(BEFORE) + 1
    records = consume(broker.bootstrap_servers, name, 0)
    assert_contiguous(records)
    assert [r.value for r in records][: len(BEFORE)] == BEFORE
    _still_fine_after(broker, name, len(BEFORE) + 1)


def test_corrupt_batch_with_acks_0_closes_the_connection(broker: InProcessBroker) -> None:
    """With acks=0 there is no answer to carry the error: like Kafka, the broker closes the
    connection, so the producer notices; a valid acks=0 batch is appended silently."""
    name = unique("acks0")
    create_topic(broker.bootstrap_servers, name)
    with Wire(broker.port) as wire:
        wire.send(encode_request(0, 9, produce_request(name, {0: _batch(2)}, acks=0)))
        wire.send(encode_request(0, 9, produce_request(name, {0: _bad_crc()}, acks=0)))
        assert wire.closed_by_peer()
    assert log_end(broker.port, name) == 2
    records = consume(broker.bootstrap_servers, name)
    assert [r.key for r in records] == [b"k0", b"k1"]


def _still_fine_after(broker: InProcessBroker, topic: str, end: int) -> None:
    produce(broker.bootstrap_servers, topic, [b"tail"])
    assert log_end(broker.port, topic, 0) == end + 1


def test_batch_over_max_message_bytes_gets_message_too_large(broker: InProcessBroker) -> None:
    name = unique("large")
    create_topic(broker.bootstrap_servers, name, config={"max.message.bytes": "2000"})
    produce(broker.bootstrap_servers, name, BEFORE)
    fits = build_batch([(None, b"x" * 1500, [])])
    too_big = build_batch([(None, b"x" * 3000, [])])
    assert len(fits) <= 2000 < len(too_big)
    with Wire(broker.port) as wire:
        result = raw_produce(wire, name, {0: too_big})[0]
        assert result.error_code == MESSAGE_TOO_LARGE, result
        assert log_end(broker.port, name) == len(BEFORE)
        result = raw_produce(wire, name, {0: fits})[0]
        assert (result.error_code, result.base_offset) == (NONE, len(BEFORE))
    records = consume(broker.bootstrap_servers, name)
    assert [r.value for r in records] == [*BEFORE, b"x" * 1500]


def test_real_producer_sees_message_too_large(broker: InProcessBroker) -> None:
    name = unique("large")
    create_topic(broker.bootstrap_servers, name, config={"max.message.bytes": "2000"})
    p = producer(broker.bootstrap_servers, **{"message.max.bytes": 100_000})
    errors: list[Any] = []
    p.produce(name, b"y" * 5000, partition=0, on_delivery=lambda err, _msg: errors.append(err))
    assert p.flush(20) == 0
    assert len(errors) == 1 and errors[0] is not None
    assert errors[0].code() == MESSAGE_TOO_LARGE
    assert log_end(broker.port, name) == 0


# -- CreateTopics validation -----------------------------------------------------------------


def _create_error(broker: InProcessBroker, topic: NewTopic) -> Any:
    client = admin(broker.bootstrap_servers)
    futures = client.create_topics([topic], operation_timeout=10)
    with pytest.raises(KafkaException) as info:
        futures[topic.topic].result(20)
    return info.value.args[0]


def _exists(broker: InProcessBroker, name: str) -> bool:
    return topic_error(broker.port, name) == NONE


@pytest.mark.parametrize("name", ["", ".", "..", "bad/name", "a b", "ünïcode", "a" * 250])
def test_invalid_topic_names_are_refused(broker: InProcessBroker, topic: str, name: str) -> None:
    err = _create_error(broker, NewTopic(name, 1, 1))
    assert err.code() == INVALID_TOPIC_EXCEPTION, err
    assert err.str()
    assert not _exists(broker, name)
    _still_fine(broker, topic)


def test_longest_legal_topic_name_is_accepted(broker: InProcessBroker) -> None:
    name = "a" * 249
    create_topic(broker.bootstrap_servers, name)
    produce(broker.bootstrap_servers, name, [b"fine"])
    assert [r.value for r in consume(broker.bootstrap_servers, name)] == [b"fine"]


def test_zero_partitions_is_refused(broker: InProcessBroker, topic: str) -> None:
    name = unique("parts")
    err = _create_error(broker, NewTopic(name, 0, 1))
    assert err.code() == INVALID_PARTITIONS, err
    assert not _exists(broker, name)
    _still_fine(broker, topic)


@pytest.mark.parametrize("version", [4, 7])
@pytest.mark.parametrize("partitions", [0, -2, -100])
def test_partitions_below_one_are_refused_on_the_wire(
    broker: InProcessBroker, partitions: int, version: int
) -> None:
    """The client refuses some of these itself; the broker must too (-1 means default).
    v4 is what librdkafka sends, v7 what the Java AdminClient sends."""
    cls = load_request_schema(19, version)
    module = __import__(cls.__module__, fromlist=["CreatableTopic"])
    name = unique("parts")
    body = cls(
        topics=(
            module.CreatableTopic(
                name=name,
                num_partitions=partitions,
                replication_factor=1,
                assignments=(),
                configs=(),
            ),
        ),
        timeout=datetime.timedelta(seconds=10),
        validate_only=False,
    )
    with Wire(broker.port) as wire:
        response = wire.request(19, version, body)
    (result,) = response.topics
    assert int(result.error_code.value) == INVALID_PARTITIONS, result
    assert result.error_message
    assert not _exists(broker, name)


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("retention.ms", "abc"),
        ("nosuch.key", "1"),
        ("segment.bytes", "-5"),
        ("cleanup.policy", "shred"),
        ("max.message.bytes", "1e3"),
        ("retention.bytes", ""),
    ],
)
def test_unknown_or_invalid_topic_configs_are_refused(
    broker: InProcessBroker, topic: str, key: str, value: str
) -> None:
    name = unique("cfg")
    err = _create_error(broker, NewTopic(name, 1, 1, config={key: value}))
    assert err.code() == INVALID_CONFIG, err
    assert key in err.str(), f"the message should name the key: {err.str()!r}"
    assert not _exists(broker, name)
    _still_fine(broker, topic)


def test_produce_to_missing_partitions_and_topics(broker: InProcessBroker, topic: str) -> None:
    with Wire(broker.port) as wire:
        for partition in (1, 7, -1):
            result = raw_produce(wire, topic, {partition: _batch(1)})[partition]
            assert result.error_code == UNKNOWN_TOPIC_OR_PARTITION, result
        for name in ("no-such-topic", "../escape"):
            result = raw_produce(wire, name, {0: _batch(1)})[0]
            assert result.error_code == UNKNOWN_TOPIC_OR_PARTITION, result
        # The connection is still good for a valid request.
        result = raw_produce(wire, topic, {0: _batch(1)})[0]
        assert (result.error_code, result.base_offset) == (NONE, len(BEFORE))
    assert not _exists(broker, "no-such-topic"), "Produce must not create topics"
    records = consume(broker.bootstrap_servers, topic)
    assert [r.value for r in records][: len(BEFORE)] == BEFORE
    assert len(records) == len(BEFORE) + 1


@pytest.mark.parametrize("name", ["../escape", "..", "bad/name", "a" * 250, "nul\x00byte"])
def test_metadata_auto_creation_refuses_invalid_names(
    broker: InProcessBroker, topic: str, name: str
) -> None:
    """auto.create.topics.enable is on by default: a Metadata request asking to create a
    topic validates its name like CreateTopics, and nothing appears on disk."""
    cls = load_request_schema(3, 12)
    module = __import__(cls.__module__, fromlist=["MetadataRequestTopic"])
    body = cls(
        topics=(module.MetadataRequestTopic(topic_id=None, name=name),),
        allow_auto_topic_creation=True,
        include_topic_authorized_operations=False,
    )
    before = sorted(p.name for p in broker.data_dir.parent.rglob("*"))
    with Wire(broker.port) as wire:
        response = wire.request(3, 12, body)
    (result,) = response.topics
    assert int(result.error_code.value) == INVALID_TOPIC_EXCEPTION, result
    assert sorted(p.name for p in broker.data_dir.parent.rglob("*")) == before
    _still_fine(broker, topic)


# -- connections dropped mid-request under load ----------------------------------------------


def _connection_count(broker: InProcessBroker) -> float:
    with urllib.request.urlopen(broker.http_url + "/metrics", timeout=5) as resp:
        text = resp.read().decode()
    for line in text.splitlines():
        if line.startswith("kafka_server_socket_server_metrics_connection_count"):
            return float(line.split()[-1])
    raise AssertionError("no connection_count metric")


def _drop(port: int, data: bytes, reset: bool) -> None:
    sock = socket.create_connection(("127.0.0.1", port), timeout=5)
    try:
        if reset:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        sock.sendall(data)
    finally:
        sock.close()


@pytest.fixture
def background_producer(broker: InProcessBroker) -> Iterator[dict[str, Any]]:
    """A producer thread that keeps producing to its own topic until told to stop."""
    name = unique("steady")
    create_topic(broker.bootstrap_servers, name)
    state: dict[str, Any] = {
        "topic": name,
        "stop": threading.Event(),
        "sent": [],
        "acked": [],
        "errors": [],
    }

    def run() -> None:
        p = producer(
            broker.bootstrap_servers,
            **{"linger.ms": 2, "max.in.flight.requests.per.connection": 1},
        )

        def on_delivery(err: Any, msg: Any) -> None:
            if err is not None:
                state["errors"].append(str(err))
            else:
                state["acked"].append((msg.offset(), msg.value()))

        i = 0
        while not state["stop"].is_set() and i < 50_000:
            value = f"steady-{i}".encode()
            try:
                p.produce(name, value, partition=0, on_delivery=on_delivery)
            except BufferError:
                p.poll(0.05)
                continue
            state["sent"].append(value)
            i += 1
            p.poll(0.001)  # paces the producer at most ~1000 records/s
        state["unflushed"] = p.flush(30)

    thread = threading.Thread(target=run, name="background-producer", daemon=True)
    state["thread"] = thread
    thread.start()
    yield state
    state["stop"].set()
    thread.join(40)


def test_hundred_connections_dropped_mid_request_do_not_disturb_a_producer(
    broker: InProcessBroker, topic: str, background_producer: dict[str, Any]
) -> None:
    state = background_producer
    wait_until(lambda: len(state["acked"]) >= 200, 20, what="the producer to get going")
    baseline = _connection_count(broker)
    junk_topic = unique("junk")
    create_topic(broker.bootstrap_servers, junk_topic)
    frame = encode_request(0, 9, produce_request(junk_topic, {0: _batch(50, 100)}))
    rng = random.Random(100)
    for i in range(100):
        kind = i % 4
        if kind == 0:  # size prefix only
            data = frame[:4]
        elif kind == 1:  # part of the header
            data = frame[: rng.randrange(5, 20)]
        elif kind == 2:  # most of the body
            data = frame[: rng.randrange(20, len(frame) - 1)]
        else:  # a whole request, then gone before the answer
            data = frame
        _drop(broker.port, data, reset=i % 2 == 0)
    acked_during = len(state["acked"])
    wait_until(
        lambda: len(state["acked"]) >= acked_during + 200, 20, what="the producer to continue"
    )
    state["stop"].set()
    state["thread"].join(40)
    assert not state["thread"].is_alive()
    assert state["unflushed"] == 0
    assert state["errors"] == []
    print(f"{len(state['sent'])} records produced around the dropped connections")
    acked = state["acked"]
    assert len(acked) == len(state["sent"])
    # Every record arrived, once, in order, at the offset its ack named.
    assert [offset for offset, _ in acked] == list(range(len(acked)))
    records = consume(broker.bootstrap_servers, state["topic"], 0, 0, len(acked))
    assert_contiguous(records)
    assert [r.value for r in records] == state["sent"]
    # Requests that arrived whole were served; a torn one left nothing behind.
    assert log_end(broker.port, junk_topic) % 50 == 0
    assert log_end(broker.port, junk_topic) <= 25 * 50
    # No connection is leaked: the count falls back to what the live clients use.
    wait_until(
        lambda: _connection_count(broker) <= baseline,
        10,
        what=f"the connection count to drop back to {baseline}",
    )
    _still_fine(broker, topic)
