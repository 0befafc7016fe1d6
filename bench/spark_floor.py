"""The floor of Spark's Python data source path, for the read benchmark: a source that does no
I/O and no decoding, and yields Arrow batches made once, of the samsa source's schema and of the
same rows (a short key, a 100-byte value, the topic, partition, offset and timestamp columns).

Whatever a Python data source does, Spark still moves its batches from the Python worker into
the JVM and turns them into rows; the time this source takes to read N rows is that cost alone,
the most a Python source can reach on the machine, batch and streaming (availableNow).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pyarrow as pa
from pyspark import cloudpickle
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    InputPartition,
)
from pyspark.sql.streaming.datasource import SupportsTriggerAvailableNow

from samsa_spark.schema import arrow_schema, source_ddl

NAME = "samsa-bench-floor"
_BATCH_ROWS = 62_500  # about what one 8 MB Fetch response decodes into


def ready_batch(rows: int, size: int, topic: str) -> pa.RecordBatch:
    """`rows` rows of the source's schema: keys "0".., values of `size` bytes."""
    columns = [
        pa.array([str(i).encode() for i in range(rows)], pa.binary()),
        pa.array([b"x" * size] * rows, pa.binary()),
        pa.array([topic] * rows, pa.string()),
        pa.array(np.zeros(rows, np.int32)),
        pa.array(np.arange(rows, dtype=np.int64)),
        pa.array(np.arange(rows, dtype=np.int64) * 1000, pa.timestamp("us", tz="UTC")),
        pa.array(np.zeros(rows, np.int32)),
    ]
    return pa.RecordBatch.from_arrays(columns, schema=arrow_schema(False))


def _yield_rows(rows: int, size: int, topic: str) -> Iterator[pa.RecordBatch]:
    batch = ready_batch(min(rows, _BATCH_ROWS), size, topic)
    left = rows
    while left > 0:
        yield batch if left >= batch.num_rows else batch.slice(0, left)
        left -= batch.num_rows


def _split(total: int, parts: int) -> list[InputPartition]:
    return [InputPartition(total // parts + (1 if i < total % parts else 0)) for i in range(parts)]


class _Reader(DataSourceReader):
    def __init__(self, options: dict[str, str]) -> None:
        self.rows = int(options["rows"])
        self.parts = int(options.get("partitions", "6"))
        self.size = int(options.get("size", "100"))
        self.topic = options.get("topic", "spark-read")

    def partitions(self) -> list[InputPartition]:
        return _split(self.rows, self.parts)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return _yield_rows(partition.value, self.size, self.topic)


class _StreamReader(_Reader, DataSourceStreamReader, SupportsTriggerAvailableNow):
    """All `rows` rows are there from the start: an availableNow query reads them in one
    micro-batch, as it does a topic's backlog."""

    def initialOffset(self) -> dict:
        return {"rows": 0}

    def latestOffset(self, start: dict, limit: Any) -> dict:
        return {"rows": self.rows}

    def prepareForTriggerAvailableNow(self) -> None:
        return None

    # Spark's stream reader plans by offsets, its batch reader (the base here) without them.
    def partitions(self, start: dict, end: dict) -> list[InputPartition]:  # type: ignore[override]
        return _split(end["rows"] - start["rows"], self.parts)

    def commit(self, end: dict) -> None:
        return None


class FloorSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return NAME

    def schema(self) -> str:
        return source_ddl(False)

    def reader(self, schema: Any) -> DataSourceReader:
        return _Reader(dict(self.options))

    def streamReader(self, schema: Any) -> DataSourceStreamReader:
        return _StreamReader(dict(self.options))


def register(spark: Any) -> None:
    import sys

    # By value: Spark's Python workers need not find the bench package on their path.
    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    spark.dataSource.register(FloorSource)
