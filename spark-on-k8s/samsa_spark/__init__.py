"""PySpark data source and sink for Samsa topics (and any Kafka-protocol broker).

    import samsa_spark
    samsa_spark.register(spark)
    df = spark.read.format("samsa").option("kafka.bootstrap.servers", "...").option(
        "subscribe", "clicks").load()

The package also installs the module ``pyspark_samsa``, which Spark discovers by itself, so the
format "samsa" works without the register call wherever the package is installed.
"""

from __future__ import annotations

from typing import Any

from samsa_spark.source import SamsaDataSource

__all__ = ["SamsaDataSource", "register"]


def register(spark: Any) -> None:
    """Register the "samsa" format with a SparkSession."""
    spark.dataSource.register(SamsaDataSource)
