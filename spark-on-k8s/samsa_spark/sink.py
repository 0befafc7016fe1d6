"""The "samsa" sink: Spark's Kafka sink (key, value, headers, topic and partition columns), for
batch and streaming writes, with an idempotent producer (``enable.idempotence=true``, acks=all;
``kafka.*`` options override, e.g. ``kafka.enable.idempotence=false`` for brokers without
InitProducerId).

Exactly-once for streaming writes, without Kafka transactions
---------------------------------------------------------------
Spark replays a micro-batch with the same batchId when a query restarts after a failure that
came before the batch was recorded as committed in the checkpoint; a task may also be retried
within a batch. Publishing is done by the tasks, so a replay could publish a batch twice. The
sink prevents that with a small commit log per query (see `samsa_spark.commitlog`), the topic
``_samsa-sink-<queryId>`` (option ``commitLogTopic`` to choose it), and a header
``samsa.sink.batch = <queryId>:<batchId>:<task>`` on every record it publishes:

1. A task first reads the last *batch marker*. If it is for this batchId or a later one, the
   batch is already published: the task publishes nothing.
2. Otherwise it looks for a *task marker* of its own (batch, partition) written since that batch
   marker, then writes its own. None found: a first attempt, it publishes its rows as they come.
   One found: an earlier attempt may have published some rows before dying. The task then reads
   the partitions it writes to from the last batch marker's fence up to their end, counts the
   records tagged with its own (query, batch, task), and publishes only the rest: its rows less
   those already there, as a multiset. Spark replays a batch with the same input, so the rows
   are the same (the usual requirement for exactly-once sinks: a deterministic query).
3. Each task flushes before it reports success (also on failure, so what was sent is known to be
   on the brokers), and when every task is done the driver's ``commit(batchId)`` writes the
   batch marker with the new fence, unless one for this batch is already there.

A crash between any two steps leaves either no batch marker (the replay goes through step 2 and
fills in exactly what is missing) or a batch marker (the replay publishes nothing). Speculative
execution must stay off (Spark's default): two live attempts of one task could both publish.

Batch writes (``df.write``) have no batchId: each task publishes its rows once, and as with
Spark's Kafka sink a retried task may publish its rows again.

Tasks publish Spark's Arrow batches through `samsa_spark.produce` (record batches encoded from
the columns, idempotent Produce requests of our own); with TLS, SASL, or librdkafka settings
that path does not carry out, and with option ``writer=librdkafka``, they publish row by row
through librdkafka's producer. A replayed task's rows (step 2) go row by row too. Both place
keyed rows with Kafka's murmur2 partitioner, as Spark's Kafka sink does.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import NewTopic
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import ArrayType, BinaryType, IntegerType, StringType, StructType

from samsa_spark.client import (
    Brokers,
    IdempotenceUnsupportedError,
    ProducerErrors,
    SamsaConnectionError,
    consumer,
    scan,
)
from samsa_spark.commitlog import (
    COMMIT_LOG_PREFIX,
    TAG_HEADER,
    BatchMarker,
    Identity,
    TaskMarker,
    already_published,
    commit_log_topic,
    earlier_attempt,
    missing,
    next_fence,
    tag,
)
from samsa_spark.options import SamsaOptionError, SinkOptions, parse_sink_options

log = logging.getLogger(__name__)

# (topic, key, value, headers, partition or None): one record to publish
Record = tuple[str, bytes | None, bytes | None, tuple[tuple[str, bytes | None], ...], int | None]


def _identity(r: Record) -> Identity:
    return r[0], r[1], r[2], r[3]


def check_schema(schema: StructType, topic_option: str | None) -> None:
    """Spark's Kafka sink's rules for the input columns, as one-line errors."""
    fields = {f.name.lower(): f.dataType for f in schema.fields}
    if "value" not in fields:
        raise SamsaOptionError("the samsa sink needs a value column (string or binary)")
    for name in ("key", "value"):
        if name in fields and not isinstance(fields[name], StringType | BinaryType):
            raise SamsaOptionError(
                f"column {name} must be string or binary, not {fields[name].simpleString()}"
            )
    if "topic" in fields and not isinstance(fields["topic"], StringType):
        raise SamsaOptionError(
            f"column topic must be a string, not {fields['topic'].simpleString()}"
        )
    if "topic" not in fields and not topic_option:
        raise SamsaOptionError("the samsa sink needs the option topic or a topic column")
    if "partition" in fields and not isinstance(fields["partition"], IntegerType):
        raise SamsaOptionError(
            f"column partition must be an int, not {fields['partition'].simpleString()}"
        )
    if "headers" in fields:
        h = fields["headers"]
        ok = (
            isinstance(h, ArrayType)
            and isinstance(h.elementType, StructType)
            and [f.name for f in h.elementType.fields] == ["key", "value"]
        )
        if not ok:
            raise SamsaOptionError(
                "column headers must be array<struct<key: string, value: binary>>, "
                f"not {h.simpleString()}"
            )


def _bytes(v: Any) -> bytes | None:
    if v is None or isinstance(v, bytes):
        return v
    return str(v).encode()


def records(batch: pa.RecordBatch, topic_option: str | None) -> Iterator[Record]:
    cols = {name.lower(): batch.column(i) for i, name in enumerate(batch.schema.names)}
    n = batch.num_rows
    values = cols["value"].to_pylist()
    keys = cols["key"].to_pylist() if "key" in cols else [None] * n
    topics = [topic_option] * n if topic_option else cols["topic"].to_pylist()
    parts = cols["partition"].to_pylist() if "partition" in cols else [None] * n
    headers: list[Any] = cols["headers"].to_pylist() if "headers" in cols else [None] * n
    for i in range(n):
        topic = topics[i]
        if not topic:
            raise SamsaOptionError("a row has a null topic and the option topic is not set")
        hs = tuple((h["key"], _bytes(h["value"])) for h in headers[i]) if headers[i] else ()
        yield topic, _bytes(keys[i]), _bytes(values[i]), hs, parts[i]


class _Publisher:
    """An idempotent producer (unless `kafka.enable.idempotence=false`) and its errors."""

    def __init__(self, opts: SinkOptions) -> None:
        self.opts = opts
        self.errors = ProducerErrors(opts.bootstrap)
        conf: dict[str, Any] = {
            "enable.idempotence": True,
            "acks": "all",
            "linger.ms": 5,
            # Kafka's Java default for keyed records, as Spark's Kafka sink and the columnar
            # writer place them.
            "partitioner": "murmur2_random",
        }
        conf.update(opts.kafka)
        conf.update(self.errors.conf())
        self.producer = Producer(conf)
        self.sent = 0

    def publish(self, r: Record, extra_header: tuple[str, bytes] | None = None) -> None:
        topic, key, value, headers, partition = r
        hs: list[tuple[str, str | bytes | None]] = list(headers)
        if extra_header is not None:
            hs.append(extra_header)
        kwargs: dict[str, Any] = {} if partition is None else {"partition": partition}
        self.errors.produce(self.producer, topic, value, key, headers=hs or None, **kwargs)
        self.sent += 1
        if self.sent % 10_000 == 0:
            self.producer.poll(0)
            self.errors.check()

    def flush(self) -> None:
        self.errors.flush(self.producer, self.opts.metadata_timeout_ms / 1000 * 10)


def _check_topics(brokers: Brokers, topics: Iterable[str]) -> None:
    known = brokers.partitions_by_topic()
    unknown = sorted(set(topics) - set(known))
    if unknown:
        raise SamsaOptionError(
            f"unknown topic {', '.join(unknown)} (the samsa sink does not create topics)"
        )


@dataclass
class SinkCommitMessage(WriterCommitMessage):
    query_id: str | None = None
    topics: list[str] = field(default_factory=list)
    published: int = 0
    skipped: bool = False


def sink_options(options: Mapping[str, str], schema: StructType) -> SinkOptions:
    """The writers' options, checked on the driver before any task runs."""
    opts = parse_sink_options(options)
    check_schema(schema, opts.topic)
    if opts.topic:
        _check_topics(_brokers(opts), [opts.topic])
    return opts


