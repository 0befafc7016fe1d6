"""Kafka helpers the broker's test suites share: raw wire access, real-client round trips,
a broker as a real process, and bounded waits.

Everything here talks to a broker the way a user would: through a socket with hand-built
frames (kio for the encoding), or through confluent-kafka.  Every wait is bounded.
"""

from __future__ import annotations

import contextlib
import datetime
import io
import itertools
import re
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kio.index import load_request_schema, load_response_schema
from kio.serial import entity_reader, entity_writer

# Kafka error codes the tests look for.
NONE = 0
OFFSET_OUT_OF_RANGE = 1
CORRUPT_MESSAGE = 2
UNKNOWN_TOPIC_OR_PARTITION = 3
REQUEST_TIMED_OUT = 7
MESSAGE_TOO_LARGE = 10
INVALID_TOPIC_EXCEPTION = 17
UNSUPPORTED_VERSION = 35
TOPIC_ALREADY_EXISTS = 36
INVALID_PARTITIONS = 37
INVALID_CONFIG = 40
POLICY_VIOLATION = 44

EARLIEST = -2
LATEST = -1

T = TypeVar("T")

_SIZE = struct.Struct(">i")
_correlation = itertools.count(1)


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


_test_names = itertools.count()


def name_for_test(test_name: str, kind: str) -> str:
    """A topic or group name made from the test's own name, unique within the run."""
    base = re.sub(r"[^a-zA-Z0-9._-]+", "-", test_name).strip("-")[:150]
    return f"{base}-{kind}-{next(_test_names)}"


# -- raw wire ------------------------------------------------------------------------------


def encode_request(
    api_key: int,
    version: int,
    body: Any,
    correlation_id: int | None = None,
    client_id: str | None = "robustness",
) -> bytes:
    """A whole request frame (size prefix included) for kio's request dataclass `body`."""
    cls = load_request_schema(api_key, version)
    header_cls = cls.__header_schema__
    correlation_id = next(_correlation) if correlation_id is None else correlation_id
    out = io.BytesIO()
    entity_writer(header_cls)(
        out,
        header_cls(
            request_api_key=api_key,
            request_api_version=version,
            correlation_id=correlation_id,
            client_id=client_id,
        ),
    )
    entity_writer(cls)(out, body)
    payload = out.getvalue()
    return _SIZE.pack(len(payload)) + payload


def header_only_frame(api_key: int, version: int, correlation_id: int, tail: bytes = b"") -> bytes:
    """A frame with a v1 request header (no tagged fields) and `tail` as its body."""
    client = b"robustness"
    payload = struct.pack(">hhih", api_key, version, correlation_id, len(client)) + client + tail
    return _SIZE.pack(len(payload)) + payload


def decode_response(api_key: int, version: int, frame: bytes) -> tuple[int, Any]:
    """(correlation id, kio response dataclass) of a response frame without its size prefix."""
    cls = load_response_schema(api_key, version)
    header, used = entity_reader(cls.__header_schema__)(frame, 0)
    body, size = entity_reader(cls)(frame, used)
    assert used + size == len(frame), "response has trailing bytes"
    return header.correlation_id, body


