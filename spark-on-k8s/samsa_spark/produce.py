"""The sink's columnar write path: Arrow batches partitioned and encoded into record batches
(`samsa_spark.encode`), sent with our own Produce v3 requests to each partition's leader on
plain sockets, idempotently unless ``kafka.enable.idempotence=false``.

The producer is Kafka's idempotent producer cut to what a sink task needs: one InitProducerId,
a sequence number per partition, at most one batch per partition in flight (one request per
leader), and a retried batch sent again byte for byte, so the leader drops what it already
holds (DUPLICATE_SEQUENCE_NUMBER counts as written). Finding leaders stays with librdkafka's
metadata. TLS, SASL and client settings this path does not know keep the librdkafka producer
(`columnar_settings` says which).
"""

from __future__ import annotations

import selectors
import socket
import struct
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from samsa_spark.encode import CODECS, Columns, batch

_PRODUCE, _PRODUCE_VERSION = 0, 3
_INIT_PRODUCER_ID = 22
_HEADER = struct.Struct(">hhih")  # api key, version, correlation id, client id length
_CLIENT_ID = b"samsa-spark"
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
# index, error code, base offset, log append time
_PARTITION_RESPONSE = struct.Struct(">ihqq")

_DUPLICATE_SEQUENCE_NUMBER = 46
# Errors after which the batch is sent again (to the leader the metadata names then).
_RETRIABLE = {3, 5, 6, 7, 13, 14, 15, 19, 20, 56, 74, 75, 78, 100, 103}
# The broker's limit on one batch (message.max.bytes) is 1 MB by default.
_MAX_BATCH_BYTES = 1_000_000
_RECORD_OVERHEAD = 24  # upper bound of a record's varints and attributes

# kafka.* settings the columnar writer carries out; any other keeps librdkafka.
_UNDERSTOOD = {
    "bootstrap.servers",
    "acks",
    "request.required.acks",
    "enable.idempotence",
    "compression.type",
    "compression.codec",
    "batch.size",
    "linger.ms",
    "queue.buffering.max.ms",
    "client.id",
    "security.protocol",
    "request.timeout.ms",
    "message.timeout.ms",
    "delivery.timeout.ms",
    "partitioner",
    # these only tune librdkafka's metadata look-ups (which this path still uses) or its
    # retries, which this path does in its own way
    "metadata.max.age.ms",
    "topic.metadata.refresh.interval.ms",
    "socket.timeout.ms",
    "retries",
    "retry.backoff.ms",
    "max.in.flight.requests.per.connection",
}


class ProduceError(RuntimeError):
    """A Produce or InitProducerId answered with an error a retry will not cure."""

    def __init__(self, what: str, code: int) -> None:
        super().__init__(f"{what} failed with Kafka error code {code}")
        self.code = code


@dataclass(frozen=True)
class ProduceSettings:
    acks: int
    idempotent: bool
    codec: int
    batch_bytes: int
    timeout_s: float  # how long a batch may take to be acknowledged, retries included


def columnar_settings(kafka: Mapping[str, str], timeout_s: float) -> ProduceSettings | None:
    """The columnar writer's settings, or None where only librdkafka can honour `kafka`
    (TLS or SASL, a partitioner other than Kafka's murmur2, settings it does not know)."""
    if any(k not in _UNDERSTOOD for k in kafka):
        return None
    if kafka.get("security.protocol", "plaintext").lower() != "plaintext":
        return None
    if kafka.get("partitioner", "murmur2_random") not in ("murmur2", "murmur2_random"):
        return None
    codec = CODECS.get(kafka.get("compression.type", kafka.get("compression.codec", "none")))
    if codec is None:
        return None
    raw_acks = kafka.get("acks", kafka.get("request.required.acks", "all")).lower()
    acks = -1 if raw_acks == "all" else int(raw_acks)
    idempotent = kafka.get("enable.idempotence", "true").lower() == "true"
    if acks not in (-1, 1) or (idempotent and acks != -1):
        # acks=0 has no response to wait for; idempotence without acks=all is refused by
        # librdkafka with its own clear message.
        return None
    batch_bytes = min(int(kafka.get("batch.size", _MAX_BATCH_BYTES)), _MAX_BATCH_BYTES)
    timeout_ms = kafka.get("delivery.timeout.ms", kafka.get("message.timeout.ms"))
    return ProduceSettings(
        acks=acks,
        idempotent=idempotent,
        codec=codec,
        batch_bytes=max(batch_bytes, 1024),
        timeout_s=int(timeout_ms) / 1000 if timeout_ms else timeout_s,
    )


def _string(s: str | None) -> bytes:
    if s is None:
        return _I16.pack(-1)
    raw = s.encode()
    return _I16.pack(len(raw)) + raw