# Kafka clients kept for the life of the Python worker, which Spark reuses task after task and
# micro-batch after micro-batch: a new librdkafka client per task pays its connections, its
# metadata and its first fetch again, which is most of a small micro-batch's time.
_CLIENTS: dict[tuple[Any, ...], Any] = {}
# Commit logs known to exist, by (bootstrap servers, topic).
_ENSURED: set[tuple[str, str]] = set()


def _shared(kind: str, opts: SinkOptions, make: Callable[[], Any]) -> Any:
    key = (kind, opts.bootstrap, opts.metadata_timeout_ms, tuple(sorted(opts.kafka.items())))
    client = _CLIENTS.get(key)
    if client is None:
        client = _CLIENTS[key] = make()
    return client


def _forget(kind: str, opts: SinkOptions) -> None:
    key = (kind, opts.bootstrap, opts.metadata_timeout_ms, tuple(sorted(opts.kafka.items())))
    _CLIENTS.pop(key, None)


def _brokers(opts: SinkOptions) -> Brokers:
    return _shared(
        "brokers", opts, lambda: Brokers(opts.bootstrap, opts.kafka, opts.metadata_timeout_ms)
    )


def publish_all(
    opts: SinkOptions, rows: Iterable[Record], header: tuple[str, bytes] | None = None
) -> tuple[list[str], int]:
    """Publish rows, checking each new topic exists; flushes even on failure, so that what was
    sent is on the brokers when a task dies. Returns the topics written and the count."""
    pub = _Publisher(opts)
    brokers = _brokers(opts)
    topics: set[str] = set()
    try:
        for r in rows:
            if r[0] not in topics:
                _check_topics(brokers, [r[0]])
                topics.add(r[0])
            pub.publish(r, header)
    finally:
        pub.flush()
    return sorted(topics), pub.sent