class Wire:
    """One raw TCP connection to the broker."""

    def __init__(self, port: int, timeout: float = 10.0) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.timeout = timeout

    def __enter__(self) -> Wire:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.close()

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def _recv_exactly(self, n: int) -> bytes:
        out = bytearray()
        while len(out) < n:
            chunk = self.sock.recv(n - len(out))
            if not chunk:
                raise EOFError(f"connection closed after {len(out)} of {n} bytes")
            out += chunk
        return bytes(out)

    def read_frame(self) -> bytes:
        (size,) = _SIZE.unpack(self._recv_exactly(4))
        assert 0 <= size < 64 * 1024 * 1024, f"implausible response size {size}"
        return self._recv_exactly(size)

    def request(self, api_key: int, version: int, body: Any) -> Any:
        """Send one request and return the decoded response body (correlation id checked)."""
        return self.read_response(api_key, version, self.send_request(api_key, version, body))

    def send_request(self, api_key: int, version: int, body: Any) -> int:
        """Send one request without waiting for its answer; its correlation id."""
        correlation_id = next(_correlation)
        self.send(encode_request(api_key, version, body, correlation_id))
        return correlation_id

    def read_response(self, api_key: int, version: int, correlation_id: int) -> Any:
        """The next response, which must answer `correlation_id`."""
        got, response = decode_response(api_key, version, self.read_frame())
        assert got == correlation_id
        return response

    def closed_by_peer(self, timeout: float = 10.0) -> bool:
        """True once the broker closes the connection (EOF or reset) within `timeout`;
        False if it stays open that long.  A response arriving instead fails the test."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            self.sock.settimeout(min(left, 0.5))
            try:
                data = self.sock.recv(65536)
            except TimeoutError:
                continue
            except (ConnectionResetError, BrokenPipeError):
                return True
            finally:
                self.sock.settimeout(self.timeout)
            if not data:
                return True
            raise AssertionError(f"expected the connection to be closed, got {data[:64]!r}")


# -- requests built by hand ----------------------------------------------------------------


@dataclass(frozen=True)
class PartitionResult:
    partition: int
    error_code: int
    base_offset: int
    error_message: str | None


def produce_request(
    topic: str, partitions: Mapping[int, bytes], acks: int = 1, version: int = 9
) -> Any:
    cls = load_request_schema(0, version)
    module = __import__(cls.__module__, fromlist=["TopicProduceData", "PartitionProduceData"])
    return cls(
        transactional_id=None,
        acks=acks,
        timeout=datetime.timedelta(seconds=10),
        topic_data=(
            module.TopicProduceData(
                name=topic,
                partition_data=tuple(
                    module.PartitionProduceData(index=p, records=records)
                    for p, records in partitions.items()
                ),
            ),
        ),
    )


def fetch_request(
    topic: str,
    partitions: Iterable[int],
    max_bytes: int,
    max_wait_ms: int = 0,
    min_bytes: int = 0,
    version: int = 11,
) -> Any:
    """A consumer's Fetch of `partitions` from offset 0."""
    cls = load_request_schema(1, version)
    module = __import__(cls.__module__, fromlist=["FetchTopic", "FetchPartition"])
    return cls(
        replica_id=-1,
        max_wait=datetime.timedelta(milliseconds=max_wait_ms),
        min_bytes=min_bytes,
        max_bytes=max_bytes,
        isolation_level=0,
        session_id=0,
        session_epoch=-1,
        topics=(
            module.FetchTopic(
                topic=topic,
                partitions=tuple(
                    module.FetchPartition(
                        partition=p,
                        current_leader_epoch=-1,
                        fetch_offset=0,
                        log_start_offset=-1,
                        partition_max_bytes=max_bytes,
                    )
                    for p in partitions
                ),
            ),
        ),
        forgotten_topics_data=(),
        rack_id="",
    )


def raw_produce(
    wire: Wire, topic: str, partitions: Mapping[int, bytes], version: int = 9
) -> dict[int, PartitionResult]:
    """Produce `partitions` (partition -> record bytes) with acks=1; results by partition."""
    response = wire.request(0, version, produce_request(topic, partitions, 1, version))
    out: dict[int, PartitionResult] = {}
    for topic_response in response.responses:
        assert topic_response.name == topic
        for p in topic_response.partition_responses:
            out[p.index] = PartitionResult(
                p.index, int(p.error_code.value), p.base_offset, p.error_message
            )
    assert set(out) == set(partitions)
    return out


def list_offset(port: int, topic: str, partition: int, timestamp: int) -> tuple[int, int]:
    """ListOffsets v7 over a fresh connection: (error code, offset) for one partition."""
    cls = load_request_schema(2, 7)
    module = __import__(cls.__module__, fromlist=["ListOffsetsTopic", "ListOffsetsPartition"])
    body = cls(
        replica_id=-1,
        isolation_level=0,
        topics=(
            module.ListOffsetsTopic(
                name=topic,
                partitions=(
                    module.ListOffsetsPartition(
                        partition_index=partition, current_leader_epoch=-1, timestamp=timestamp
                    ),
                ),
            ),
        ),
    )
    with Wire(port) as wire:
        response = wire.request(2, 7, body)
    (t,) = response.topics
    (p,) = t.partitions
    return int(p.error_code.value), p.offset


def log_start(port: int, topic: str, partition: int = 0) -> int:
    error, offset = list_offset(port, topic, partition, EARLIEST)
    assert error == NONE, f"ListOffsets earliest failed with error {error}"
    return offset


