"""Kafka's own load generators, kafka-producer-perf-test and kafka-consumer-perf-test (the Java
client), run against any Kafka-protocol system: a check on our librdkafka harness that does not
rest on it. Their summary lines are parsed into the harness's figures."""

from __future__ import annotations

import re
import subprocess

from samsa_dev.kafka import tool_command

_PRODUCED = re.compile(
    r"(?P<count>\d+) records sent, (?P<rate>[\d.]+) records/sec \((?P<mb>[\d.]+) MB/sec\), "
    r"(?P<avg>[\d.]+) ms avg latency, (?P<max>[\d.]+) ms max latency, (?P<p50>\d+) ms 50th, "
    r"(?P<p95>\d+) ms 95th, (?P<p99>\d+) ms 99th, (?P<p999>\d+) ms 99.9th"
)
CONSUMER_HEADER = "start.time, end.time, data.consumed.in.MB"


class PerfToolFailed(RuntimeError):
    """A perf tool exited non-zero or printed no summary."""


def parse_producer(output: str) -> dict[str, float | None]:
    """The last summary line: throughput, and send-to-acknowledgement latency percentiles."""
    found = list(_PRODUCED.finditer(output))
    if not found:
        raise PerfToolFailed(f"no summary in kafka-producer-perf-test's output:\n{output[-2000:]}")
    m = found[-1]
    return {
        "count": float(m["count"]),
        "msgs_per_s": float(m["rate"]),
        # the tool's MB is MiB; the harness's is 10^6 bytes
        "mb_per_s": float(m["mb"]) * (1 << 20) / 1e6,
        "p50_ms": float(m["p50"]),
        "p99_ms": float(m["p99"]),
        "p999_ms": float(m["p999"]),
        "max_ms": float(m["max"]),
    }


def parse_consumer(output: str) -> dict[str, float | None]:
    """The CSV line under the header: records and MB a second over the whole run, and over the
    fetch time alone (the run less the group's first rebalance)."""
    lines = [line.strip() for line in output.splitlines()]
    try:
        at = next(i for i, line in enumerate(lines) if line.startswith(CONSUMER_HEADER))
        names = [n.strip() for n in lines[at].split(",")]
        values = dict(zip(names, (v.strip() for v in lines[at + 1].split(",")), strict=True))
        count = float(values["data.consumed.in.nMsg"])
        fetch_ms = float(values["fetch.time.ms"])
        mb = float(values["data.consumed.in.MB"]) * (1 << 20) / 1e6
    except (StopIteration, IndexError, KeyError, ValueError) as exc:
        raise PerfToolFailed(
            f"no summary in kafka-consumer-perf-test's output ({exc}):\n{output[-2000:]}"
        ) from exc
    return {
        "count": count,
        "msgs_per_s": count / (fetch_ms / 1000) if fetch_ms > 0 else None,
        "mb_per_s": mb / (fetch_ms / 1000) if fetch_ms > 0 else None,
        "rebalance_ms": float(values["rebalance.time.ms"]),
    }


def _run(tool: str, args: list[str], timeout: float) -> str:
    res = subprocess.run(
        tool_command(tool, args, heap="1g"),
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    if res.returncode != 0:
        raise PerfToolFailed(f"{tool} exited {res.returncode}:\n{res.stderr[-2000:]}")
    return res.stdout


def _flags(pairs: list[tuple[str, str]]) -> list[str]:
    return [word for pair in pairs for word in pair]


def produce(
    bootstrap: str, topic: str, count: int, size: int, acks: str = "all", timeout: float = 900
) -> dict[str, float | None]:
    # Kafka's defaults (16 KB batches) would measure the defaults, not the broker: the same
    # batching as the librdkafka harness.
    args = [
        ("--bootstrap-server", bootstrap),
        ("--topic", topic),
        ("--num-records", str(count)),
        ("--record-size", str(size)),
        ("--throughput", "-1"),
        ("--command-property", f"acks={acks}"),
        ("--command-property", "linger.ms=5"),
        ("--command-property", "batch.size=1000000"),
        ("--command-property", "max.request.size=4194304"),
        ("--reporting-interval", "600000"),
    ]
    return parse_producer(_run("kafka-producer-perf-test", _flags(args), timeout))


def consume(
    bootstrap: str, topic: str, count: int, timeout: float = 900
) -> dict[str, float | None]:
    args = [
        ("--bootstrap-server", bootstrap),
        ("--topic", topic),
        ("--num-records", str(count)),
        ("--timeout", "60000"),
        ("--command-property", "max.partition.fetch.bytes=10485760"),
        ("--command-property", "fetch.max.bytes=52428800"),
    ]
    return parse_consumer(_run("kafka-consumer-perf-test", _flags(args), timeout))