def _publish_columnar(
    opts: SinkOptions,
    batches: Iterable[pa.RecordBatch],
    header: tuple[str, bytes] | None,
) -> tuple[list[str], int] | None:
    # Imported here: numba takes about a second to import, and the driver never encodes.
    from samsa_spark.produce import ColumnarProducer, columnar_settings

    settings = columnar_settings(opts.kafka, opts.metadata_timeout_ms / 1000 * 10)
    if opts.writer != "columnar" or settings is None:
        return None
    brokers = _brokers(opts)

    def partitions_of(topic: str) -> int:
        count = brokers.partitions_by_topic().get(topic)
        if not count:
            raise SamsaOptionError(f"unknown topic {topic} (the samsa sink does not create topics)")
        return count

    def leaders_of(topic: str) -> dict[int, tuple[str, int]]:
        try:
            return brokers.leaders(topic)
        except SamsaConnectionError:
            return {}  # none known now: the producer asks again until its timeout

    # One producer (its connections and producer id) for the worker's tasks, one at a time.
    producer = _shared(
        "columnar-producer", opts, lambda: ColumnarProducer(settings, partitions_of, leaders_of)
    )
    producer.begin()
    extra = (header[0].encode(), header[1]) if header is not None else None
    try:
        try:
            for b in batches:
                producer.publish(b, opts.topic, extra)
        finally:
            producer.flush()
    except BaseException:
        _forget("columnar-producer", opts)
        producer.close()
        raise
    return sorted(producer.topics), producer.sent


def publish_columnar(
    opts: SinkOptions,
    batches: Iterable[pa.RecordBatch],
    header: tuple[str, bytes] | None = None,
) -> tuple[list[str], int] | None:
    """Publish Arrow batches as encoded record batches; None if the options need librdkafka
    (nothing is published then). Flushes even on failure, as `publish_all` does."""
    from samsa_spark.produce import ProduceError

    where = f"kafka.bootstrap.servers={opts.bootstrap}"
    try:
        return _publish_columnar(opts, batches, header)
    except ProduceError as e:
        if e.code == 35:  # UNSUPPORTED_VERSION: a broker without InitProducerId
            raise IdempotenceUnsupportedError(
                f"the brokers at {where} do not support idempotent producers "
                "(InitProducerId); set kafka.enable.idempotence=false"
            ) from None
        raise SamsaConnectionError(f"publishing on {where}: {e}") from None
    except ValueError as e:
        raise SamsaOptionError(str(e)) from None
    except OSError as e:
        raise SamsaConnectionError(f"publishing on {where}: {e}") from None


class SamsaBatchWriter(DataSourceArrowWriter):
    def __init__(self, options: Mapping[str, str], schema: StructType) -> None:
        self.opts = sink_options(options, schema)

    def write(self, iterator: Iterator[pa.RecordBatch]) -> SinkCommitMessage:
        done = publish_columnar(self.opts, iterator)
        if done is None:
            rows = (r for b in iterator for r in records(b, self.opts.topic))
            done = publish_all(self.opts, rows)
        topics, sent = done
        return SinkCommitMessage(topics=topics, published=sent)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        return None

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        return None


