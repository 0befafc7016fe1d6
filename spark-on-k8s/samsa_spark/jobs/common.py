"""What the jobs share: the command line, the SparkSession, reading and writing topics.

Every streaming job reads and writes through either format of the same options: ``samsa`` (this
package's Python source and sink) or ``kafka`` (Spark's own connector, spark-sql-kafka-0-10,
whose jars must be on Spark's classpath: they are in the image).
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery

FORMATS = ("samsa", "kafka")


def arguments(
    description: str, argv: Sequence[str] | None, streaming: bool = True
) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=description)
    where = p.add_mutually_exclusive_group()
    where.add_argument("--bootstrap", help="Kafka bootstrap servers host:port[,host:port]")
    where.add_argument(
        "--kafka-cluster",
        help="name of a KafkaCluster in this namespace: its status.bootstrapServers is used",
    )
    p.add_argument("--namespace", default=None, help="namespace of --kafka-cluster")
    p.add_argument(
        "--kafka-listener",
        default=None,
        help="with --kafka-cluster: the listener (of spec.listeners.clients) to bootstrap from; "
        "the plain internal one if unset",
    )
    p.add_argument(
        "--kafka",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="client setting for source and sink (repeatable), e.g. enable.idempotence=false: "
        "librdkafka's with --format samsa, the Java client's with --format kafka",
    )
    p.add_argument(
        "--kafka-user-secret",
        metavar="DIR",
        help="where a KafkaUser's Secret is mounted: its SCRAM password (SASL_SSL) or its "
        "client certificate (SSL) authenticates source and sink",
    )
    p.add_argument(
        "--kafka-ca",
        metavar="FILE",
        help="the CA certificate (PEM) the brokers' certificates are checked against: ca.crt "
        "of the Secret <cluster>-cluster-ca-cert",
    )
    if streaming:
        p.add_argument(
            "--format",
            choices=FORMATS,
            default="samsa",
            help="read and write with samsa_spark (samsa) or Spark's own Kafka connector (kafka)",
        )
        p.add_argument(
            "--checkpoint", required=True, help="checkpoint directory (a PVC on Kubernetes)"
        )
        p.add_argument(
            "--available-now",
            action="store_true",
            help="process what is there now, then stop (default: run until stopped)",
        )
    args = p.parse_args(argv)
    if not args.bootstrap:
        from samsa_spark.k8s import bootstrap_from_cluster

        if not args.kafka_cluster:
            p.error("one of --bootstrap or --kafka-cluster is required")
        args.bootstrap = bootstrap_from_cluster(
            args.kafka_cluster, args.namespace, args.kafka_listener
        )
    for item in args.kafka:
        if "=" not in item:
            p.error(f"--kafka {item!r}: expected KEY=VALUE")
    security = {}
    if args.kafka_user_secret or args.kafka_ca:
        security = kafka_user_options(args.kafka_user_secret, args.kafka_ca)
    given = dict(item.split("=", 1) for item in args.kafka)
    args.kafka_options = {f"kafka.{k}": v for k, v in {**security, **given}.items()}
    return args


def kafka_user_options(secret_dir: str | None, ca_file: str | None) -> dict[str, str]:
    """Client settings, by the Java client's names (which Spark's connector takes and the
    samsa format translates), from a mounted KafkaUser Secret and the cluster's CA: SASL_SSL
    with SCRAM-SHA-512 when the Secret holds a password, SSL with the user's certificate when
    it holds one."""
    options: dict[str, str] = {}
    tls = ca_file is not None
    if ca_file:
        options.update({"ssl.truststore.type": "PEM", "ssl.truststore.location": ca_file})
    if secret_dir:
        folder = Path(secret_dir)
        if (folder / "sasl.jaas.config").exists():
            options["security.protocol"] = "SASL_SSL" if tls else "SASL_PLAINTEXT"
            options["sasl.mechanism"] = "SCRAM-SHA-512"
            options["sasl.jaas.config"] = (folder / "sasl.jaas.config").read_text().strip()
        elif (folder / "user.pem").exists():
            options["security.protocol"] = "SSL"
            options["ssl.keystore.type"] = "PEM"
            options["ssl.keystore.location"] = str(folder / "user.pem")
        else:
            raise SystemExit(f"--kafka-user-secret {secret_dir}: no sasl.jaas.config or user.pem")
    elif tls:
        options["security.protocol"] = "SSL"
    return options


def session(app: str) -> SparkSession:
    import samsa_spark

    builder = SparkSession.builder.appName(app)
    if "SPARK_MASTER" in os.environ:
        builder = builder.master(os.environ["SPARK_MASTER"])
    spark = builder.getOrCreate()
    samsa_spark.register(spark)
    return spark


def samsa_reader(
    reader: Any, bootstrap: str, options: Mapping[str, str], fmt: str = "samsa"
) -> Any:
    """A DataFrame(Stream)Reader set up for the samsa format (or Spark's kafka format)."""
    reader = reader.format(fmt).option("kafka.bootstrap.servers", bootstrap)
    for k, v in options.items():
        reader = reader.option(k, v)
    return reader


def read_stream(
    spark: SparkSession,
    bootstrap: str,
    topic: str,
    options: Mapping[str, str] | None = None,
    fmt: str = "samsa",
) -> DataFrame:
    opts = {"subscribe": topic, "startingOffsets": "earliest", **(options or {})}
    return samsa_reader(spark.readStream, bootstrap, opts, fmt).load()


def keyed_by_campaign(df: DataFrame, *fields: str) -> DataFrame:
    """Windowed rows as the jobs publish them: the campaign as key, JSON as value."""
    return df.select(
        F.col("campaign_id").alias("key"),
        F.to_json(
            F.struct(
                "campaign_id",
                F.date_format("window.start", "yyyy-MM-dd'T'HH:mm:ss'Z'").alias("window_start"),
                F.date_format("window.end", "yyyy-MM-dd'T'HH:mm:ss'Z'").alias("window_end"),
                *fields,
            )
        ).alias("value"),
    )


def write_stream(
    df: DataFrame,
    bootstrap: str,
    topic: str,
    checkpoint: str,
    available_now: bool,
    options: Mapping[str, str] | None = None,
    name: str | None = None,
    fmt: str = "samsa",
) -> StreamingQuery:
    writer: Any = (
        df.writeStream.format(fmt)
        .outputMode("append")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", topic)
        .option("checkpointLocation", checkpoint)
    )
    for k, v in (options or {}).items():
        writer = writer.option(k, v)
    if name:
        writer = writer.queryName(name)
    writer = (
        writer.trigger(availableNow=True)
        if available_now
        else writer.trigger(processingTime="5 seconds")
    )
    return writer.start()


def run_streaming_job(
    app: str, description: str, argv: Sequence[str] | None, start: Any, *topics: str
) -> None:
    """The streaming jobs' main: arguments, session, start(spark, bootstrap, *topics,
    checkpoint, available_now, source options, sink options, format), then wait."""
    p = arguments(description, argv)
    spark = session(app)
    spark.conf.set("spark.sql.session.timeZone", "UTC")
    q = start(
        spark,
        p.bootstrap,
        *topics,
        p.checkpoint,
        p.available_now,
        p.kafka_options,
        p.kafka_options,
        p.format,
    )
    q.awaitTermination()
