"""docs/benchmarks.md, regenerated from a run: the machine's facts, the systems and their
clients, the tables, the plots, and how to reproduce it all."""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
import time
from collections.abc import Callable
from importlib.metadata import version
from pathlib import Path

from bench import plots
from bench.report import ceiling_rows, comparison, markdown_table
from bench.results import RunResult
from samsa_dev.kafka import java, kafka_version

ASSETS = "benchmarks"  # folder beside benchmarks.md: the plots and the raw results


def _first_line(cmd: list[str]) -> str:
    if shutil.which(cmd[0]) is None:
        return "not installed"
    out = subprocess.run(cmd, capture_output=True, text=True, check=False)
    return (out.stdout or out.stderr).strip().splitlines()[0] if (out.stdout or out.stderr) else ""


def _java_version() -> str:
    # `java -version` writes to stderr, e.g. 'openjdk version "17.0.16" 2025-07-15'
    line = _first_line([java(), "-version"])
    return line.split('"')[1] if line.count('"') >= 2 else line


def cpu_busy() -> tuple[float, float]:
    """(busy, total) jiffies of all CPUs since boot, from /proc/stat."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = fields[3] + fields[4]
    return float(sum(fields) - idle), float(sum(fields))


def load_average() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def settle(
    within: float = 180.0,
    below: float = 0.5,
    every: float = 5.0,
    load: Callable[[], float] = lambda: float(load_average().split()[0]),
    sleep: Callable[[float], None] = time.sleep,
    now: Callable[[], float] = time.monotonic,
) -> float:
    """Wait up to `within` seconds for the 1-minute load average to fall below `below`, and
    return it. The average trails the machine by about a minute, so a run begun just after
    other work ended read as shared (the caveat below) when nothing else ran with it."""
    deadline = now() + within
    current = load()
    while current >= below and now() < deadline:
        sleep(every)
        current = load()
    return current


def machine_facts() -> dict[str, str]:
    import confluent_kafka

    cpu = "unknown"
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            cpu = line.split(":", 1)[1].strip()
            break
    mem_kb = int(Path("/proc/meminfo").read_text().split()[1])
    return {
        "CPU": f"{cpu}, {os.cpu_count()} cores",
        "memory": f"{mem_kb / 1024 / 1024:.1f} GiB",
        "kernel": platform.release(),
        "Python": platform.python_version(),
        "librdkafka / confluent-kafka": f"{confluent_kafka.libversion()[0]} / "
        f"{version('confluent-kafka')}",
        "nats-server": _first_line(["nats-server", "--version"]),
        "nats-py": version("nats-py"),
        "redis-server": " ".join(
            w for w in _first_line(["redis-server", "--version"]).split() if w.startswith("v=")
        ),
        "redis-py / hiredis": f"{version('redis')} / {version('hiredis')}",
        "Apache Kafka / Java": f"{kafka_version()} / {_java_version()}",
        "load average at start": load_average(),
    }


REPRODUCE = """\
```sh
make setup          # apt: nats-server, redis-server (and zookeeper, kcat, a JRE); uv sync;
                    # Apache Kafka's jars from Maven Central
make bench          # the full run: {reps} repetitions, rewrites docs/benchmarks.md and its plots
make bench-quick    # one small repetition, no acks=1 or half-peak steps, tables only
uv run python -m bench --help   # --systems, --sizes, --reps, --samsa standalone|cluster|auto
uv run python -m bench --from-json docs/benchmarks/results.json --docs docs  # re-render only
```"""

METHOD = """\
Workloads, after the OpenMessaging Benchmark, one topic or stream, 6 partitions where that
applies (Samsa and Kafka; a JetStream stream and a Redis stream are not partitioned), {sizes}:

