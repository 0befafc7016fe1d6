"""Spark's discovery hook: Spark imports every top-level ``pyspark_*`` module it finds and
registers its ``DefaultSource``, so ``format("samsa")`` needs no register call."""

from samsa_spark.source import SamsaDataSource as DefaultSource

__all__ = ["DefaultSource"]
