"""The Kafka I/O of the source: cluster metadata, offset look-ups and reading a range of records
into pyarrow RecordBatches, all through confluent-kafka (librdkafka), so any Kafka-protocol broker
works, Apache Kafka included.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    IsolationLevel,
    KafkaError,
    KafkaException,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient
from confluent_kafka.admin import OffsetSpec as KafkaOffsetSpec

from samsa_spark.offsets import TP, OffsetRange
from samsa_spark.schema import arrow_schema

if TYPE_CHECKING:
    from samsa_spark.fetch import FetchedPartition


class SamsaConnectionError(RuntimeError):
    """The brokers could not be reached or did not answer in time."""


class SamsaAuthenticationError(SamsaConnectionError):
    """The brokers refused the client's credentials (SASL or TLS): retrying will not help."""


def authentication_error(bootstrap: str, err: KafkaError) -> SamsaAuthenticationError:
    return SamsaAuthenticationError(
        f"authentication failed at kafka.bootstrap.servers={bootstrap}: {err.str()} "
        "(check kafka.sasl.jaas.config, or the KafkaUser Secret, and kafka.security.protocol)"
    )


class SamsaDataLossError(RuntimeError):
    """Records that a query must read are gone (retention, a deleted topic) or never existed."""


def _conf(bootstrap: str, kafka: Mapping[str, str]) -> dict[str, Any]:
    conf: dict[str, Any] = {"bootstrap.servers": bootstrap}
    conf.update(kafka)
    conf["bootstrap.servers"] = bootstrap
    return conf


def _reason(e: BaseException) -> str:
    if isinstance(e, KafkaException) and e.args and isinstance(e.args[0], KafkaError):
        return str(e.args[0].str())
    return str(e)


class IdempotenceUnsupportedError(SamsaConnectionError):
    """The brokers have no InitProducerId: idempotent producers cannot work with them."""


class ProducerErrors:
    """A producer's error_cb and on_delivery, which only record; `check` raises one clear error.

    With an error_cb, librdkafka reports fatal errors (such as brokers without idempotent
    producers) there rather than raising from flush() in the middle of delivery callbacks.
    """

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap
        self.fatal: KafkaError | None = None
        self.failed: list[tuple[KafkaError, str | None]] = []

    def error_cb(self, err: KafkaError) -> None:
        # Refused credentials are not fatal to librdkafka, which would retry until every
        # message timed out; they are to us.
        if (err.fatal() or err.code() == KafkaError._AUTHENTICATION) and self.fatal is None:
            self.fatal = err

    def on_delivery(self, err: KafkaError | None, msg: Any) -> None:
        if err is not None and len(self.failed) < 5:
            self.failed.append((err, msg.topic()))

    def conf(self) -> dict[str, Any]:
        return {"bootstrap.servers": self.bootstrap, "error_cb": self.error_cb}

    def flush(self, producer: Any, timeout: float) -> None:
        """Flush and check. librdkafka raises a fatal error out of flush() and then runs the
        failed messages' callbacks with that exception pending, which surfaces as a
        SystemError caused by it; both become the one clear error of `check`."""
        try:
            left = producer.flush(timeout)
        except (KafkaException, SystemError) as e:
            self._fatal_from(e)
            left = 0
        self.check(left)

    def produce(self, producer: Any, *args: Any, **kwargs: Any) -> None:
        """producer.produce, waiting while its queue is full, with fatal errors made clear."""
        while True:
            try:
                producer.produce(*args, on_delivery=self.on_delivery, **kwargs)
                return
            except BufferError:
                producer.poll(0.05)
            except (KafkaException, SystemError) as e:
                self._fatal_from(e)
            self.check()

    def _fatal_from(self, e: BaseException) -> None:
        cause: BaseException | None = e
        while cause is not None and not isinstance(cause, KafkaException):
            cause = cause.__cause__ or cause.__context__
        if cause is None:
            raise e
        err = cause.args[0] if cause.args else None
        if isinstance(err, KafkaError) and self.fatal is None:
            self.fatal = err
        self.check()
        raise SamsaConnectionError(f"producer failed on {self.bootstrap}: {cause}") from None

    def check(self, unacknowledged: int = 0) -> None:
        where = f"kafka.bootstrap.servers={self.bootstrap}"
        if self.fatal is not None:
            if self.fatal.code() == KafkaError._AUTHENTICATION:
                raise authentication_error(self.bootstrap, self.fatal)
            if self.fatal.code() == KafkaError._UNSUPPORTED_FEATURE:
                raise IdempotenceUnsupportedError(
                    f"the brokers at {where} do not support idempotent producers "
                    "(InitProducerId); set kafka.enable.idempotence=false"
                )
            raise SamsaConnectionError(f"producer failed on {where}: {self.fatal.str()}")
        if self.failed:
            err, topic = self.failed[0]
            raise SamsaConnectionError(f"publishing to {topic} on {where} failed: {err.str()}")
        if unacknowledged:
            raise SamsaConnectionError(f"{unacknowledged} records not acknowledged by {where}")


