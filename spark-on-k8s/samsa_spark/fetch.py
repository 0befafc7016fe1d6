"""The columnar read path: Fetch requests to a partition's leader on a plain socket, and the
records field of each response handed whole to `samsa_spark.records`.

Only Fetch is spoken here (v5: the first with the log start offset, and within the range
Kafka 4 still serves); finding the leader stays with librdkafka's metadata, which knows
bootstrap lists and retries. The socket is PLAINTEXT: with TLS or SASL configured
(`kafka.security.protocol`), the source reads through librdkafka instead.
"""

from __future__ import annotations

import socket
import struct
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass

import pyarrow as pa

from samsa_spark.offsets import OffsetRange
from samsa_spark.records import decode

_FETCH = 1
_FETCH_VERSION = 5
_HEADER = struct.Struct(">hhih")  # api key, version, correlation id, client id length
_CLIENT_ID = b"samsa-spark"
# replica id, max wait, min bytes, max bytes, isolation level, one topic
_REQUEST = struct.Struct(">iiiibi")
# one partition: index, fetch offset, log start offset, partition max bytes
_PARTITION = struct.Struct(">iqqi")
_I32 = struct.Struct(">i")
# index, error, high watermark, last stable offset, log start offset
_PARTITION_RESPONSE = struct.Struct(">ihqqq")
_ABORTED = struct.Struct(">qq")

OFFSET_OUT_OF_RANGE = 1
UNKNOWN_TOPIC_OR_PARTITION = 3
# Errors that mean "ask the metadata again for the leader, then retry".
_RETRY_ELSEWHERE = {5, 6, 9, 13, 56, 74, 75, 78, 100, 103}


class FetchError(RuntimeError):
    """A Fetch answered with an error code a retry will not cure."""

    def __init__(self, code: int) -> None:
        super().__init__(f"Fetch failed with Kafka error code {code}")
        self.code = code


class NoProgressError(TimeoutError):
    """No record came from the partition for the whole timeout."""

    def __init__(self, position: int) -> None:
        super().__init__(f"no records at offset {position}")
        self.position = position


@dataclass(frozen=True)
class FetchedPartition:
    error: int
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    aborted: list[tuple[int, int]]  # (producer id, first offset)
    records: memoryview


@dataclass
class FetchSettings:
    max_wait_ms: int
    max_bytes: int
    read_committed: bool

    @classmethod
    def from_kafka(cls, kafka: Mapping[str, str]) -> FetchSettings:
        return cls(
            max_wait_ms=int(kafka.get("fetch.wait.max.ms", 100)),
            max_bytes=int(kafka.get("max.partition.fetch.bytes", 8 << 20)),
            # librdkafka's default, which the librdkafka path had
            read_committed=kafka.get("isolation.level", "read_committed") == "read_committed",
        )


def fetch_request(
    correlation_id: int, topic: str, partition: int, offset: int, settings: FetchSettings
) -> bytes:
    name = topic.encode()
    body = (
        _HEADER.pack(_FETCH, _FETCH_VERSION, correlation_id, len(_CLIENT_ID))
        + _CLIENT_ID
        + _REQUEST.pack(
            -1, settings.max_wait_ms, 1, settings.max_bytes, int(settings.read_committed), 1
        )
        + struct.pack(">h", len(name))
        + name
        + _I32.pack(1)
        + _PARTITION.pack(partition, offset, -1, settings.max_bytes)
    )
    return _I32.pack(len(body)) + body


def parse_fetch_response(frame: memoryview, partition: int) -> FetchedPartition:
    """The one partition of a Fetch v5 response frame (after its size prefix)."""
    pos = 8  # correlation id, throttle time
    (topics,) = _I32.unpack_from(frame, pos)
    pos += 4
    for _ in range(topics):
        (name_len,) = struct.unpack_from(">h", frame, pos)
        pos += 2 + name_len
        (parts,) = _I32.unpack_from(frame, pos)
        pos += 4
        for _ in range(parts):
            index, error, hw, lso, log_start = _PARTITION_RESPONSE.unpack_from(frame, pos)
            pos += _PARTITION_RESPONSE.size
            (n_aborted,) = _I32.unpack_from(frame, pos)
            pos += 4
            aborted = []
            for _ in range(max(n_aborted, 0)):
                aborted.append(_ABORTED.unpack_from(frame, pos))
                pos += _ABORTED.size
            (size,) = _I32.unpack_from(frame, pos)
            pos += 4
            records = frame[pos : pos + max(size, 0)]
            pos += max(size, 0)
            if index == partition:
                return FetchedPartition(error, hw, lso, log_start, aborted, records)
    raise FetchError(UNKNOWN_TOPIC_OR_PARTITION)


