"""Spark's own Kafka connector (spark-sql-kafka-0-10, format "kafka") against a replicated
3-broker Samsa cluster: batch and streaming writes and reads, the samsa format reading what the
connector wrote the same way, and a streaming query that resumes from its checkpoint."""

from __future__ import annotations

from pyspark.sql import functions as F
from spark_support import consume_all, produce

COLUMNS = ["key", "value", "topic", "partition", "offset", "timestamp", "timestampType"]


def _read(spark, fmt, bootstrap, topic):
    return (
        spark.read.format(fmt)
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("includeHeaders", "true")
        .load()
    )


def test_batch_write_and_read_through_the_connector_match_the_samsa_source(
    spark, cluster_bootstrap, make_cluster_topic
):
    topic = make_cluster_topic(3, "batch")
    rows = [(f"k{i}", f"v{i}", i % 3) for i in range(300)]
    (
        spark.createDataFrame(rows, "key string, value string, partition int")
        .withColumn(
            "headers",
            F.array(
                F.struct(F.lit("h").alias("key"), F.col("value").cast("binary").alias("value"))
            ),
        )
        .write.format("kafka")
        .option("kafka.bootstrap.servers", cluster_bootstrap)
        .option("topic", topic)
        .save()
    )

    connector = _read(spark, "kafka", cluster_bootstrap, topic)
    samsa = _read(spark, "samsa", cluster_bootstrap, topic)
    assert connector.schema == samsa.schema
    got = sorted(connector.collect(), key=lambda r: (r.partition, r.offset))
    assert len(got) == 300
    # Each row in the partition it named, once, at offsets 0..99 (two Spark tasks write each
    # partition at once, so their rows interleave).
    by_partition = {
        p: sorted((bytes(r.key).decode(), bytes(r.value).decode()) for r in got if r.partition == p)
        for p in range(3)
    }
    assert by_partition == {p: sorted((k, v) for k, v, q in rows if q == p) for p in range(3)}
    assert [(r.partition, r.offset) for r in got] == [(p, o) for p in range(3) for o in range(100)]
    assert all([(h.key, bytes(h.value)) for h in r.headers] == [("h", bytes(r.value))] for r in got)
    assert sorted(samsa.collect(), key=lambda r: (r.partition, r.offset)) == got


def _copy_stream(spark, bootstrap, source, sink, checkpoint):
    """A streaming copy from one topic to another through the connector, until caught up."""
    q = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", source)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", "60")
        .load()
        .select("key", "value")
        .writeStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", sink)
        .option("checkpointLocation", checkpoint)
        .trigger(availableNow=True)
        .start()
    )
    assert q.awaitTermination(240), "the streaming copy did not catch up"
    assert q.exception() is None


def test_streaming_query_resumes_from_its_checkpoint_after_a_restart(
    spark, cluster_bootstrap, make_cluster_topic, tmp_path
):
    source, sink = make_cluster_topic(3, "src"), make_cluster_topic(2, "dst")
    checkpoint = str(tmp_path / "checkpoint")
    first = [f"a{i}".encode() for i in range(150)]
    produce(cluster_bootstrap, source, [(None, v) for v in first])

    _copy_stream(spark, cluster_bootstrap, source, sink, checkpoint)
    copied = sorted(m.value() for m in consume_all(cluster_bootstrap, sink))
    assert copied == sorted(first)

    # Stopped; more arrives; the restarted query (startingOffsets says earliest, but the
    # checkpoint wins) copies exactly the new records, none of the old ones again.
    second = [f"b{i}".encode() for i in range(90)]
    produce(cluster_bootstrap, source, [(None, v) for v in second])
    _copy_stream(spark, cluster_bootstrap, source, sink, checkpoint)
    everything = sorted(m.value() for m in consume_all(cluster_bootstrap, sink))
    assert everything == sorted(first + second)