class Brokers:
    """Metadata and offsets for the driver: one AdminClient, closed with the object."""

    def __init__(self, bootstrap: str, kafka: Mapping[str, str], timeout_ms: int) -> None:
        self.bootstrap = bootstrap
        self.timeout = timeout_ms / 1000
        conf = _conf(bootstrap, {k: v for k, v in kafka.items() if _admin_key(k)})
        self.refused: KafkaError | None = None
        conf["error_cb"] = self._error_cb
        self.admin = AdminClient(conf)

    def _error_cb(self, err: KafkaError) -> None:
        if err.code() == KafkaError._AUTHENTICATION:
            self.refused = err

    def _unreachable(self, what: str, e: BaseException) -> SamsaConnectionError:
        self.admin.poll(0)  # serves error_cb
        if self.refused is not None:
            return authentication_error(self.bootstrap, self.refused)
        return SamsaConnectionError(
            f"could not {what} from the brokers at kafka.bootstrap.servers={self.bootstrap} "
            f"within {self.timeout:g}s: {_reason(e)}"
        )

    def _metadata(self, topic: str | None = None) -> Any:
        """list_topics within the timeout, asked in rounds of growing length so that refused
        credentials end the wait soon rather than after the whole of it, while a slow cluster
        still gets rounds long enough to answer in."""
        deadline = time.monotonic() + self.timeout
        round_s = 0.5
        while True:
            left = deadline - time.monotonic()
            try:
                return self.admin.list_topics(topic=topic, timeout=max(min(left, round_s), 0.01))
            except KafkaException as e:
                self.admin.poll(0)
                if self.refused is not None or time.monotonic() >= deadline:
                    raise self._unreachable("get metadata", e) from None
            round_s *= 2

    def partitions_by_topic(self) -> dict[str, int]:
        md = self._metadata()
        return {
            name: len(t.partitions)
            for name, t in md.topics.items()
            if t.error is None and not name.startswith("__")
        }

    def list_offsets(self, tps: Iterable[TP], spec: Any) -> dict[TP, int]:
        """One ListOffsets round for many partitions; `spec` is earliest, latest or a timestamp."""
        tps = list(tps)
        if not tps:
            return {}
        if spec == "earliest":
            ks = KafkaOffsetSpec.earliest()
        elif spec == "latest":
            ks = KafkaOffsetSpec.latest()
        else:
            ks = KafkaOffsetSpec.for_timestamp(int(spec))
        try:
            futures = self.admin.list_offsets(
                {TopicPartition(t, p): ks for t, p in tps},
                # Committed data only: up to the last stable offset.
                isolation_level=IsolationLevel.READ_COMMITTED,
                request_timeout=self.timeout,
            )
            return {(tp.topic, tp.partition): f.result().offset for tp, f in futures.items()}
        except KafkaException as e:
            raise self._unreachable("list offsets", e) from None

    def leaders(self, topic: str) -> dict[int, tuple[str, int]]:
        """host and port of the leader of each of the topic's partitions that has one."""
        md = self._metadata(topic)
        t = md.topics.get(topic)
        if t is None or t.error is not None:
            return {}
        out = {}
        for index, p in t.partitions.items():
            broker = md.brokers.get(p.leader)
            if broker is not None:
                out[index] = (str(broker.host), broker.port)
        return out

    def leader(self, topic: str, partition: int) -> tuple[str, int]:
        """host and port of the partition's leader; ConnectionError while it has none."""
        md = self._metadata(topic)
        t = md.topics.get(topic)
        p = t.partitions.get(partition) if t is not None and t.error is None else None
        broker = md.brokers.get(p.leader) if p is not None else None
        if broker is None:
            raise ConnectionError(f"{topic}/{partition} has no leader")
        return str(broker.host), broker.port

    def close(self) -> None:
        # AdminClient has no close; dropping the reference frees librdkafka's handle.
        self.admin = None  # type: ignore[assignment]


