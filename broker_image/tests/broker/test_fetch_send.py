"""Fetched file regions reach the client whole and in order, whether the socket takes them at
once (os.sendfile on the spot), only in part (the rest by the loop's sendfile) or not at all
(a reader slower than the broker)."""

from __future__ import annotations

import socket
import struct
from collections.abc import Iterator

import pytest
from confluent_kafka import TopicPartition
from kafka_support import (
    NONE,
    consumer,
    create_topic,
    decode_response,
    encode_request,
    fetch_request,
)
from kafka_support import producer as make_producer

from samsa.testing import InProcessBroker

FETCH_VERSION = 11
# Larger than a loopback socket's buffers, so that a send stops part-way.
PARTITION_BYTES = 6 << 20
RECORD = 100_000


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcessBroker]:
    with InProcessBroker(tmp_path_factory.mktemp("samsa")) as b:
        yield b


def _fill(broker: InProcessBroker, topic: str, partitions: int) -> list[list[bytes]]:
    """PARTITION_BYTES of distinct records in each partition; the values, per partition."""
    create_topic(broker.bootstrap_servers, topic, partitions)
    p = make_producer(broker.bootstrap_servers, **{"linger.ms": 5, "batch.size": 1_000_000})
    values: list[list[bytes]] = [[] for _ in range(partitions)]
    for i in range(PARTITION_BYTES // RECORD * partitions):
        part = i % partitions
        value = i.to_bytes(8, "big") * (RECORD // 8)
        values[part].append(value)
        while True:
            try:
                p.produce(topic, value, partition=part)
                break
            except BufferError:
                p.poll(0.05)
    assert p.flush(60) == 0
    return values


def _segment(broker: InProcessBroker, topic: str, partition: int) -> bytes:
    return (broker.data_dir / f"{topic}-{partition}" / f"{0:020d}.log").read_bytes()


def test_a_consumer_reads_back_every_record_of_large_fetches(
    broker: InProcessBroker, topic: str
) -> None:
    values = _fill(broker, topic, 3)
    c = consumer(
        broker.bootstrap_servers,
        **{"fetch.max.bytes": 50 << 20, "max.partition.fetch.bytes": 20 << 20},
    )
    try:
        c.assign([TopicPartition(topic, p, 0) for p in range(3)])
        got: list[list[bytes]] = [[] for _ in range(3)]
        want = sum(len(v) for v in values)
        read = 0
        while read < want:
            msgs = c.consume(1000, 10)
            assert msgs, f"nothing more after {read} of {want} records"
            for m in msgs:
                assert m.error() is None, m.error()
                got[m.partition()].append(m.value())
                read += 1
    finally:
        c.close()
    assert got == values


def test_a_slow_reader_gets_whole_responses_in_order(broker: InProcessBroker, topic: str) -> None:
    """Two pipelined fetches of two partitions each, read through a small receive window: the
    broker's sends stop part-way and go on when the reader catches up."""
    _fill(broker, topic, 2)
    logs = [_segment(broker, topic, p) for p in range(2)]
    request = fetch_request(topic, range(2), 64 << 20, version=FETCH_VERSION)
    # The receive window is fixed before connecting; a small one keeps the broker waiting.
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16 * 1024)
    sock.settimeout(60)
    with sock:
        sock.connect(("127.0.0.1", broker.port))
        sock.sendall(encode_request(1, FETCH_VERSION, request, 1))
        sock.sendall(encode_request(1, FETCH_VERSION, request, 2))
        for correlation_id in (1, 2):
            (size,) = struct.unpack(">i", _recv_exactly(sock, 4))
            got, response = decode_response(1, FETCH_VERSION, _recv_exactly(sock, size))
            assert got == correlation_id
            parts = response.responses[0].partitions
            assert [int(p.error_code.value) for p in parts] == [NONE, NONE]
            assert [bytes(p.records) for p in parts] == logs


def _recv_exactly(sock: socket.socket, n: int) -> bytes:
    out = bytearray()
    while len(out) < n:
        # Small reads, so the window stays small and the broker's sends stop part-way.
        chunk = sock.recv(min(n - len(out), 4096))
        if not chunk:
            raise EOFError(f"connection closed after {len(out)} of {n} bytes")
        out += chunk
    return bytes(out)