class Connection:
    """One blocking connection to a broker with any number of requests in flight."""

    def __init__(self, host: str, port: int, timeout_s: float) -> None:
        self.sock = socket.create_connection((host, port), timeout=timeout_s)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.correlation = 0

    def send(self, api_key: int, version: int, body: list[bytes]) -> int:
        self.correlation += 1
        head = _HEADER.pack(api_key, version, self.correlation, len(_CLIENT_ID)) + _CLIENT_ID
        size = len(head) + sum(len(b) for b in body)
        self.sock.sendall(b"".join([_I32.pack(size), head, *body]))
        return self.correlation

    def receive(self, correlation: int) -> memoryview:
        """The response body after its correlation id."""
        (size,) = _I32.unpack(self._read(4))
        frame = memoryview(self._read(size))
        if _I32.unpack_from(frame, 0)[0] != correlation:
            raise ConnectionError("response out of step with its request")
        return frame[4:]

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


def init_producer_id(conn: Connection) -> tuple[int, int]:
    """InitProducerId v0 without a transactional id: (producer id, epoch)."""
    corr = conn.send(_INIT_PRODUCER_ID, 0, [_string(None), _I32.pack(60_000)])
    _throttle, error, pid, epoch = struct.unpack_from(">ihqh", conn.receive(corr), 0)
    if error:
        raise ProduceError("InitProducerId", error)
    return pid, epoch


def produce_request(
    acks: int, timeout_ms: int, batches: Mapping[tuple[str, int], bytes]
) -> list[bytes]:
    """The body of a Produce v3 request: one batch for each (topic, partition)."""
    by_topic: dict[str, list[tuple[int, bytes]]] = {}
    for (t, p), b in batches.items():
        by_topic.setdefault(t, []).append((p, b))
    out = [_string(None), struct.pack(">hii", acks, timeout_ms, len(by_topic))]
    for t, parts in by_topic.items():
        out += [_string(t), _I32.pack(len(parts))]
        for p, b in parts:
            out += [struct.pack(">ii", p, len(b)), b]
    return out


def parse_produce_response(body: memoryview) -> dict[tuple[str, int], int]:
    """Error code of each partition of a Produce v3 response body."""
    pos = 0
    (topics,) = _I32.unpack_from(body, pos)
    pos += 4
    out: dict[tuple[str, int], int] = {}
    for _ in range(topics):
        (name_len,) = _I16.unpack_from(body, pos)
        name = bytes(body[pos + 2 : pos + 2 + name_len]).decode()
        pos += 2 + name_len
        (parts,) = _I32.unpack_from(body, pos)
        pos += 4
        for _ in range(parts):
            index, error, _base, _append_time = _PARTITION_RESPONSE.unpack_from(body, pos)
            pos += _PARTITION_RESPONSE.size
            out[(name, index)] = error
    return out


@dataclass
class _Partition:
    """What one partition has waiting: encoded records not yet sealed, and sealed batches."""

    sections: list[bytes] = field(default_factory=list)
    count: int = 0
    size: int = 0
    sealed: deque[bytes] = field(default_factory=deque)
    in_flight: bool = False
    sequence: int = 0
    first_try: float = 0.0  # since when the first sealed batch has waited
    retry_at: float = 0.0  # after a retriable error: not before this