_SHARED_BROKERS: dict[tuple[str, int, tuple[tuple[str, str], ...]], Brokers] = {}


def shared_brokers(bootstrap: str, kafka: Mapping[str, str], timeout_ms: int) -> Brokers:
    """One Brokers for the Python worker's tasks (Spark reuses the worker from task to task):
    a new librdkafka client for each range would pay its connection and metadata again."""
    key = (bootstrap, timeout_ms, tuple(sorted(kafka.items())))
    found = _SHARED_BROKERS.get(key)
    if found is None:
        found = _SHARED_BROKERS[key] = Brokers(bootstrap, kafka, timeout_ms)
    return found


_CONSUMER_ONLY = (
    "fetch.",
    "max.partition.fetch.bytes",
    "isolation.level",
    "queued.",
    "check.crcs",
    "session.timeout.ms",
    "heartbeat.",
    "max.poll.interval.ms",
    "partition.assignment.strategy",
    "enable.partition.eof",
    "auto.commit.interval.ms",
    "group.",
    "enable.auto.",
)


def _uses_plaintext(kafka: Mapping[str, str]) -> bool:
    return kafka.get("security.protocol", "plaintext").lower() == "plaintext"


def _admin_key(key: str) -> bool:
    return not key.startswith(_CONSUMER_ONLY)


def consumer(bootstrap: str, kafka: Mapping[str, str]) -> Consumer:
    """A consumer that is only ever assigned partitions: it never joins a group nor commits.

    librdkafka insists on a group.id; a unique one keeps it harmless.
    """
    conf = _conf(bootstrap, kafka)
    conf.update(
        {
            "group.id": f"samsa-spark-{uuid.uuid4().hex[:12]}",
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            # Out-of-range positions must be reported, never silently reset.
            "auto.offset.reset": "error",
            "enable.partition.eof": False,
        }
    )
    conf.setdefault("fetch.wait.max.ms", 100)
    conf.setdefault("queued.min.messages", 100_000)
    return Consumer(conf)


def scan(
    c: Consumer, topic: str, partition: int, start: int, end: int, timeout: float
) -> Iterator[Any]:
    """The messages of one partition with offsets in [start, end), in order, for small reads
    (commit logs, replay checks); errors and gaps are skipped, and `timeout` bounds the whole.
    """
    if end <= start:
        return
    c.assign([TopicPartition(topic, partition, start)])
    deadline = time.monotonic() + timeout
    pos = start
    while pos < end:
        if time.monotonic() > deadline:
            raise SamsaConnectionError(f"timed out reading {topic}/{partition} [{start}, {end})")
        msgs = c.consume(min(10_000, end - pos), 0.5)
        for m in msgs:
            off = m.offset()
            if m.error() is None and off is not None and pos <= off < end:
                pos = off + 1
                yield m
        if not msgs:
            at = c.position([TopicPartition(topic, partition)])[0].offset
            pos = max(pos, at)


