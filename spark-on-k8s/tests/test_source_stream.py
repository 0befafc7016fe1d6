"""Structured Streaming reads: exactly-once through the checkpoint across a stop in the middle
of a micro-batch, new partitions picked up, rate limits with availableNow."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewPartitions
from pyspark.sql import functions as F
from pyspark.sql.types import BinaryType
from spark_support import produce, ship_by_value, wait_for

ship_by_value(__name__)


def _gate(reached: str, release: str, hold: bytes):
    """A UDF that, on the record `hold`, says so and waits (bounded) until released."""

    def gate(value):
        if value == hold and not Path(release).exists():
            Path(reached).touch()
            deadline = time.monotonic() + 60
            while not Path(release).exists() and time.monotonic() < deadline:
                time.sleep(0.05)
        return value

    return F.udf(gate, BinaryType())


def _stream(spark, bootstrap, topic, **options):
    reader = (
        spark.readStream.format("samsa")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
    )
    for k, v in options.items():
        reader = reader.option(k, v)
    return reader.load()


@pytest.mark.slow
def test_stop_in_the_middle_of_a_batch_then_restart_reads_every_record_once(
    spark, bootstrap, make_topic, tmp_path
):
    topic = make_topic(3)
    for p in range(3):
        produce(bootstrap, topic, [(None, f"{p}-{i}".encode()) for i in range(100)], partition=p)
    out, ckpt = str(tmp_path / "out"), str(tmp_path / "ckpt")
    reached, release = str(tmp_path / "reached"), str(tmp_path / "release")
    gate = _gate(reached, release, b"1-70")

    def start():
        df = _stream(
            spark, bootstrap, topic, startingOffsets="earliest", maxOffsetsPerTrigger="150"
        )
        return (
            df.select("topic", "partition", "offset", gate("value").alias("value"))
            .writeStream.format("parquet")
            .option("path", out)
            .option("checkpointLocation", ckpt)
            .trigger(availableNow=True)
            .start()
        )

    q = start()
    wait_for(lambda: Path(reached).exists(), what="the query to reach the held record")
    stopper = threading.Thread(target=q.stop)
    stopper.start()
    stopper.join(120)
    assert not stopper.is_alive()
    Path(release).touch()
    done_before = spark.read.parquet(out).count() if Path(out, "_spark_metadata").exists() else 0
    assert done_before < 300, "the first run must have been cut short"

    q = start()
    q.awaitTermination(180)
    assert q.exception() is None
    rows = spark.read.parquet(out).collect()
    keys = [(r.topic, r.partition, r.offset) for r in rows]
    assert len(keys) == 300
    assert set(keys) == {(topic, p, o) for p in range(3) for o in range(100)}
    assert {bytes(r.value) for r in rows} == {
        f"{p}-{i}".encode() for p in range(3) for i in range(100)
    }


def test_streaming_picks_up_new_partitions(spark, bootstrap, make_topic, tmp_path):
    topic = make_topic(2)
    produce(bootstrap, topic, [(None, b"a")], partition=0)
    q = (
        _stream(spark, bootstrap, topic, startingOffsets="earliest")
        .select("partition", "value")
        .writeStream.format("memory")
        .queryName("newparts")
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .trigger(processingTime="200 milliseconds")
        .start()
    )
    try:
        q.processAllAvailable()
        admin = AdminClient({"bootstrap.servers": bootstrap})
        for f in admin.create_partitions([NewPartitions(topic, 4)]).values():
            f.result(30)
        produce(bootstrap, topic, [(None, b"c")], partition=3)
        produce(bootstrap, topic, [(None, b"b")], partition=1)

        def seen():
            return {
                (r.partition, bytes(r.value)) for r in spark.sql("select * from newparts").collect()
            }

        wait_for(lambda: len(seen()) == 3, what="records of the new partition")
        assert seen() == {(0, b"a"), (1, b"b"), (3, b"c")}
    finally:
        q.stop()