def log_end(port: int, topic: str, partition: int = 0) -> int:
    error, offset = list_offset(port, topic, partition, LATEST)
    assert error == NONE, f"ListOffsets latest failed with error {error}"
    return offset


def delete_records_request(
    offsets: dict[tuple[str, int], int], version: int = 2, timeout_ms: int = 5000
) -> Any:
    cls = load_request_schema(21, version)
    module = __import__(cls.__module__, fromlist=["DeleteRecordsTopic", "DeleteRecordsPartition"])
    topics: dict[str, list[Any]] = {}
    for (name, partition), offset in offsets.items():
        topics.setdefault(name, []).append(
            module.DeleteRecordsPartition(partition_index=partition, offset=offset)
        )
    return cls(
        topics=tuple(
            module.DeleteRecordsTopic(name=name, partitions=tuple(ps))
            for name, ps in topics.items()
        ),
        timeout=datetime.timedelta(milliseconds=timeout_ms),
    )


def delete_records(
    port: int, offsets: dict[tuple[str, int], int], version: int = 2, timeout_ms: int = 5000
) -> dict[tuple[str, int], tuple[int, int]]:
    """(error code, low watermark) per partition, from one raw DeleteRecords request."""
    with Wire(port) as wire:
        response = wire.request(21, version, delete_records_request(offsets, version, timeout_ms))
    return {
        (t.name, p.partition_index): (int(p.error_code.value), p.low_watermark)
        for t in response.topics
        for p in t.partitions
    }


def api_versions_request() -> Any:
    """An ApiVersions v3 request body."""
    cls = load_request_schema(18, 3)
    return cls(client_software_name="robustness", client_software_version="1.0")


def api_versions_v3(wire: Wire) -> dict[int, tuple[int, int]]:
    response = wire.request(18, 3, api_versions_request())
    assert int(response.error_code.value) == NONE
    return {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}


# -- real clients --------------------------------------------------------------------------


def admin(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": 10000})


def create_topic(
    bootstrap: str, name: str, partitions: int = 1, config: Mapping[str, str] | None = None
) -> None:
    client = admin(bootstrap)  # kept alive until the answer is in
    futures = client.create_topics(
        [NewTopic(name, partitions, 1, config=dict(config or {}))], operation_timeout=10
    )
    futures[name].result(20)


def producer(bootstrap: str, **extra: Any) -> Producer:
    config = {
        "bootstrap.servers": bootstrap,
        "enable.idempotence": False,
        "acks": 1,
        "linger.ms": 5,
        "message.timeout.ms": 20000,
    }
    config.update(extra)
    return Producer(config)


@dataclass(frozen=True)
class Delivered:
    partition: int
    offset: int
    key: bytes | None
    value: bytes


def produce(
    bootstrap: str,
    topic: str,
    values: Sequence[bytes],
    *,
    partition: int | None = 0,
    keys: Sequence[bytes] | None = None,
    timestamps: Sequence[int] | None = None,
    batch_of: int = 0,
    **extra: Any,
) -> list[Delivered]:
    """Produce every value, wait for every delivery report, fail on any error.

    Returns the deliveries in the order the values were given.  `batch_of` flushes after
    every so many records and lingers in between, so that each run of that many records is
    one batch, whatever the machine's speed (the log's layout is then the same every run).
    """
    if batch_of:
        extra.setdefault("linger.ms", 5_000)
    p = producer(bootstrap, **extra)
    results: list[Delivered | None] = [None] * len(values)
    errors: list[str] = []

    def report(index: int) -> Any:
        def on_delivery(err: Any, msg: Any) -> None:
            if err is not None:
                errors.append(f"record {index}: {err}")
            else:
                results[index] = Delivered(msg.partition(), msg.offset(), msg.key(), msg.value())

        return on_delivery

    for i, value in enumerate(values):
        kwargs: dict[str, Any] = {"value": value, "on_delivery": report(i)}
        if partition is not None:
            kwargs["partition"] = partition
        if keys is not None:
            kwargs["key"] = keys[i]
        if timestamps is not None:
            kwargs["timestamp"] = timestamps[i]
        p.produce(topic, **kwargs)
        if batch_of and (i + 1) % batch_of == 0:
            assert p.flush(20) == 0, "a batch was not delivered within 20 s"
        else:
            p.poll(0)
    assert p.flush(30) == 0, "records were not delivered within 30 s"
    assert not errors, errors[:5]
    assert all(r is not None for r in results)
    return [r for r in results if r is not None]


def consumer(bootstrap: str, reset: str = "earliest", **extra: Any) -> Consumer:
    config = {
        "bootstrap.servers": bootstrap,
        "group.id": unique("robustness"),  # required by the client; only assign() is used
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "auto.offset.reset": reset,
        "fetch.wait.max.ms": 100,
        "socket.timeout.ms": 10000,
    }
    config.update(extra)
    return Consumer(config)


@dataclass(frozen=True)
class Consumed:
    offset: int
    key: bytes | None
    value: bytes | None
    timestamp: int


def consume(
    bootstrap: str,
    topic: str,
    partition: int = 0,
    start: int = 0,
    end: int | None = None,
    timeout: float = 30.0,
    reset: str = "earliest",
) -> list[Consumed]:
    """Every record of one partition from `start` up to `end` (default: the high watermark
    when the consumer starts), read with an assign()ed confluent-kafka consumer."""
    c = consumer(bootstrap, reset)
    try:
        tp = TopicPartition(topic, partition)
        if end is None:
            _, end = c.get_watermark_offsets(tp, timeout=10, cached=False)
        out: list[Consumed] = []
        if end <= start:
            return out
        c.assign([TopicPartition(topic, partition, start)])
        deadline = time.monotonic() + timeout
        next_offset = start
        while next_offset < end:
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"timed out reading {topic}-{partition} at {next_offset} (want {start}..{end})"
                )
            for msg in c.consume(min(500, end - next_offset), 0.5):
                if msg.error() is not None:
                    if msg.error().code() == KafkaError._PARTITION_EOF:
                        continue
                    raise AssertionError(f"consumer error: {msg.error()}")
                out.append(Consumed(msg.offset(), msg.key(), msg.value(), msg.timestamp()[1]))
                next_offset = msg.offset() + 1
        return [r for r in out if r.offset < end]
    finally:
        c.close()


