"""Issue 6's benchmark: rows per second read into local[2] Spark from a 6-partition Samsa topic
through the samsa source and through Spark's own Kafka connector (format "kafka",
spark-sql-kafka-0-10), batch and streaming (availableNow), beside the same rows read from
Parquet files in the same run. The samsa source reads with its columnar Fetch path, and with
librdkafka (option reader=librdkafka) as the baseline. A last row reads the same number of rows
from `bench.spark_floor`, a Python source with no I/O that yields ready-made batches: what
Spark's Python data source path costs by itself, the most any Python source can reach here.

Every read ends in Spark's "noop" sink, so each row is materialised and nothing else is timed.
Each read runs three times in a row (once with --quick); a row gives the median, its note all
three.
The broker is a separate process; Spark, the broker and this script share the machine's cores.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from bench import spark_floor
from bench.standalone import samsa_broker
from bench.table import Row
from samsa_dev import jars
from samsa_spark.spark_session import local_spark

PARTITIONS = 6
SIZE = 100
REPEATS = 3  # each read, batch and streaming, is timed this often; the rows give the median


def _fill(bootstrap: str, topic: str, count: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(topic, PARTITIONS, 1)]).values():
        f.result(30)
    p = Producer(
        {
            "bootstrap.servers": bootstrap,
            "enable.idempotence": False,
            "linger.ms": 20,
            "batch.size": 1 << 20,
            "compression.type": "none",
        }
    )
    value = b"x" * SIZE
    for i in range(count):
        while True:
            try:
                p.produce(topic, value, str(i).encode(), partition=i % PARTITIONS)
                break
            except BufferError:
                p.poll(0.01)
    assert p.flush(120) == 0


def _timed(action) -> float:
    start = time.perf_counter()
    action()
    return time.perf_counter() - start


def _row(workload: str, system: str, count: int, runs: list[float], note: str = "") -> Row:
    """The median of the runs; the note lists them all."""
    seconds = statistics.median(runs)
    each = "/".join(f"{r:.2f}" for r in runs)
    return Row(
        workload,
        system,
        SIZE,
        msgs_per_s=count / seconds,
        mb_per_s=count * SIZE / seconds / 1e6,
        note=f"{count:,} rows in {each}s" + note,
    )


def _stream_row(system: str, count: int, runs: list[tuple[float, int]]) -> Row:
    failed = sum(f for _s, f in runs)
    note = f" ({failed} failed start(s) too)" if failed else ""
    return _row("spark streaming read (availableNow)", system, count, [s for s, _f in runs], note)


# (format, samsa reader, row label): the samsa source both ways, then Spark's connector, then
# the floor of any Python source (bench.spark_floor: ready-made batches, no I/O)
SOURCES = (
    ("samsa", "columnar", "samsa source (columnar)"),
    ("samsa", "librdkafka", "samsa source (librdkafka)"),
    ("kafka", "", "kafka connector"),
    (spark_floor.NAME, "", "Python source floor (ready-made batches)"),
)


def run(quick: bool = False) -> list[Row]:
    count = 300_000 if quick else 3_000_000
    repeats = 1 if quick else REPEATS
    rows: list[Row] = []
    with samsa_broker({"log.segment.bytes": str(256 << 20)}) as (bootstrap, _pid):
        topic = "spark-read"
        _fill(bootstrap, topic, count)
        spark = local_spark("samsa-bench-spark-read", jars.files("spark-kafka"))
        tmp = Path(tempfile.mkdtemp(prefix="samsa-bench-spark-"))
        try:
            spark_floor.register(spark)

            def source(reader, fmt="samsa"):
                if fmt == spark_floor.NAME:
                    return reader.format(fmt).option("rows", count).option("topic", topic)
                df = reader.format(fmt).option("kafka.bootstrap.servers", bootstrap)
                return df.option("subscribe", topic)

            def batch(fmt="samsa", samsa_reader="columnar"):
                df = source(spark.read, fmt)
                return (df.option("reader", samsa_reader) if fmt == "samsa" else df).load()

            # Untimed: the Parquet copy of the same rows, which also warms the JVM and workers.
            parquet = str(tmp / "parquet")
            batch().write.parquet(parquet)
            assert batch("kafka").count() == count  # and the connector's classes loaded
            schema = spark.read.parquet(parquet).schema
            assert spark.read.parquet(parquet).count() == count

            def noop(df):
                return lambda: df.write.format("noop").mode("overwrite").save()

            for fmt, samsa_reader, system in SOURCES:
                runs = [_timed(noop(batch(fmt, samsa_reader))) for _ in range(repeats)]
                rows.append(_row("spark batch read", system, count, runs))
            runs = [_timed(noop(spark.read.parquet(parquet))) for _ in range(repeats)]
            rows.append(_row("spark batch read", "parquet files", count, runs))

            def streams(df, name) -> list[tuple[float, int]]:
                return [stream(df, f"{name}-{n}") for n in range(repeats)]

            def stream(df, name) -> tuple[float, int]:
                """Seconds of one availableNow run into noop, and how many starts failed first:
                on a loaded machine a Python source's worker may miss Spark's fixed 10 s to
                connect back, and the run is then started again from scratch."""
                from pyspark.errors import StreamingQueryException

                for attempt in range(3):
                    start = time.perf_counter()
                    q = (
                        df.writeStream.format("noop")
                        .option("checkpointLocation", str(tmp / f"ckpt-{name}-{attempt}"))
                        .trigger(availableNow=True)
                        .start()
                    )
                    try:
                        q.awaitTermination()
                    except StreamingQueryException as exc:
                        if "failed to connect back" not in str(exc) or attempt == 2:
                            raise
                        continue
                    return time.perf_counter() - start, attempt
                raise AssertionError("unreachable")

            for fmt, samsa_reader, system in SOURCES:
                df = source(spark.readStream, fmt)
                if fmt != spark_floor.NAME:
                    df = df.option("startingOffsets", "earliest")
                if fmt == "samsa":
                    df = df.option("reader", samsa_reader)
                name = f"{fmt}-{samsa_reader}"
                rows.append(_stream_row(system, count, streams(df.load(), name)))
            parquet_stream = spark.readStream.schema(schema).parquet(parquet)
            rows.append(_stream_row("parquet files", count, streams(parquet_stream, "parquet")))
        finally:
            spark.stop()
            import shutil

            shutil.rmtree(tmp, ignore_errors=True)
    return rows


if __name__ == "__main__":
    from bench.table import print_table

    print_table("Spark read", run("--quick" in sys.argv))