class CommitLog:
    """The I/O side of `samsa_spark.commitlog`: one query's commit-log topic."""

    BATCHES, TASKS = 0, 1

    def __init__(self, opts: SinkOptions, query_id: str) -> None:
        self.opts = opts
        self.topic = opts.commit_log_topic or commit_log_topic(query_id)
        self.timeout = opts.metadata_timeout_ms / 1000
        self.brokers = _brokers(opts)

    def ensure(self) -> None:
        # Asked once per worker: every task of every micro-batch would otherwise pay a
        # metadata round for a topic that is never deleted under a running query.
        key = (self.opts.bootstrap, self.topic)
        if key not in _ENSURED:
            if self.topic not in self.brokers.partitions_by_topic():
                self._create()
            _ENSURED.add(key)

    def _create(self) -> None:
        # The brokers' AdminClient: it carries the sink's security settings.
        admin = self.brokers.admin
        # Markers are tiny and the last one must never expire.
        topic = NewTopic(self.topic, 2, -1, config={"retention.ms": "-1", "retention.bytes": "-1"})
        fut = admin.create_topics([topic], request_timeout=self.timeout)[self.topic]
        where = f"kafka.bootstrap.servers={self.opts.bootstrap}"
        try:
            fut.result(self.timeout)
        except KafkaException as e:
            code = e.args[0].code()
            if code != KafkaError.TOPIC_ALREADY_EXISTS:
                hint = (
                    f" (the principal needs Create, Write and Read on topic {self.topic}: "
                    f"a prefixed ACL on {COMMIT_LOG_PREFIX}, or option commitLogTopic)"
                    if code == KafkaError.TOPIC_AUTHORIZATION_FAILED
                    else ""
                )
                raise SamsaConnectionError(
                    f"could not create the sink's commit log {self.topic} on {where}: "
                    f"{e.args[0].str()}{hint}"
                ) from None
        except TimeoutError:
            raise SamsaConnectionError(
                f"could not create the sink's commit log {self.topic} on {where} "
                f"within {self.timeout:g}s"
            ) from None
        deadline = time.monotonic() + self.timeout
        while self.topic not in self.brokers.partitions_by_topic():
            if time.monotonic() > deadline:
                raise SamsaConnectionError(f"the commit log {self.topic} did not appear")
            time.sleep(0.05)

    def _read(self, partition: int, start: int, end: int) -> list[bytes]:
        c = _shared("consumer", self.opts, lambda: consumer(self.opts.bootstrap, self.opts.kafka))
        try:
            values = [
                m.value() or b"" for m in scan(c, self.topic, partition, start, end, self.timeout)
            ]
            c.unassign()
            return values
        except BaseException:
            _forget("consumer", self.opts)
            c.close()
            raise

    def ends(self) -> dict[int, int]:
        tps = [(self.topic, self.BATCHES), (self.topic, self.TASKS)]
        return {p: off for (_t, p), off in self.brokers.list_offsets(tps, "latest").items()}

    def last_batch(self, ends: Mapping[int, int] | None = None) -> BatchMarker | None:
        end = (ends or self.ends())[self.BATCHES]
        raw = self._read(self.BATCHES, end - 1, end) if end > 0 else []
        return BatchMarker.decode(raw[-1]) if raw else None

    def task_markers(self, since: int, ends: Mapping[int, int] | None = None) -> list[TaskMarker]:
        end = (ends or self.ends())[self.TASKS]
        return [TaskMarker.decode(v) for v in self._read(self.TASKS, since, end)]

    def append(self, partition: int, value: bytes) -> None:
        def make() -> tuple[Any, ProducerErrors]:
            errors = ProducerErrors(self.opts.bootstrap)
            return Producer({"acks": "all", **self.opts.kafka, **errors.conf()}), errors

        p, errors = _shared("marker-producer", self.opts, make)
        try:
            errors.produce(p, self.topic, value, partition=partition)
            errors.flush(p, self.timeout)
        except BaseException:
            _forget("marker-producer", self.opts)
            raise


