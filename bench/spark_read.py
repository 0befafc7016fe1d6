"""Issue 6's benchmark: rows per second read into local[2] Spark from a 6-partition Samsa topic
through the samsa source, batch and streaming (availableNow), beside the same rows read from
Parquet files in the same run. The samsa source reads with its columnar Fetch path, and with
librdkafka (option reader=librdkafka) as the baseline.

Every read ends in Spark's "noop" sink, so each row is materialised and nothing else is timed.
The broker is a separate process; Spark, the broker and this script share the machine's cores.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from bench.standalone import samsa_broker
from bench.table import Row
from samsa_spark.local import local_spark

PARTITIONS = 6
SIZE = 100
READERS = ("columnar", "librdkafka")


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


def _row(workload: str, system: str, count: int, seconds: float, note: str = "") -> Row:
    return Row(
        workload,
        system,
        SIZE,
        msgs_per_s=count / seconds,
        mb_per_s=count * SIZE / seconds / 1e6,
        note=note or f"{count:,} rows in {seconds:.1f}s",
    )


def run(quick: bool = False) -> list[Row]:
    count = 300_000 if quick else 3_000_000
    rows: list[Row] = []
    with samsa_broker({"log.segment.bytes": str(256 << 20)}) as (bootstrap, _pid):
        topic = "spark-read"
        _fill(bootstrap, topic, count)
        spark = local_spark("samsa-bench-spark-read")
        tmp = Path(tempfile.mkdtemp(prefix="samsa-bench-spark-"))
        try:

            def samsa_batch(reader="columnar"):
                return (
                    spark.read.format("samsa")
                    .option("kafka.bootstrap.servers", bootstrap)
                    .option("subscribe", topic)
                    .option("reader", reader)
                    .load()
                )

            # Untimed: the Parquet copy of the same rows, which also warms the JVM and workers.
            parquet = str(tmp / "parquet")
            samsa_batch().write.parquet(parquet)
            schema = spark.read.parquet(parquet).schema
            assert spark.read.parquet(parquet).count() == count

            def noop(df):
                return lambda: df.write.format("noop").mode("overwrite").save()

            for reader in READERS:
                rows.append(
                    _row(
                        "spark batch read",
                        f"samsa source ({reader})",
                        count,
                        _timed(noop(samsa_batch(reader))),
                    )
                )
            rows.append(
                _row(
                    "spark batch read",
                    "parquet files",
                    count,
                    _timed(noop(spark.read.parquet(parquet))),
                )
            )

            def stream(df, name):
                def go():
                    q = (
                        df.writeStream.format("noop")
                        .option("checkpointLocation", str(tmp / f"ckpt-{name}"))
                        .trigger(availableNow=True)
                        .start()
                    )
                    q.awaitTermination()
                    assert q.exception() is None

                return go

            for reader in READERS:
                samsa_stream = (
                    spark.readStream.format("samsa")
                    .option("kafka.bootstrap.servers", bootstrap)
                    .option("subscribe", topic)
                    .option("startingOffsets", "earliest")
                    .option("reader", reader)
                    .load()
                )
                rows.append(
                    _row(
                        "spark streaming read (availableNow)",
                        f"samsa source ({reader})",
                        count,
                        _timed(stream(samsa_stream, f"samsa-{reader}")),
                    )
                )
            parquet_stream = spark.readStream.schema(schema).parquet(parquet)
            rows.append(
                _row(
                    "spark streaming read (availableNow)",
                    "parquet files",
                    count,
                    _timed(stream(parquet_stream, "parquet")),
                )
            )
        finally:
            spark.stop()
            import shutil

            shutil.rmtree(tmp, ignore_errors=True)
    return rows


if __name__ == "__main__":
    from bench.table import print_table

    print_table("Spark read", run("--quick" in sys.argv))
