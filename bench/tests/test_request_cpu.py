"""The request CPU benchmark's arithmetic: request counts from /metrics, and median rows."""

from __future__ import annotations

from bench.request_cpu import Measured, request_counts, rows_of

METRICS = """# HELP kafka_network_request_metrics_requests_total Requests handled
kafka_network_request_metrics_requests_total{request="Produce"} 100.0
kafka_network_request_metrics_requests_total{request="FetchFollower"} 200.0
kafka_network_request_metrics_requests_total{request="Metadata"} 3.0
kafka_server_broker_topic_metrics_messages_in_total{topic="t"} 100.0
"""


def test_request_counts_are_summed_over_brokers_by_kind() -> None:
    assert request_counts([METRICS, METRICS]) == {
        "Produce": 200.0,
        "FetchFollower": 400.0,
        "Metadata": 6.0,
    }


def test_rows_take_the_median_of_the_runs_and_say_the_cost_per_request() -> None:
    def runs(cores: float) -> dict[tuple[str, int], Measured]:
        per_s = {"Produce": 200.0, "FetchFollower": 400.0, "FetchConsumer": 200.0, "Metadata": 0}
        return {
            (label, rate): Measured(cores, 1.0, 2.0, per_s)
            for label in ("RF=3 acks=all", "RF=1 acks=1")
            for rate in (200, 1_000, 10_000)
        }

    rows = rows_of([runs(0.8), runs(0.4), runs(5.0)], floor_us=40.0)
    first = rows[0]
    assert first.workload == "RF=3 acks=all, 200 msg/s"
    assert first.extra["cores"] == 0.8
    # 0.8 cores over 800 requests/s: 1,000 µs each, 25 times the floor.
    assert first.extra["cpu_us_per_request"] == 1000.0
    assert "(aim 0.1)" in first.note and "25x the floor" in first.note
    assert "aim" not in rows[3].note  # RF=1 rows have no aim
