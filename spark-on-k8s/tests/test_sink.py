"""The samsa sink: batch writes with Spark's Kafka sink columns, and streaming writes whose
replays after injected failures publish no duplicates."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from pyspark.errors import PySparkException
from pyspark.sql import functions as F
from spark_support import SINK_KAFKA, consume_all, produce, ship_by_value

from samsa_spark.options import get_option
from samsa_spark.sink import SamsaStreamWriter
from samsa_spark.source import SamsaDataSource

ship_by_value(__name__)


def test_batch_write_with_key_value_headers_and_topic_columns(spark, bootstrap, make_topic):
    a, b = make_topic(2), make_topic(1)
    rows = [(a if i % 3 else b, f"k{i}", f"v{i}".encode(), i % 2) for i in range(30)]
    df = spark.createDataFrame(rows, "topic string, key string, value binary, n int").select(
        "topic",
        "key",
        "value",
        F.array(
            F.struct(
                F.lit("n").alias("key"), F.col("n").cast("string").cast("binary").alias("value")
            )
        ).alias("headers"),
    )
    writer = df.write.format("samsa").option("kafka.bootstrap.servers", bootstrap)
    for k, v in SINK_KAFKA.items():
        writer = writer.option(k, v)
    writer.mode("append").save()
    got = {
        (m.topic(), m.key(), m.value(), tuple(m.headers() or ()))
        for t in (a, b)
        for m in consume_all(bootstrap, t)
    }
    assert got == {(t, k.encode(), v, (("n", str(n).encode()),)) for t, k, v, n in rows}


def test_sink_errors_name_what_is_wrong(spark, bootstrap):
    df = spark.createDataFrame([("k",)], "key string")
    with pytest.raises(PySparkException, match="needs a value column"):
        df.write.format("samsa").option("kafka.bootstrap.servers", bootstrap).option(
            "topic", "x"
        ).mode("append").save()
    df = spark.createDataFrame([("v",)], "value string")
    with pytest.raises(PySparkException, match="unknown topic no-such-topic"):
        df.write.format("samsa").option("kafka.bootstrap.servers", bootstrap).option(
            "topic", "no-such-topic"
        ).mode("append").save()


class InjectedFailure(RuntimeError):
    pass


def _die_after(batches, rows: int):
    """Pass `rows` rows through one at a time, then fail as a crashing task would."""
    seen = 0
    for b in batches:
        for i in range(b.num_rows):
            if seen == rows:
                raise InjectedFailure("injected: task dies mid-publish")
            seen += 1
            yield b.slice(i, 1)


class FaultyWriter(SamsaStreamWriter):
    """The real sink with three failures injected once each, at the worst moments:
    batch 1 task 0 dies after publishing 4 rows; the driver dies before marking batch 2
    published; and after marking batch 3, before Spark records it in the checkpoint."""

    def __init__(self, options, schema) -> None:
        super().__init__(options, schema)
        self.faults = Path(get_option(options, "faultDir") or "")

    def _once(self, name: str) -> bool:
        flag = self.faults / name
        if flag.exists():
            return False
        flag.touch()
        return True

    def write(self, iterator):
        from pyspark import TaskContext

        ctx = TaskContext.get()
        batch = int(ctx.getLocalProperty("streaming.sql.batchId"))
        if batch == 1 and ctx.partitionId() == 0 and self._once("task-1-0"):
            iterator = _die_after(iterator, 4)
        return super().write(iterator)

    def commit(self, messages, batchId):
        if batchId == 2 and self._once("before-marker-2"):
            raise InjectedFailure("injected: driver dies before the batch marker")
        super().commit(messages, batchId)
        if batchId == 3 and self._once("after-marker-3"):
            raise InjectedFailure("injected: driver dies after the batch marker")


class FaultySamsa(SamsaDataSource):
    @classmethod
    def name(cls) -> str:
        return "samsa_faulty"

    def streamWriter(self, schema, overwrite):
        return FaultyWriter(self.options, schema)


@pytest.mark.slow
def test_streaming_replays_after_injected_failures_publish_no_duplicates(
    spark, bootstrap, make_topic, tmp_path
):
    spark.dataSource.register(FaultySamsa)
    source, sink = make_topic(3, "in"), make_topic(2, "out")
    values = [f"{p}-{i}".encode() for p in range(3) for i in range(40)]
    for p in range(3):
        produce(bootstrap, source, [(None, f"{p}-{i}".encode()) for i in range(40)], partition=p)
    faults = tmp_path / "faults"
    faults.mkdir()

    def run():
        df = (
            spark.readStream.format("samsa")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", source)
            .option("startingOffsets", "earliest")
            .option("maxOffsetsPerTrigger", "30")
            .load()
            .select("key", "value")
        )
        w = (
            df.writeStream.format("samsa_faulty")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("topic", sink)
            .option("faultDir", str(faults))
            .option("checkpointLocation", str(tmp_path / "ckpt"))
            .trigger(availableNow=True)
        )
        for k, v in SINK_KAFKA.items():
            w = w.option(k, v)
        q = w.start()
        try:
            q.awaitTermination(180)
        except PySparkException as e:
            assert "injected:" in str(e), e
            return False
        return True

    runs = 1
    while not run():
        runs += 1
        assert runs <= 4
    assert runs == 4  # each injected failure stopped the query once
    assert {p.name for p in faults.iterdir()} == {"task-1-0", "before-marker-2", "after-marker-3"}
    published = Counter(m.value() for m in consume_all(bootstrap, sink))
    assert published == Counter(values)
