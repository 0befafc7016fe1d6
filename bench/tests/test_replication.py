"""The replication benchmark's rows: Samsa's beside Kafka's of the same case."""

from __future__ import annotations

from bench.replication import KAFKA, NAMES, _compared
from bench.table import Row


def test_samsa_rows_carry_their_ratio_to_kafkas_row_of_the_same_case() -> None:
    samsa = [
        Row("e2e RF=3 acks=all", NAMES["samsa"], p50_ms=9.0, p99_ms=16.0, note="target"),
        Row("peak produce RF=3 acks=all", NAMES["samsa"], msgs_per_s=600_000),
        Row("  stage high_watermark", "RF=3 acks=all", p50_ms=5.0),
        Row("e2e RF=1 acks=1", NAMES["samsa"], p50_ms=1.5, p99_ms=2.5),
    ]
    kafka = [
        Row("e2e RF=3 acks=all", KAFKA, p50_ms=3.0, p99_ms=4.0),
        Row("peak produce RF=3 acks=all", KAFKA, msgs_per_s=300_000),
        Row("e2e RF=1 acks=1", KAFKA, p50_ms=None, p99_ms=None),
    ]
    _compared(samsa, kafka)
    assert [row.note for row in samsa] == [
        "target; Samsa/Kafka p50 3x, p99 4x",
        "Samsa/Kafka msg/s 2x",
        "",
        "",
    ]


def test_no_ratio_when_kafka_did_not_run() -> None:
    samsa = [Row("e2e RF=3 acks=all", NAMES["samsa"], p50_ms=9.0, p99_ms=16.0)]
    _compared(samsa, [Row("Apache Kafka", KAFKA, note="not run: java is not installed")])
    assert samsa[0].note == ""
