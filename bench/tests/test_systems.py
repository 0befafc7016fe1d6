"""Each system under test starts, takes every workload in miniature, and stops cleanly.

Nothing here is timed: the figures are `make bench`'s business. What is checked is what a
benchmark run relies on: every message written is read back, the latency consumer sees every
stamped message, a write succeeds again after the leader is killed, and the servers exit 0 and
free their ports.
"""

from __future__ import annotations

import pytest

from bench import perf_tools
from bench.kafka_system import ApacheKafkaCluster
from bench.nats_system import NatsJetStream
from bench.procs import port_open
from bench.redis_system import RedisStreams
from bench.samsa_system import SamsaStandalone
from bench.system import System
from bench.workloads import (
    PARTITIONS,
    STREAM,
    measure_failover,
    measure_latency,
    measure_throughput,
)

COUNT = 2_000


def _ports(system: System) -> list[int]:
    return [int(hp.rsplit(":", 1)[1]) for hp in system.endpoint.split(",")]


@pytest.mark.parametrize(
    "system_class", [SamsaStandalone, ApacheKafkaCluster, NatsJetStream, RedisStreams]
)
def test_system_takes_each_workload_and_stops_cleanly(system_class: type[System]) -> None:
    system = system_class()
    with system:
        system.create_stream(STREAM, PARTITIONS)
        written = measure_throughput(system, "produce", STREAM, 100, COUNT)
        assert written["errors"] == 0
        read = measure_throughput(system, "consume", STREAM, 100, COUNT)
        assert read["errors"] == 0, f"{read['errors']} of {COUNT} messages not read back"

        latency, cdf = measure_latency(system, "bench-latency", 100, rate=2_000, seconds=0.5)
        assert latency["received"] == 1_000
        assert latency["p50_ms"] is not None and cdf == sorted(cdf)

        if system.kafka_protocol:
            system.create_stream("bench-perf-test", PARTITIONS)
            sent = perf_tools.produce(system.endpoint, "bench-perf-test", COUNT, 100)
            assert sent["count"] == COUNT and sent["p99_ms"] is not None
            got = perf_tools.consume(system.endpoint, "bench-perf-test", COUNT)
            assert got["count"] == COUNT, f"kafka-consumer-perf-test read {got['count']}"

        recovered = measure_failover(system)
        assert recovered["recovery_s"] is not None, "no write succeeded after the leader died"

        ports = _ports(system)
        codes = system.stop()
    assert codes and all(code == 0 for code in codes), (
        f"unclean exits: {codes}\n{getattr(system, 'stop_report', '')}"
    )
    assert not any(port_open(p) for p in ports)
    assert not system.workdir.exists()