class ColumnarProducer:
    """Publishes RecordBatches of the sink's columns; `flush` returns once every record sent
    is acknowledged, or raises."""

    def __init__(
        self,
        settings: ProduceSettings,
        partitions_of: Callable[[str], int],
        leaders_of: Callable[[str], dict[int, tuple[str, int]]],
    ) -> None:
        self.settings = settings
        self.partitions_of = partitions_of
        self.leaders_of = leaders_of
        self.sent = 0
        self.topics: set[str] = set()
        self._counts: dict[str, int] = {}
        self._leaders: dict[tuple[str, int], tuple[str, int]] = {}
        self._parts: dict[tuple[str, int], _Partition] = {}
        self._conns: dict[tuple[str, int], Connection] = {}
        # leader address -> (correlation id, the batches in that request)
        self._in_flight: dict[tuple[str, int], tuple[int, dict[tuple[str, int], bytes]]] = {}
        self._selector = selectors.DefaultSelector()
        self._producer: tuple[int, int] = (-1, -1)
        self._sticky = 0

    def begin(self) -> None:
        """Count afresh (a task's records and topics); partition counts are asked again."""
        self.sent = 0
        self.topics = set()
        self._counts.clear()

    # --- encoding -------------------------------------------------------------------------

    def publish(
        self,
        rb: pa.RecordBatch,
        topic_option: str | None,
        extra_header: tuple[bytes, bytes] | None = None,
    ) -> None:
        n = rb.num_rows
        if n == 0:
            return
        cols = {name.lower(): rb.column(i) for i, name in enumerate(rb.schema.names)}
        columns = Columns.of(cols.get("key"), cols["value"], cols.get("headers"))
        if topic_option:
            groups = [(topic_option, np.arange(n))]
        else:
            topics = cols["topic"]
            if topics.null_count:
                raise ValueError("a row has a null topic and the option topic is not set")
            groups = []
            for t in pc.unique(topics).to_pylist():
                mask = pc.equal(topics, t).to_numpy(zero_copy_only=False)
                groups.append((t, np.flatnonzero(mask)))
        explicit = cols.get("partition")
        sizes = self._row_sizes(columns, extra_header)
        for topic, rows in groups:
            count = self._partition_count(topic)
            parts = self._partitions(columns, count, rows, explicit)
            order = np.argsort(parts, kind="stable")
            sorted_parts = parts[order]
            bounds = np.flatnonzero(np.diff(sorted_parts)) + 1
            for chunk in np.split(order, bounds):
                p = int(parts[chunk[0]])
                self._append(topic, p, columns, rows[chunk], sizes, extra_header)
        self.sent += n
        self._drive(block=False)
        while self._backlog() > 2 * len(self._parts):
            self._drive(block=True)

    def _backlog(self) -> int:
        return sum(len(part.sealed) for part in self._parts.values())

    def _partition_count(self, topic: str) -> int:
        count = self._counts.get(topic)
        if count is None:
            count = self.partitions_of(topic)
            self._counts[topic] = count
        self.topics.add(topic)
        return count

    def _partitions(
        self, columns: Columns, count: int, rows: np.ndarray, explicit: pa.Array | None
    ) -> np.ndarray:
        parts = columns.partitions(count)[rows]
        unkeyed = parts < 0
        if unkeyed.any():
            # Kafka's sticky partitioning for null keys: one partition at a time.
            parts[unkeyed] = self._sticky % count
            self._sticky += 1
        if explicit is not None:
            given = explicit.take(pa.array(rows))
            chosen = ~given.is_null().to_numpy(zero_copy_only=False)
            if chosen.any():
                values = given.fill_null(0).to_numpy().astype(np.int32)
                parts[chosen] = values[chosen]
                if (values[chosen] < 0).any() or (values[chosen] >= count).any():
                    raise ValueError(f"a row names a partition that the topic (of {count}) lacks")
        return parts

    @staticmethod
    def _row_sizes(columns: Columns, extra: tuple[bytes, bytes] | None) -> np.ndarray:
        """An upper bound of each row's encoded size, to cut batches below the size limit."""
        size = np.maximum(columns.key[1], 0) + np.maximum(columns.value[1], 0) + _RECORD_OVERHEAD
        if len(columns.h_key[1]):
            per_entry = np.maximum(columns.h_key[1], 0) + np.maximum(columns.h_value[1], 0) + 10
            ends = np.concatenate([[0], np.cumsum(per_entry)])
            size += ends[columns.h_first + columns.h_count] - ends[columns.h_first]
        if extra is not None:
            size += len(extra[0]) + len(extra[1]) + 10
        return size

    def _append(
        self,
        topic: str,
        p: int,
        columns: Columns,
        rows: np.ndarray,
        sizes: np.ndarray,
        extra: tuple[bytes, bytes] | None,
    ) -> None:
        part = self._parts.setdefault((topic, p), _Partition())
        limit = self.settings.batch_bytes
        cum = np.cumsum(sizes[rows])
        start = 0
        while start < len(rows):
            room = limit - part.size
            # rows that still fit in the open batch (at least one, if the batch is empty)
            base = cum[start - 1] if start else 0
            stop = int(np.searchsorted(cum, base + room, side="right"))
            if stop <= start:
                if part.count:
                    self._seal(topic, p, part)
                    continue
                stop = start + 1
            chunk = rows[start:stop]
            part.sections.append(columns.records(chunk, extra, first_delta=part.count))
            part.count += len(chunk)
            part.size += int(cum[stop - 1] - base)
            start = stop
            if part.size >= limit:
                self._seal(topic, p, part)

    def _seal(self, topic: str, p: int, part: _Partition) -> None:
        if not part.count:
            return
        pid, epoch = self._producer_id()
        sequence = part.sequence if self.settings.idempotent else -1
        part.sealed.append(
            batch(
                b"".join(part.sections),
                part.count,
                int(time.time() * 1000),
                codec=self.settings.codec,
                producer_id=pid,
                producer_epoch=epoch,
                base_sequence=sequence,
            )
        )
        # Kafka's sequences wrap at 2**31.
        part.sequence = (part.sequence + part.count) % (1 << 31)
        part.first_try = part.first_try or time.monotonic()
        part.sections, part.count, part.size = [], 0, 0

    def _producer_id(self) -> tuple[int, int]:
        if not self.settings.idempotent or self._producer[0] >= 0:
            return self._producer
        deadline = time.monotonic() + self.settings.timeout_s
        while True:
            topic, p = next(iter(self._parts))
            try:
                self._producer = init_producer_id(self._conn(self._leader(topic, p)))
                return self._producer
            except ProduceError as e:
                if e.code not in _RETRIABLE or time.monotonic() > deadline:
                    raise
            except OSError:
                if time.monotonic() > deadline:
                    raise
                self._forget_leaders()
            time.sleep(0.1)

    # --- sending --------------------------------------------------------------------------

    def flush(self) -> None:
        for (topic, p), part in self._parts.items():
            self._seal(topic, p, part)
        while self._backlog():
            self._drive(block=True)

    def close(self) -> None:
        for addr in list(self._conns):
            self._drop(addr)
        self._selector.close()

    def _leader(self, topic: str, p: int) -> tuple[str, int]:
        found = self._leaders.get((topic, p))
        if found is None:
            for q, addr in self.leaders_of(topic).items():
                self._leaders[(topic, q)] = addr
            found = self._leaders.get((topic, p))
            if found is None:
                raise ConnectionError(f"{topic}/{p} has no leader")
        return found

    def _forget_leaders(self) -> None:
        self._leaders.clear()

    def _conn(self, addr: tuple[str, int]) -> Connection:
        conn = self._conns.get(addr)
        if conn is None:
            conn = Connection(*addr, timeout_s=self.settings.timeout_s)
            self._conns[addr] = conn
            self._selector.register(conn.sock, selectors.EVENT_READ, addr)
        return conn

    def _drop(self, addr: tuple[str, int]) -> None:
        conn = self._conns.pop(addr, None)
        if conn is not None:
            self._selector.unregister(conn.sock)
            conn.close()
        sent = self._in_flight.pop(addr, None)
        if sent is not None:
            for tp in sent[1]:
                self._parts[tp].in_flight = False
        self._forget_leaders()

    def _drive(self, block: bool) -> None:
        """Send a request to every leader with nothing in flight, then take the responses
        that have come, waiting for one if `block`."""
        self._send_ready()
        if not self._in_flight:
            if block and self._backlog():
                time.sleep(0.05)  # no leader to send to now: back off before asking again
            return
        ready = self._selector.select(self.settings.timeout_s if block else 0)
        if block and not ready:
            # Nothing answered in the whole timeout: start those requests again.
            for addr in list(self._in_flight):
                self._drop(addr)
        for key, _ in ready:
            self._take(key.data)

    def _send_ready(self) -> None:
        requests: dict[tuple[str, int], dict[tuple[str, int], bytes]] = {}
        now = time.monotonic()
        for tp, part in self._parts.items():
            if part.in_flight or not part.sealed or part.retry_at > now:
                continue
            if now - part.first_try > self.settings.timeout_s:
                raise ProduceError(f"Produce to {tp[0]}/{tp[1]} (timed out)", 7)
            try:
                addr = self._leader(*tp)
            except ConnectionError:
                self._forget_leaders()
                continue
            if addr in self._in_flight:
                continue
            requests.setdefault(addr, {})[tp] = part.sealed[0]
        for addr, batches in requests.items():
            body = produce_request(self.settings.acks, int(self.settings.timeout_s * 1000), batches)
            try:
                corr = self._conn(addr).send(_PRODUCE, _PRODUCE_VERSION, body)
            except OSError:
                self._drop(addr)
                continue
            self._in_flight[addr] = (corr, batches)
            for tp in batches:
                self._parts[tp].in_flight = True

    def _take(self, addr: tuple[str, int]) -> None:
        corr, batches = self._in_flight[addr]
        try:
            errors = parse_produce_response(self._conns[addr].receive(corr))
        except (OSError, ConnectionError):
            self._drop(addr)  # the batches stay first in line, to be sent again
            return
        del self._in_flight[addr]
        for tp in batches:
            part = self._parts[tp]
            part.in_flight = False
            code = errors.get(tp, 3)
            if code in (0, _DUPLICATE_SEQUENCE_NUMBER):
                part.sealed.popleft()
                part.first_try = time.monotonic() if part.sealed else 0.0
            elif code in _RETRIABLE:
                part.retry_at = time.monotonic() + 0.1
                self._forget_leaders()
            else:
                raise ProduceError(f"Produce to {tp[0]}/{tp[1]}", code)