def assert_contiguous(records: Iterable[Consumed], start: int = 0) -> None:
    offsets = [r.offset for r in records]
    assert offsets == list(range(start, start + len(offsets))), (
        f"offsets are not contiguous from {start}: {_summarise(offsets)}"
    )


def _summarise(offsets: list[int]) -> str:
    problems = [f"{a}->{b}" for a, b in itertools.pairwise(offsets) if b != a + 1][:10]
    head = offsets[:1]
    return f"first {head}, {len(offsets)} offsets, breaks at {problems}"


def assert_serves_clients(bootstrap: str, topic: str, before: Sequence[bytes]) -> None:
    """A normal client can still produce to and consume from `topic`, and the log is intact:
    it holds exactly `before` followed by the new records, at contiguous offsets from 0."""
    fresh = [f"after-{uuid.uuid4().hex[:8]}-{i}".encode() for i in range(5)]
    delivered = produce(bootstrap, topic, fresh)
    assert [d.offset for d in delivered] == list(range(len(before), len(before) + len(fresh)))
    records = consume(bootstrap, topic, 0, 0)
    assert_contiguous(records)
    assert [r.value for r in records] == [*before, *fresh]


class ServedClients:
    """Real clients kept busy on one topic while something else happens: a producer sending
    one record at a time, each acknowledged before the next, and (with ``read``) a consumer
    reading the partition from offset 0.  How many records were delivered and read so far,
    the offsets read, and any error either client saw."""

    def __init__(self, bootstrap: str, topic: str, read: bool = False) -> None:
        self.bootstrap, self.topic = bootstrap, topic
        self.delivered = 0
        self.delivered_offsets: list[int] = []
        self.read_offsets: list[int] = []
        self.errors: list[Any] = []
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._produce, daemon=True)]
        if read:
            self._threads.append(threading.Thread(target=self._consume, daemon=True))
        for thread in self._threads:
            thread.start()

    @property
    def read(self) -> int:
        return len(self.read_offsets)

    def _produce(self) -> None:
        client = Producer({"bootstrap.servers": self.bootstrap, "linger.ms": 0})

        def report(err: Any, msg: Any) -> None:
            if err is None:
                self.delivered += 1
                self.delivered_offsets.append(msg.offset())
            else:
                self.errors.append(err)

        while not self._stop.is_set():
            client.produce(self.topic, b"still served", on_delivery=report)
            client.flush(30)

    def _consume(self) -> None:
        client = consumer(self.bootstrap)
        try:
            client.assign([TopicPartition(self.topic, 0, 0)])
            while not self._stop.is_set():
                msg = client.poll(0.2)
                if msg is None:
                    continue
                if msg.error() is not None:
                    if msg.error().code() != KafkaError._PARTITION_EOF:
                        self.errors.append(msg.error())
                    continue
                self.read_offsets.append(msg.offset())
        finally:
            client.close()

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(60)


