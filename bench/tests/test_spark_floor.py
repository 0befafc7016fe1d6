"""The floor source of the Spark read benchmark yields the samsa source's rows: its schema, the
asked number of rows split over the partitions, keys and values as the benchmark's topic has."""

from __future__ import annotations

import pytest

from bench.spark_floor import _split, _yield_rows, ready_batch
from samsa_spark.schema import arrow_schema


def test_a_ready_batch_has_the_source_schema_and_the_topic_rows() -> None:
    b = ready_batch(1000, 100, "spark-read")
    assert b.schema == arrow_schema(False)
    b.validate(full=True)
    assert b.column("key")[123].as_py() == b"123"
    assert {len(v) for v in b.column("value").to_pylist()} == {100}
    assert set(b.column("topic").to_pylist()) == {"spark-read"}


@pytest.mark.parametrize("rows", [0, 1, 62_499, 62_500, 62_501, 500_000])
def test_a_partition_yields_exactly_its_rows(rows: int) -> None:
    assert sum(b.num_rows for b in _yield_rows(rows, 100, "t")) == rows


def test_the_rows_split_over_the_partitions_add_up() -> None:
    parts = _split(3_000_001, 6)
    assert len(parts) == 6
    assert sum(p.value for p in parts) == 3_000_001
    assert max(p.value for p in parts) - min(p.value for p in parts) <= 1
