"""Batch reads through the samsa source: every record once, Spark's Kafka columns and types."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from spark_support import produce


def test_batch_read_of_six_partitions_returns_every_record_once(spark, bootstrap, make_topic):
    topic = make_topic(6)
    for p in range(6):
        produce(
            bootstrap,
            topic,
            [(f"k{p}-{i}".encode(), f"v{p}-{i}".encode(), [("h", b"x")]) for i in range(50)],
            partition=p,
        )
    df = (
        spark.read.format("samsa")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("includeHeaders", "true")
        .load()
    )
    assert [(f.name, f.dataType.simpleString()) for f in df.schema.fields] == [
        ("key", "binary"),
        ("value", "binary"),
        ("topic", "string"),
        ("partition", "int"),
        ("offset", "bigint"),
        ("timestamp", "timestamp"),
        ("timestampType", "int"),
        ("headers", "array<struct<key:string,value:binary>>"),
    ]
    assert df.rdd.getNumPartitions() == 6
    rows = df.collect()
    assert len(rows) == 300
    got = {(r.topic, r.partition, r.offset): (bytes(r.key), bytes(r.value)) for r in rows}
    assert len(got) == 300
    for p in range(6):
        for i in range(50):
            assert got[(topic, p, i)] == (f"k{p}-{i}".encode(), f"v{p}-{i}".encode())
    r = rows[0]
    assert r.timestampType == 0
    assert abs((datetime.now(UTC).replace(tzinfo=None) - r.timestamp).total_seconds()) < 600
    assert [(h.key, bytes(h.value)) for h in r.headers] == [("h", b"x")]


def test_min_partitions_splits_ranges_and_assign_reads_chosen_partitions(
    spark, bootstrap, make_topic
):
    topic = make_topic(2)
    produce(bootstrap, topic, [(None, str(i).encode()) for i in range(100)], partition=0)
    produce(bootstrap, topic, [(None, b"other")] * 10, partition=1)

    def read(**options):
        reader = spark.read.format("samsa").option("kafka.bootstrap.servers", bootstrap)
        for k, v in options.items():
            reader = reader.option(k, v)
        return reader.load()

    split = read(subscribe=topic, minPartitions="8")
    assert split.rdd.getNumPartitions() >= 8
    assert sorted(r.offset for r in split.where("partition = 0").collect()) == list(range(100))
    one = read(assign=json.dumps({topic: [1]}), endingOffsets=json.dumps({topic: {"1": 4}}))
    assert [(r.partition, r.offset) for r in one.collect()] == [(1, o) for o in range(4)]