def wait_until(
    predicate: Callable[[], T],
    timeout: float = 20.0,
    interval: float = 0.05,
    what: str = "",
    retry_on: tuple[type[BaseException], ...] = (),
) -> T:
    """Poll until predicate() is truthy; fail the test after timeout seconds.

    ``retry_on``: exceptions that mean "not yet" (an admin call to a broker that is down),
    polled through like a false answer; the last one is named if time runs out."""
    deadline = time.monotonic() + timeout
    last_error: BaseException | None = None
    while True:
        try:
            value = predicate()
            if value:
                return value
        except retry_on as exc:
            last_error = exc
        if time.monotonic() > deadline:
            raise AssertionError(
                f"timed out after {timeout}s waiting for {what or predicate}"
                + (f" (last error: {last_error})" if last_error else "")
            )
        time.sleep(interval)


def topic_error(port: int, topic: str) -> int:
    """The error code a Metadata v12 request naming `topic` gets (0: the topic exists).
    Auto-creation is off in the request, so asking does not create it."""
    cls = load_request_schema(3, 12)
    module = __import__(cls.__module__, fromlist=["MetadataRequestTopic"])
    body = cls(
        topics=(module.MetadataRequestTopic(topic_id=None, name=topic),),
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=False,
    )
    with Wire(port) as wire:
        response = wire.request(3, 12, body)
    (t,) = response.topics
    return int(t.error_code.value)


def partition_count(port: int, topic: str) -> int:
    cls = load_request_schema(3, 12)
    module = __import__(cls.__module__, fromlist=["MetadataRequestTopic"])
    body = cls(
        topics=(module.MetadataRequestTopic(topic_id=None, name=topic),),
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=False,
    )
    with Wire(port) as wire:
        response = wire.request(3, 12, body)
    (t,) = response.topics
    assert int(t.error_code.value) == NONE, f"{topic}: error {t.error_code}"
    return len(t.partitions)


# -- a broker as a real process ------------------------------------------------------------


class BrokerProcess:
    """`python -m samsa.cli broker` on a fixed 127.0.0.1 port, its output in a file per start."""

    def __init__(self, data_dir: Path, port: int, overrides: Mapping[str, str] | None = None):
        self.data_dir = data_dir
        self.port = port
        self.overrides = dict(overrides or {})
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0
        self.log_path: Path | None = None

    @property
    def bootstrap_servers(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, timeout: float = 30.0) -> BrokerProcess:
        self.starts += 1
        self.log_path = self.data_dir.parent / f"broker-{self.port}-start{self.starts}.log"
        args = [
            sys.executable,
            "-m",
            "samsa.cli",
            "broker",
            "--data-dir",
            str(self.data_dir),
            "--listen",
            f"127.0.0.1:{self.port}",
        ]
        for key, value in self.overrides.items():
            args += ["--override", f"{key}={value}"]
        with open(self.log_path, "wb") as out:
            self.proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT)
        wait_until(self._serving, timeout, 0.1, f"the broker on port {self.port} to serve")
        return self

    def _serving(self) -> bool:
        assert self.proc is not None
        if self.proc.poll() is not None:
            raise AssertionError(
                f"the broker exited with {self.proc.returncode} during start:\n{self.output()}"
            )
        try:
            with Wire(self.port, timeout=2) as wire:
                return bool(api_versions_v3(wire))
        except (OSError, EOFError):
            return False

    def output(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path else ""

    def kill(self) -> None:
        """SIGKILL: no shutdown work at all, like a power cut for the process."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)

    def reap(self) -> None:
        """Kill the process if it still runs (test teardown, whatever happened)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def stop(self, timeout: float = 20.0) -> int:
        """SIGTERM and wait; the exit code."""
        if self.proc is None or self.proc.poll() is not None:
            return self.proc.returncode if self.proc else 0
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
            raise AssertionError(f"the broker ignored SIGTERM for {timeout}s") from None