class RangeReader:
    """Reads the records of OffsetRanges as RecordBatches of the source's schema."""

    def __init__(
        self,
        bootstrap: str,
        kafka: Mapping[str, str],
        include_headers: bool,
        fail_on_data_loss: bool,
        poll_timeout_ms: int,
        batch_rows: int = 8192,
        columnar: bool = False,
    ) -> None:
        self.bootstrap = bootstrap
        self.kafka = dict(kafka)
        self.include_headers = include_headers
        self.fail_on_data_loss = fail_on_data_loss
        self.poll_timeout = poll_timeout_ms / 1000
        self.batch_rows = batch_rows
        self.schema = arrow_schema(include_headers)
        # librdkafka keeps TLS and SASL: the columnar path speaks PLAINTEXT only.
        self.columnar = columnar and _uses_plaintext(self.kafka)

    def read(self, r: OffsetRange) -> Iterator[pa.RecordBatch]:
        if r.size <= 0:
            return
        if self.columnar:
            yield from self._read_columnar(r)
            return
        c = consumer(self.bootstrap, self.kafka)
        try:
            yield from self._read(c, r)
        finally:
            c.close()

    def _read(self, c: Consumer, r: OffsetRange) -> Iterator[pa.RecordBatch]:
        c.assign([TopicPartition(r.topic, r.partition, r.from_offset)])
        position = r.from_offset
        last_progress = time.monotonic()
        while position < r.until_offset:
            want = min(self.batch_rows, r.until_offset - position)
            msgs = c.consume(want, timeout=0.5)
            cols = _Columns(self.include_headers)
            for m in msgs:
                err = m.error()
                if err is not None:
                    position = self._on_error(c, r, position, err)
                    continue
                off = m.offset() or 0
                if off < position:
                    continue
                if off >= r.until_offset:
                    position = r.until_offset
                    break
                cols.add(m)
                position = off + 1
            if cols.count:
                last_progress = time.monotonic()
                yield cols.batch(self.schema, r.topic, r.partition)
            elif position < r.until_offset:
                # Offsets may have gaps (compaction, transaction markers): librdkafka's position
                # moves past them without returning a record.
                pos = c.position([TopicPartition(r.topic, r.partition)])[0].offset
                if pos >= r.until_offset:
                    return
                if pos > position:
                    position = pos
                    last_progress = time.monotonic()
                elif time.monotonic() - last_progress > self.poll_timeout:
                    raise self._no_records(r, position)

    def _read_columnar(self, r: OffsetRange) -> Iterator[pa.RecordBatch]:
        # Imported here: numba takes about a second to import, and the driver's planning
        # process (which Spark starts afresh for every streaming query) never decodes.
        from samsa_spark.fetch import (
            OFFSET_OUT_OF_RANGE,
            UNKNOWN_TOPIC_OR_PARTITION,
            FetchError,
            FetchSettings,
            NoProgressError,
            read_range,
        )
        from samsa_spark.records import CorruptBatchError

        brokers = shared_brokers(self.bootstrap, self.kafka, int(self.poll_timeout * 1000))

        def on_error(code: int, position: int, got: FetchedPartition) -> int:
            if code == OFFSET_OUT_OF_RANGE:
                if self.fail_on_data_loss:
                    raise self._out_of_range(r, position)
                # Skip what is gone: go on at the earliest offset still held.
                return got.log_start_offset if got.log_start_offset > position else r.until_offset
            if code == UNKNOWN_TOPIC_OR_PARTITION:
                if self.fail_on_data_loss:
                    raise self._gone(r)
                return r.until_offset
            raise SamsaConnectionError(
                f"reading {r.topic}/{r.partition} from kafka.bootstrap.servers={self.bootstrap}: "
                f"Kafka error code {code}"
            )

        try:
            yield from read_range(
                lambda: brokers.leader(r.topic, r.partition),
                r,
                FetchSettings.from_kafka(self.kafka),
                self.include_headers,
                self.poll_timeout,
                on_error,
            )
        except NoProgressError as e:
            raise self._no_records(r, e.position) from None
        except (FetchError, CorruptBatchError) as e:
            raise SamsaConnectionError(
                f"reading {r.topic}/{r.partition} from "
                f"kafka.bootstrap.servers={self.bootstrap}: {e}"
            ) from None

    def _no_records(self, r: OffsetRange, position: int) -> SamsaConnectionError:
        return SamsaConnectionError(
            f"no records from {r.topic}/{r.partition} at offset {position} "
            f"(reading up to {r.until_offset}) within kafkaConsumer.pollTimeoutMs="
            f"{int(self.poll_timeout * 1000)}; brokers kafka.bootstrap.servers="
            f"{self.bootstrap}"
        )

    def _out_of_range(self, r: OffsetRange, position: int) -> SamsaDataLossError:
        return SamsaDataLossError(
            f"offset {position} of {r.topic}/{r.partition} is out of range on the brokers "
            "(the records were deleted, by retention or with the topic); "
            "set failOnDataLoss=false to skip what is lost"
        )

    def _gone(self, r: OffsetRange) -> SamsaDataLossError:
        return SamsaDataLossError(
            f"topic {r.topic} partition {r.partition} no longer exists on the brokers; "
            "set failOnDataLoss=false to ignore it"
        )

    def _on_error(self, c: Consumer, r: OffsetRange, position: int, err: KafkaError) -> int:
        code = err.code()
        if code in (KafkaError._AUTO_OFFSET_RESET, KafkaError.OFFSET_OUT_OF_RANGE):
            if self.fail_on_data_loss:
                raise self._out_of_range(r, position)
            # Skip what is gone: restart at the earliest offset still held.
            lo, _hi = c.get_watermark_offsets(
                TopicPartition(r.topic, r.partition), timeout=self.poll_timeout
            )
            start = max(position, lo)
            c.assign([TopicPartition(r.topic, r.partition, start if lo >= 0 else OFFSET_BEGINNING)])
            return start
        if code == KafkaError.UNKNOWN_TOPIC_OR_PART and self.fail_on_data_loss:
            raise self._gone(r)
        if code == KafkaError.UNKNOWN_TOPIC_OR_PART:
            return r.until_offset
        if code == KafkaError.GROUP_AUTHORIZATION_FAILED:
            # librdkafka looks up the coordinator of the group.id it insists on, which this
            # consumer never joins nor commits to: a principal allowed only its topics (as
            # Kafka's Java consumer needs for assigned partitions) still reads them.
            return position
        if err.fatal() or not err.retriable():
            raise SamsaConnectionError(
                f"reading {r.topic}/{r.partition} from kafka.bootstrap.servers={self.bootstrap}: "
                f"{err.str()}"
            )
        return position


