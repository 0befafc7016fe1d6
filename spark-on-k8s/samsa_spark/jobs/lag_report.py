"""Job (c), a batch report per topic partition: volume (records, bytes, first and last
timestamps, read with the samsa source) and, for every consumer group with committed offsets
on it, the committed offset and the lag behind the end of the log.

Committed offsets come from the brokers' group coordinator (ListGroups and OffsetFetch through
confluent-kafka's AdminClient).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from confluent_kafka import ConsumerGroupTopicPartitions, KafkaException
from confluent_kafka.admin import AdminClient
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from samsa_spark.client import Brokers, SamsaConnectionError
from samsa_spark.jobs.common import arguments, samsa_reader, session


@dataclass(frozen=True)
class Committed:
    group: str
    topic: str
    partition: int
    offset: int


def committed_offsets(
    bootstrap: str, timeout: float = 30.0, kafka: Mapping[str, str] | None = None
) -> list[Committed]:
    """Every committed offset of every consumer group on the cluster."""
    admin = AdminClient({"bootstrap.servers": bootstrap, **(kafka or {})})
    try:
        listing = admin.list_consumer_groups(request_timeout=timeout).result(timeout)
        groups = [g.group_id for g in listing.valid]
        out: list[Committed] = []
        for gid in groups:
            futures = admin.list_consumer_group_offsets(
                [ConsumerGroupTopicPartitions(gid)], request_timeout=timeout
            )
            for fut in futures.values():
                res = fut.result(timeout)
                for tp in res.topic_partitions or []:
                    if tp.offset >= 0:
                        out.append(Committed(gid, tp.topic, tp.partition, tp.offset))
        return out
    except KafkaException as e:
        raise SamsaConnectionError(
            f"listing consumer groups on kafka.bootstrap.servers={bootstrap}: {e.args[0].str()}"
        ) from None


def volume(
    spark: SparkSession, bootstrap: str, pattern: str, kafka: Mapping[str, str] | None = None
) -> DataFrame:
    reader = samsa_reader(spark.read, bootstrap, {"subscribePattern": pattern, **(kafka or {})})
    return (
        reader.load()
        .groupBy("topic", "partition")
        .agg(
            F.count("*").alias("records"),
            F.sum(
                F.coalesce(F.length("key"), F.lit(0)) + F.coalesce(F.length("value"), F.lit(0))
            ).alias("bytes"),
            F.min("timestamp").alias("first_timestamp"),
            F.max("timestamp").alias("last_timestamp"),
        )
    )


def lag_report(
    spark: SparkSession, bootstrap: str, pattern: str = ".*", kafka: Mapping[str, str] | None = None
) -> DataFrame:
    """One row per (topic, partition, group): volume, log end, committed offset and lag; a
    partition no group has committed on appears once, with a null group."""
    import re

    kafka = dict(kafka or {})
    brokers = Brokers(bootstrap, {k[6:]: v for k, v in kafka.items()}, 30_000)
    regex = re.compile(pattern)
    parts = {t: n for t, n in brokers.partitions_by_topic().items() if regex.fullmatch(t)}
    tps = [(t, p) for t, n in parts.items() for p in range(n)]
    latest = brokers.list_offsets(tps, "latest")
    earliest = brokers.list_offsets(tps, "earliest")
    ends = spark.createDataFrame(
        [(t, p, earliest[(t, p)], latest[(t, p)]) for t, p in tps],
        "topic string, partition int, log_start bigint, log_end bigint",
    )
    committed: list[Any] = [
        (c.group, c.topic, c.partition, c.offset)
        for c in committed_offsets(bootstrap)
        if c.topic in parts
    ]
    groups = spark.createDataFrame(
        committed, "group string, topic string, partition int, committed bigint"
    )
    return (
        ends.join(volume(spark, bootstrap, pattern, kafka), ["topic", "partition"], "left")
        .join(groups, ["topic", "partition"], "left")
        .withColumn("records", F.coalesce("records", F.lit(0)))
        .withColumn("bytes", F.coalesce("bytes", F.lit(0)))
        .withColumn("lag", F.col("log_end") - F.col("committed"))
        .select(
            "topic",
            "partition",
            "log_start",
            "log_end",
            "records",
            "bytes",
            "first_timestamp",
            "last_timestamp",
            "group",
            "committed",
            "lag",
        )
        .orderBy("topic", "partition", "group")
    )


def main(argv: Sequence[str] | None = None) -> None:
    import argparse

    extra = argparse.ArgumentParser(add_help=False)
    extra.add_argument("--topics", default=".*", help="regular expression of topics to report on")
    extra.add_argument("--output", default=None, help="also write the report here as JSON lines")
    known, rest = extra.parse_known_args(argv)
    p = arguments(__doc__ or "", rest, streaming=False)
    spark = session("samsa-lag-report")
    report = lag_report(spark, p.bootstrap, known.topics, p.kafka_options)
    report.show(1000, truncate=False)
    if known.output:
        report.write.mode("overwrite").json(known.output)


if __name__ == "__main__":
    main()