class SamsaStreamWriter(DataSourceStreamArrowWriter):
    def __init__(self, options: Mapping[str, str], schema: StructType) -> None:
        self.opts = sink_options(options, schema)

    def write(self, iterator: Iterator[pa.RecordBatch]) -> SinkCommitMessage:
        from pyspark import TaskContext

        ctx = TaskContext.get()
        assert ctx is not None
        batch = ctx.getLocalProperty("streaming.sql.batchId")
        query_id = ctx.getLocalProperty("sql.streaming.queryId")
        if batch is None or query_id is None:
            raise RuntimeError("the samsa stream writer runs outside a streaming micro-batch")
        batch_id = int(batch)
        task = ctx.partitionId()
        clog = CommitLog(self.opts, query_id)
        clog.ensure()
        # One look at both ends serves both reads: an earlier attempt of this task is over
        # (speculation is off) before this one starts, so its marker is already below them.
        ends = clog.ends()
        last = clog.last_batch(ends)
        if already_published(last, batch_id):
            log.info("samsa sink: batch %s already published, task %s skips it", batch_id, task)
            return SinkCommitMessage(query_id=query_id, skipped=True)
        since = last.task_log_end if last else 0
        retry = earlier_attempt(clog.task_markers(since, ends), batch_id, task)
        clog.append(CommitLog.TASKS, TaskMarker(batch_id, task, ctx.attemptNumber()).encode())
        header = (TAG_HEADER, tag(query_id, batch_id, task))
        if not retry:
            done = publish_columnar(self.opts, iterator, header)
            if done is not None:
                return SinkCommitMessage(query_id=query_id, topics=done[0], published=done[1])
        rows: Iterable[Record] = (r for b in iterator for r in records(b, self.opts.topic))
        if retry:
            rows = list(rows)
            present = self._published_before(clog, last, {r[0] for r in rows}, header[1])
            todo = missing(rows, present, _identity)
            log.warning(
                "samsa sink: batch %s task %s is replayed: %d of its %d records were already "
                "published, publishing the other %d",
                batch_id,
                task,
                len(rows) - len(todo),
                len(rows),
                len(todo),
            )
            rows = todo
        topics, sent = publish_all(self.opts, rows, header)
        return SinkCommitMessage(query_id=query_id, topics=topics, published=sent)

    def _published_before(
        self, clog: CommitLog, last: BatchMarker | None, topics: set[str], my_tag: bytes
    ) -> Counter[Identity]:
        """Records carrying this task's tag between the last fence and the partitions' ends."""
        partitions = clog.brokers.partitions_by_topic()
        tps = [(t, p) for t in sorted(topics) for p in range(partitions.get(t, 0))]
        ends = clog.brokers.list_offsets(tps, "latest")
        starts = clog.brokers.list_offsets(tps, "earliest")
        fence = last.fence if last else {}
        present: Counter[Identity] = Counter()
        c = consumer(self.opts.bootstrap, self.opts.kafka)
        try:
            for t, p in tps:
                start = max(starts[(t, p)], fence.get(t, {}).get(p, 0))
                for m in scan(c, t, p, start, ends[(t, p)], clog.timeout * 10):
                    hs = [(k, _bytes(v)) for k, v in (m.headers() or [])]
                    if (TAG_HEADER, my_tag) in hs:
                        rest = tuple((k, v) for k, v in hs if k != TAG_HEADER)
                        present[(t, m.key(), m.value(), rest)] += 1
        finally:
            c.close()
        return present

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        msgs = [m for m in messages if isinstance(m, SinkCommitMessage)]
        query_ids = {m.query_id for m in msgs if m.query_id}
        if not query_ids:
            return  # no task ran: nothing was published
        clog = CommitLog(self.opts, query_ids.pop())
        # Every task has appended its marker and flushed its records before Spark calls this:
        # one ListOffsets round gives the data's ends, and the commit log's, for the marker.
        partitions = clog.brokers.partitions_by_topic()
        log_tps = [(clog.topic, CommitLog.BATCHES), (clog.topic, CommitLog.TASKS)]

        def every_partition(topics: Iterable[str]) -> list[tuple[str, int]]:
            return [(t, p) for t in sorted(topics) for p in range(partitions.get(t, 0))]

        published = {t for m in msgs for t in m.topics}
        ends = clog.brokers.list_offsets(log_tps + every_partition(published), "latest")
        log_ends = {p: ends.pop((t, p)) for t, p in log_tps}
        last = clog.last_batch(log_ends)
        if already_published(last, batchId):
            log.info("samsa sink: batch %s was already marked published", batchId)
            return
        # Topics of earlier batches stay in the fence.
        earlier = set(last.fence if last else ()) - published
        ends.update(clog.brokers.list_offsets(every_partition(earlier), "latest"))
        written: dict[str, dict[int, int]] = {}
        for (t, p), off in ends.items():
            written.setdefault(t, {})[p] = off
        marker = BatchMarker(batchId, next_fence(last, written), log_ends[CommitLog.TASKS])
        clog.append(CommitLog.BATCHES, marker.encode())

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        # What the failed attempt published is found again, by its tags, when Spark replays it.
        return None
