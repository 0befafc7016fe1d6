"""A local[2] SparkSession with the samsa format registered, for the demo, tests and benchmarks:
loopback only, this interpreter for the Python workers, UTC, few shuffle partitions, and any
extra jars (Spark's own Kafka connector: ``samsa_dev.jars.files("spark-kafka")``)."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable
from os import PathLike
from typing import Any


def local_spark(app: str, jars: Iterable[str | PathLike[str]] = (), **conf: str) -> Any:
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    import samsa_spark
    from samsa_spark import encode, records

    # The Python workers start on this machine: let them find the decoder and encoder compiled.
    records.warm()
    encode.warm()
    builder = (
        SparkSession.builder.master("local[2]")
        .appName(app)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
    )
    jar_list = ",".join(str(j) for j in jars)
    if jar_list:
        builder = builder.config("spark.jars", jar_list)
    for key, value in conf.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    samsa_spark.register(spark)
    return spark