class FetchConnection:
    """One blocking connection to a broker, one request in flight."""

    def __init__(self, host: str, port: int, timeout_s: float) -> None:
        self.sock = socket.create_connection((host, port), timeout=timeout_s)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.correlation = 0

    def fetch(
        self, topic: str, partition: int, offset: int, settings: FetchSettings
    ) -> FetchedPartition:
        self.correlation += 1
        self.sock.sendall(fetch_request(self.correlation, topic, partition, offset, settings))
        (size,) = _I32.unpack(self._read(4))
        frame = memoryview(self._read(size))
        if _I32.unpack_from(frame, 0)[0] != self.correlation:
            raise ConnectionError("Fetch response out of step with its request")
        return parse_fetch_response(frame, partition)

    def _read(self, n: int) -> bytearray:
        buf = bytearray(n)
        view = memoryview(buf)
        got = 0
        while got < n:
            k = self.sock.recv_into(view[got:])
            if k == 0:
                raise ConnectionError("the broker closed the connection")
            got += k
        return buf

    def close(self) -> None:
        self.sock.close()


# One connection per broker for the Python worker's tasks, which run one at a time: a
# streaming micro-batch's small ranges would otherwise each pay a connection set-up.
_POOL: dict[tuple[str, int], FetchConnection] = {}


def _connection(addr: tuple[str, int], timeout_s: float) -> FetchConnection:
    conn = _POOL.pop(addr, None)
    return conn if conn is not None else FetchConnection(*addr, timeout_s=timeout_s)


def read_range(
    leader: Callable[[], tuple[str, int]],
    r: OffsetRange,
    settings: FetchSettings,
    include_headers: bool,
    timeout_s: float,
    on_error: Callable[[int, int, FetchedPartition], int],
) -> Iterator[pa.RecordBatch]:
    """The rows of `r` as RecordBatches, one a Fetch response.

    `leader` finds the partition's leader again after a connection or leadership error;
    `on_error(code, position, fetched)` decides about data loss: it raises, or returns the
    position to go on from. No progress for `timeout_s` raises NoProgressError.
    """
    position = r.from_offset
    conn: FetchConnection | None = None
    addr: tuple[str, int] | None = None
    last_progress = time.monotonic()
    try:
        while position < r.until_offset:
            if time.monotonic() - last_progress > timeout_s:
                raise NoProgressError(position)
            if conn is None:
                try:
                    addr = leader()
                    conn = _connection(addr, timeout_s)
                except OSError:
                    time.sleep(0.1)  # backoff before asking the metadata again
                    continue
            try:
                got = conn.fetch(r.topic, r.partition, position, settings)
            except (OSError, ConnectionError):
                conn.close()
                conn = None
                continue
            if got.error in _RETRY_ELSEWHERE:
                conn.close()
                conn = None
                time.sleep(0.1)
                continue
            if got.error:
                position = on_error(got.error, position, got)
                last_progress = time.monotonic()
                continue
            d = decode(
                got.records,
                r.topic,
                r.partition,
                position,
                r.until_offset,
                include_headers=include_headers,
                read_committed=settings.read_committed,
                aborted=got.aborted,
            )
            if d.batch.num_rows:
                yield d.batch
            if d.next_offset > position:
                position = d.next_offset
                last_progress = time.monotonic()
            elif len(got.records):
                raise FetchError(10)  # MESSAGE_TOO_LARGE: one batch exceeds the fetch size
    finally:
        # Between requests the connection is idle and in step: another range may use it.
        if conn is not None and addr is not None:
            stale = _POOL.pop(addr, None)
            if stale is not None:
                stale.close()
            _POOL[addr] = conn
