"""Issue 18's sink benchmarks, on a 3-broker cluster (RF=3, min.insync.replicas=2) with local[2]
Spark: rows per second written by `df.write` through the samsa sink (columnar, and librdkafka
row by row as the baseline) and through Spark's own Kafka connector, all from the same
DataFrame of 100-byte values; then a streaming query from a topic through the samsa source into
the samsa sink with a 100 ms trigger, and the time from a record's produce to its copy being
readable in the sink's topic (p50, p99, p99.9), beside the same query through Spark's connector.
The harness's librdkafka producer writes the same number of records to the same cluster with no
Spark at all, from one Python process. Each write row gives the brokers' CPU per MB and how many
of the machine's cores they kept busy.

Spark, the brokers, the load generator and this script share the machine's cores.
"""

from __future__ import annotations

import struct
import sys
import tempfile
import threading
import time
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition

from bench.samsa_system import SamsaCluster, create_topic
from bench.table import Row, percentile
from bench.workloads import measure_throughput
from samsa_dev import jars
from samsa_spark.spark_session import local_spark

PARTITIONS = 6
SIZE = 100
TRIGGER = "100 milliseconds"
# The streaming query's format, source and sink alike, and its row's label.
LATENCY_SYSTEMS = {
    "samsa": "samsa source to samsa sink",
    "kafka": "kafka connector to kafka connector",
}
_STAMP = struct.Struct(">q")  # produce time, ns since the epoch, at the front of the value


def _rows(msgs_per_s: float, system: str, note: str, cpu_ms_per_mb: float | None = None) -> Row:
    return Row(
        "spark batch write (3 brokers, RF=3)",
        system,
        SIZE,
        msgs_per_s=msgs_per_s,
        mb_per_s=msgs_per_s * SIZE / 1e6,
        cpu_ms_per_mb=cpu_ms_per_mb,
        note=note,
    )


def _end_offsets(bootstrap: str, topic: str) -> int:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-count"})
    try:
        total = 0
        for p in range(PARTITIONS):
            lo, hi = c.get_watermark_offsets(TopicPartition(topic, p), timeout=30)
            total += hi - lo
        return total
    finally:
        c.close()


def _latency(spark, bootstrap: str, tmp: Path, seconds: float, rate: int, fmt: str) -> Row:
    """Produce `rate` stamped records a second for `seconds` into a topic a streaming query
    copies through format `fmt` (source and sink); read the copies and take each one's delay."""
    src, out = f"spark-lat-in-{fmt}", f"spark-lat-out-{fmt}"
    for t in (src, out):
        create_topic(bootstrap, t, PARTITIONS, 3, {"min.insync.replicas": "2"})
    q = (
        spark.readStream.format(fmt)
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", src)
        .option("startingOffsets", "latest")
        .load()
        .select("key", "value")
        .writeStream.format(fmt)
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", out)
        .option("checkpointLocation", str(tmp / f"ckpt-latency-{fmt}"))
        .trigger(processingTime=TRIGGER)
        .start()
    )
    delays: list[float] = []
    try:
        deadline = time.monotonic() + 120
        while not q.recentProgress:  # the first (empty) micro-batch has run: the query is up
            if time.monotonic() > deadline or q.exception() is not None:
                raise RuntimeError(f"the latency query did not start: {q.exception()}")
            time.sleep(0.1)
        c = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": f"bench-lat-{fmt}",
                "fetch.wait.max.ms": 10,
            }
        )
        c.assign([TopicPartition(out, p, -1) for p in range(PARTITIONS)])  # from the end
        stop = threading.Event()

        def produce() -> None:
            p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "acks": "all"})
            pad = b"x" * (SIZE - _STAMP.size)
            start = time.monotonic()
            i = 0
            while not stop.is_set() and time.monotonic() - start < seconds:
                due = start + i / rate
                now = time.monotonic()
                if due > now:
                    time.sleep(due - now)
                p.produce(src, _STAMP.pack(time.time_ns()) + pad, str(i).encode())
                p.poll(0)
                i += 1
            p.flush(30)

        producer = threading.Thread(target=produce, daemon=True)
        producer.start()
        expected = int(seconds * rate)
        warmup_until = time.time_ns() + 3_000_000_000  # the first seconds are not measured
        deadline = time.monotonic() + seconds + 60
        seen = 0
        while seen < expected and time.monotonic() < deadline:
            if q.exception() is not None:
                raise RuntimeError(f"the latency query failed: {q.exception()}")
            for m in c.consume(1000, 0.2):
                if m.error() is not None:
                    continue
                now = time.time_ns()
                sent = _STAMP.unpack_from(m.value() or b"\0" * 8)[0]
                seen += 1
                if sent >= warmup_until:
                    delays.append((now - sent) / 1e6)
        stop.set()
        producer.join(60)
        c.close()
        progress = q.recentProgress
    finally:
        q.stop()
    delays.sort()
    batches = [p for p in progress if p.numInputRows]
    per_batch = sorted(p.durationMs.get("triggerExecution", 0) for p in batches)
    return Row(
        f"spark produce-to-sink latency (trigger {TRIGGER.split()[0]} ms)",
        LATENCY_SYSTEMS[fmt],
        SIZE,
        msgs_per_s=rate,
        p50_ms=percentile(delays, 0.5),
        p99_ms=percentile(delays, 0.99),
        p999_ms=percentile(delays, 0.999),
        note=(
            f"{len(delays):,} of {seen:,} copies measured (first 3 s left out) at {rate}/s; "
            f"micro-batch p50 {percentile(per_batch, 0.5) or 0:.0f} ms"
        ),
    )