- **produce**: maximum producer throughput, {backlog} messages written as fast as the client
  goes (Samsa and Kafka with acks=all; NATS publishes wait for the stream's quorum ack; Redis
  acknowledges XADD from memory, its AOF fsync'd every second);
- **consume backlog**: those messages read from the start of the stream;
- **produce acks=1** (Samsa and Kafka): the same with acks=1;
- **e2e latency, half peak**: a producer paced at half of the system's own peak from the
  produce step (1 ms ticks; the messages of a tick carry its send time, CLOCK_MONOTONIC), a
  consumer reading as they arrive, for {secs:g} s; the first 20 % of messages are warm-up,
  not counted. A producer that falls behind sends late and stamps late, so, as in OMB,
  its own stalls are not counted as latency;
- **e2e latency, fixed rate**: the same at one rate for every system, {fixed}
  (below every system's half peak here), because half of a peak measured with two processes
  on two cores can already saturate them once a third, the consumer, runs;
- **failover**: a probe writes one message at a time; the harness SIGKILLs the server leading
  the stream (Samsa and Kafka: the leader of partition 0); the figure is the time from the
  kill until a write issued after it is acknowledged. A system with no replica to take over
  is restarted at once by the harness (the table says *restart*): its figure is restart plus
  recovery;
- **kafka-producer-perf-test** and **kafka-consumer-perf-test** (Samsa and Kafka): Kafka's own
  load generators, the Java client, {backlog} records with acks=all into a new topic and read
  back, so that the comparison does not rest on our harness alone. The producer is given the
  harness's batching (linger.ms=5, batch.size 1 MB); its latency is the tool's
  send-to-acknowledgement time, which includes the wait in the producer's queue while it runs
  flat out. The consumer's rate is over its fetch time, its group join left out.

Every system is started afresh by the harness on 127.0.0.1 for each size and repetition,
and stopped afterwards; repetitions interleave the systems so that noise from the machine
falls on all of them alike. Each load generator is its own process (`bench/clients/`), and
each figure in the tables is the median of {reps} repetitions."""

CLIENTS = """\
| system | deployment | recovery | load generator |
|---|---|---|---|
{rows}

Why these clients:

- **Samsa and Apache Kafka**: the same load generator, librdkafka through confluent-kafka,
  the fastest Kafka client in Python: batches
  of up to 1 MB with linger.ms=5 for throughput (linger.ms=1 for latency, as OMB's Kafka
  driver), a consumer with `fetch.queue.backoff.ms=0` that takes whatever has arrived. Kafka
  runs in Samsa's topology: 3 KRaft nodes, each broker and controller, with its defaults
  except segments of 512 MB (as Samsa's here) and a broker session timeout of 6 s (Samsa's
  ZooKeeper session here), each JVM with a 1 GB heap and G1.
- **NATS JetStream**: nats-py on asyncio. Publishes are pipelined with a window of 8,192
  unacknowledged messages, their acks counted on one reply subject (what nats.go's
  PublishAsync does; nats-py's own `publish_async` makes a future per message and is slower).
  The consumer is a push consumer, AckNone, with flow control: the fastest way JetStream
  hands out a stream. The `nats` CLI with `nats bench` (Go) is not packaged in Debian, PyPI
  or npm, so it cannot be installed here; the Node client (npm `nats`) could be, but on
  produce the three nats-server processes burn more CPU per MB than the client does (compare
  the server and client CPU rows): with two cores, a faster client would free little.
- **Redis Streams**: redis-py's connection with the hiredis parser, XADD in pre-encoded
  pipelines of 1,000, the next pipeline sent before the last one's replies are read, and
  XREADGROUP with COUNT 10,000 and NOACK, two requests in flight. redis-server is single
  threaded and close to a full core during produce (server CPU ms/MB times MB/s), so
  `redis-benchmark` (C) would not go much faster.

CPU rows: server CPU is the user+system time of the server processes from /proc; client CPU
is the load generator's whole process, start-up included (about half a second of it)."""


def _ceiling_spread(run: RunResult) -> str:
    loopback = run.ceilings().get("loopback TCP", [])
    if len(loopback) < 2:
        return ""
    return (
        f" Between repetitions the loopback TCP ceiling alone ranged from {min(loopback):,.0f} "
        f"to {max(loopback):,.0f} MB/s."
    )


def write(run: RunResult, docs_dir: Path) -> Path:
    assets = docs_dir / ASSETS
    assets.mkdir(parents=True, exist_ok=True)
    run.save(assets / "results.json")
    plots.throughput_bars(run, assets / "throughput.png")
    plots.latency_cdfs(run, assets / "latency-cdf.png")
    header, rows = comparison(run)
    c_header, c_rows = ceiling_rows(run)
    systems = "\n".join(
        f"| {s.name} | {s.topology} | {s.recovery} | {s.client} |" for s in run.systems
    )
    facts = "\n".join(f"| {k} | {v} |" for k, v in run.machine.items())
    sizes = " and ".join(f"{s} B" for s in run.sizes)
    backlogs = sorted(set(run.backlog.values()))
    backlog = " / ".join(f"{b:,}" for b in backlogs)
    standalone = any(s.key == "samsa" and s.recovery == "restart" for s in run.systems)
    caveats = [
        "Redis is a single node: it has no replica, so it replicates nothing and its "
        "failover is a restart that replays its append-only file.",
    ]
    if standalone:
        caveats.insert(
            0,
            "**Samsa ran as one standalone broker (RF=1)**, not the 3-broker RF=3 cluster: "
            "`samsa local up` was not available in this build. Its rows are therefore not "
            "replicated (acks=all equals acks=1 with one replica) and its failover is a "
            "restart. The harness switches to the cluster by itself once the command exists.",
        )
    caveats.append(
        "All servers and clients share the same 2 cores; every figure includes the client's "
        "own cost, and a peak is a peak of the whole machine, not of the server alone."
    )
    load = run.machine.get("load average at start", "")
    if load and float(load.split()[0]) >= 0.5:
        caveats.append(
            f"Other work shared this machine during the run (load average {load} at start, "
            f"{run.machine.get('load average at end', '?')} at the end; CPU busy "
            f"{run.machine.get('CPU busy during the run (all processes)', '?')} over the run, "
            "everything included): figures are noisy, the medians damp that but do not "
            "remove it." + _ceiling_spread(run)
        )
    mode = "quick mode, 1 small repetition" if run.quick else f"{run.reps} repetitions"
    method = METHOD.format(
        sizes=sizes,
        backlog=backlog,
        secs=run.latency_seconds,
        fixed=" and ".join(
            f"{rate:,.0f} msg/s for {size} B" for size, rate in run.fixed_rates.items()
        ),
        reps=run.reps,
    )
    text = f"""# Benchmarks: Samsa beside Apache Kafka, NATS JetStream and Redis Streams

Generated by `make bench` ({mode}); do not edit by hand.

{chr(10).join(f"- {c}" for c in caveats)}

## Results

Each figure is a median over the repetitions. Ratios are Samsa's figure over the peer's:
above 1 is better for Samsa in msg/s and MB/s, worse in latency, CPU and recovery time.

{markdown_table(header, rows)}

![throughput](benchmarks/throughput.png)

![latency CDFs](benchmarks/latency-cdf.png)

### The machine's ceilings, and Samsa as a fraction of them

Measured in the same run, before each repetition (median, and the spread, which shows how
busy the machine was): one TCP stream over loopback, and 1 MB sequential writes to a file (to
the page cache, and then with an fsync at the end). Samsa's fraction is of payload bytes; a
replicated cluster moves each byte more than once.

{markdown_table(c_header, c_rows)}

## Systems and clients

{CLIENTS.format(rows=systems)}

## Method

{method}

Raw samples, every repetition: [benchmarks/results.json](benchmarks/results.json).

## Machine

| fact | value |
|---|---|
{facts}

## Reproduce

{REPRODUCE.format(reps=run.reps)}
"""
    out = docs_dir / "benchmarks.md"
    out.write_text(text)
    return out
