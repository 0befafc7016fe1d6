"""Kafka's perf tools' summaries, as Kafka 4.3 prints them, parsed into the harness's figures;
output without a summary is an error that shows the output."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from bench.perf_tools import PerfToolFailed, parse_consumer, parse_producer

PRODUCER = """\
Option --producer-props has been deprecated and will be removed in a future version.
20000 records sent, 6844.626968 records/sec (0.65 MB/sec), 369.15 ms avg latency, \
1934.00 ms max latency, 388 ms 50th, 480 ms 95th, 503 ms 99th, 503 ms 99.9th.
"""

CONSUMER = """\
start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, \
rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec
2026-11-25 13:13:06:692, 2026-11-25 13:13:13:408, 1.9073, 0.2840, 20000, 2977.9631, 5765, \
951, 2.0056, 21030.4942
"""


def test_producer_summary() -> None:
    got = parse_producer(PRODUCER)
    assert got["count"] == 20000
    assert got["msgs_per_s"] == pytest.approx(6844.63, abs=0.01)
    assert got["mb_per_s"] == pytest.approx(0.65 * 1.048576)
    assert (got["p50_ms"], got["p99_ms"], got["p999_ms"], got["max_ms"]) == (388, 503, 503, 1934)


def test_consumer_summary_is_over_the_fetch_time() -> None:
    got = parse_consumer(CONSUMER)
    assert got["count"] == 20000
    # 20,000 records in 951 ms of fetching: the group's 5.8 s first rebalance is left out
    assert got["msgs_per_s"] == pytest.approx(21030.49, abs=0.01)
    assert got["rebalance_ms"] == 5765


@pytest.mark.parametrize("parse", [parse_producer, parse_consumer])
def test_output_without_summary_is_an_error_that_shows_it(
    parse: Callable[[str], dict[str, float | None]],
) -> None:
    with pytest.raises(PerfToolFailed, match="Connection refused"):
        parse("ERROR Connection refused\n")