def run(quick: bool = False) -> list[Row]:
    count = 300_000 if quick else 3_000_000
    rows: list[Row] = []
    with SamsaCluster() as system:
        bootstrap = system.endpoint
        spark = local_spark("samsa-bench-spark-write", jars.files("spark-kafka"))
        tmp = Path(tempfile.mkdtemp(prefix="samsa-bench-spark-write-"))
        try:
            # The same rows for every writer, from Parquet: a key and a 100-byte value.
            parquet = str(tmp / "rows")
            spark.range(count).selectExpr(
                "cast(cast(id as string) as binary) as key",
                f"cast(rpad(cast(id as string), {SIZE}, 'x') as binary) as value",
            ).write.parquet(parquet)
            df = spark.read.parquet(parquet)
            # Untimed, as the read benchmark's Parquet copy: a small write through each writer
            # first, on two partitions, so that the timed writes find Spark's write path loaded
            # and both Python workers started with their imports (numba and the encoder take
            # seconds in a fresh worker: a session pays that once, and `cold` measures it).
            warm = spark.range(0, 20_000, numPartitions=2).selectExpr(
                "cast(cast(id as string) as binary) as key",
                f"cast(rpad(cast(id as string), {SIZE}, 'x') as binary) as value",
            )

            writers: tuple[tuple[str, dict[str, str], str], ...] = (
                ("samsa", {"writer": "columnar"}, "samsa sink (columnar)"),
                ("samsa", {"writer": "librdkafka"}, "samsa sink (librdkafka)"),
                ("kafka", {}, "kafka connector"),
            )

            def writer(data, fmt: str, opts: dict[str, str], topic: str):
                w = data.write.format(fmt).option("kafka.bootstrap.servers", bootstrap)
                for k, v in {**opts, "topic": topic}.items():
                    w = w.option(k, v)
                return w.mode("append")

            for n, (fmt, opts, system_name) in enumerate(writers):
                topic = f"spark-write-{n}"
                for t in (topic, f"{topic}-warm"):
                    create_topic(bootstrap, t, PARTITIONS, 3, {"min.insync.replicas": "2"})
                start = time.perf_counter()
                writer(warm, fmt, opts, f"{topic}-warm").save()
                cold = time.perf_counter() - start
                w = writer(df, fmt, opts, topic)
                start, cpu0 = time.perf_counter(), system.cpu_seconds()
                w.save()
                seconds = time.perf_counter() - start
                broker_cpu_s = system.cpu_seconds() - cpu0
                cores = broker_cpu_s / seconds
                written = _end_offsets(bootstrap, topic)
                note = (
                    f"{count:,} rows in {seconds:.1f}s; brokers busy {cores:.2f} cores; "
                    f"cold: 20,000 rows first took {cold:.1f}s"
                )
                if written != count:
                    note += f"; {written:,} in the topic"
                cpu_ms_per_mb = broker_cpu_s * 1000 / (count * SIZE / 1e6)
                rows.append(_rows(count / seconds, system_name, note, cpu_ms_per_mb))
            # The same records from a plain Kafka client with no Spark in the way: the harness's
            # librdkafka producer, idempotent and acks=all as the sink, on a fresh topic of the
            # same layout. One Python process calls produce() per record, which bounds it.
            topic = "spark-write-client"
            create_topic(bootstrap, topic, PARTITIONS, 3, {"min.insync.replicas": "2"})
            peak = measure_throughput(
                system, "produce", topic, SIZE, count, acks="all", idempotence=True
            )
            rows.append(
                _rows(
                    peak["msgs_per_s"] or 0.0,
                    "librdkafka producer, no Spark",
                    f"{count:,} records, idempotent, acks=all, one Python process",
                    peak["server_cpu_ms_per_mb"],
                )
            )
            for fmt in LATENCY_SYSTEMS:
                rows.append(_latency(spark, bootstrap, tmp, 10 if quick else 30, 1000, fmt))
        finally:
            spark.stop()
            import shutil

            shutil.rmtree(tmp, ignore_errors=True)
    return rows


if __name__ == "__main__":
    from bench.table import print_table

    print_table("Spark write", run("--quick" in sys.argv))