class _Columns:
    """Column lists for one RecordBatch; kept small because it runs once per record."""

    __slots__ = (
        "count",
        "headers",
        "include_headers",
        "keys",
        "offsets",
        "ts",
        "ts_types",
        "values",
    )

    def __init__(self, include_headers: bool) -> None:
        self.include_headers = include_headers
        self.keys: list[bytes | None] = []
        self.values: list[bytes | None] = []
        self.offsets: list[int] = []
        self.ts: list[int] = []
        self.ts_types: list[int] = []
        self.headers: list[list[tuple[str, bytes | None]] | None] = []
        self.count = 0

    def add(self, m: Any) -> None:
        self.keys.append(m.key())
        self.values.append(m.value())
        self.offsets.append(m.offset())
        ts_type, ts = m.timestamp()
        # librdkafka: 0 none, 1 create time, 2 log append time; Spark: 0 create, 1 log append.
        self.ts.append(ts * 1000)
        self.ts_types.append(1 if ts_type == 2 else 0)
        if self.include_headers:
            self.headers.append(m.headers())
        self.count += 1

    def batch(self, schema: pa.Schema, topic: str, partition: int) -> pa.RecordBatch:
        n = self.count
        arrays = [
            pa.array(self.keys, pa.binary()),
            pa.array(self.values, pa.binary()),
            pa.array([topic] * n, pa.string()),
            pa.array([partition] * n, pa.int32()),
            pa.array(self.offsets, pa.int64()),
            pa.array(self.ts, pa.timestamp("us", tz="UTC")),
            pa.array(self.ts_types, pa.int32()),
        ]
        if self.include_headers:
            arrays.append(
                pa.array(
                    [[{"key": k, "value": v} for k, v in h] if h else [] for h in self.headers],
                    schema.field("headers").type,
                )
            )
        return pa.RecordBatch.from_arrays(arrays, schema=schema)
