"""The workloads, after the OpenMessaging Benchmark, run the same way against every system.

For each message size and repetition, each system is started afresh and given, in order:
  1. maximum producer throughput: BACKLOG messages into one stream (6 partitions for Samsa);
  2. consumer throughput: that backlog read from the start;
  3. (Kafka-protocol systems) producer throughput again with acks=1 (not in quick runs);
  4. end-to-end latency at half the peak of step 1 (not in quick runs), on a new stream,
     and again at one fixed rate per size for all systems (half of a peak measured on 2
     shared cores can already saturate them);
  5. (Kafka-protocol systems) Kafka's own kafka-producer-perf-test, acks=all, BACKLOG records
     into a new stream, then kafka-consumer-perf-test reading them back: the Java client as a
     second opinion on our librdkafka harness;
  6. failover: the leader of the first stream killed, time until a write succeeds again
     (quick runs: for the first size only).
The machine's ceilings are measured before each repetition.
Load generators run as separate processes (`bench.clients`); the harness only starts, times
and stops.
"""

from __future__ import annotations

import json
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from bench import perf_tools
from bench.clients.common import now_ns
from bench.results import (
    CONSUME,
    FAILOVER,
    LATENCY,
    LATENCY_FIXED,
    MACHINE,
    PERF_CONSUME,
    PERF_PRODUCE,
    PRODUCE,
    PRODUCE_ACKS1,
    Sample,
)
from bench.system import System

PARTITIONS = 6
STREAM = "bench"
LATENCY_STREAM = "bench-latency"
FIXED_STREAM = "bench-latency-fixed"
ACKS1_STREAM = "bench-acks1"
PERF_STREAM = "bench-perf-test"


@dataclass
class Plan:
    sizes: tuple[int, ...]
    reps: int
    backlog: dict[int, int]
    latency_seconds: float
    #: per size, one rate for every system: below each one's half peak here
    fixed_rates: dict[int, float] = field(default_factory=lambda: {100: 10_000, 1024: 2_000})
    failover: bool = True
    #: measure failover for the first message size only (it hardly depends on it)
    failover_once: bool = False
    #: the steps a quick run leaves out: Samsa's acks=1 produce, latency at half peak
    acks1: bool = True
    half_peak_latency: bool = True
    #: Kafka's perf tools on the Kafka-protocol systems
    perf_tools: bool = True


FULL = Plan(
    sizes=(100, 1024), reps=3, backlog={100: 1_000_000, 1024: 1_000_000}, latency_seconds=10
)
QUICK = Plan(
    sizes=(100, 1024),
    reps=1,
    backlog={100: 50_000, 1024: 20_000},
    latency_seconds=1.5,
    failover_once=True,
    acks1=False,
    half_peak_latency=False,
)


class ClientProc:
    """One load generator process; its JSON lines read on the side, each wait bounded."""

    def __init__(self, system: str, mode: str, *args: str, stdin: bool = False) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "bench.clients", system, mode, *args],
            stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.lines: queue.Queue[dict | None] = queue.Queue()
        self.errors: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=self._read_errors, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.startswith("{"):
                self.lines.put(json.loads(line))
        self.lines.put(None)

    def _read_errors(self) -> None:
        assert self.proc.stderr is not None
        self.errors.extend(self.proc.stderr)

    def next(self, timeout: float) -> dict:
        try:
            line = self.lines.get(timeout=timeout)
        except queue.Empty:
            self.proc.kill()
            raise TimeoutError(f"load generator silent for {timeout}s") from None
        if line is None:
            self.proc.wait(10)
            tail = "".join(self.errors[-30:])
            raise RuntimeError(f"load generator exited {self.proc.returncode}:\n{tail}")
        return line

    def result(self, timeout: float) -> dict:
        line = self.next(timeout)
        while line.get("ready"):
            line = self.next(timeout)
        self.proc.wait(30)
        return line

    def send(self, text: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(text + "\n")
        self.proc.stdin.flush()


def client(system: System, mode: str, **opts: object) -> dict:
    return ClientProc(system.key, mode, *_args(system, opts)).result(900)


def _args(system: LoadTarget, opts: dict[str, object]) -> list[str]:
    args = ["--endpoint", system.endpoint]
    for key, value in opts.items():
        if isinstance(value, bool):  # the load generators' switches (store_true)
            args += [f"--{key}"] if value else []
        else:
            args += [f"--{key}", str(value)]
    return args


def _throughput(res: dict, size: int, cpu_s: float) -> dict[str, float | None]:
    count, seconds = res["count"], res["seconds"]
    mb = count * size / 1e6
    return {
        "msgs_per_s": count / seconds,
        "mb_per_s": mb / seconds,
        "server_cpu_ms_per_mb": cpu_s * 1000 / mb if mb else None,
        "client_cpu_s": res.get("client_cpu_s"),
        # the load generator's whole life, its start-up included
        "client_cpu_ms_per_mb": res["client_cpu_s"] * 1000 / mb if mb else None,
        "errors": res.get("errors", 0),
    }


def measure_throughput(
    system: System, mode: str, stream: str, size: int, count: int, **opts: object
) -> dict[str, float | None]:
    cpu0 = system.cpu_seconds()
    res = client(system, mode, stream=stream, count=count, size=size, **opts)
    return _throughput(res, size, system.cpu_seconds() - cpu0)


class LoadTarget(Protocol):
    """What the load generators need of a system: its client key and endpoint, and streams."""

    @property
    def key(self) -> str: ...

    @property
    def endpoint(self) -> str: ...

    def create_stream(self, name: str, partitions: int) -> None: ...


def measure_latency(
    system: LoadTarget,
    stream: str,
    size: int,
    rate: float,
    seconds: float,
    create: bool = True,
    **producer_opts: object,
) -> tuple[dict, list]:
    """End-to-end latency at `rate` msg/s; `create=False` for a stream made by the caller."""
    if create:
        system.create_stream(stream, PARTITIONS)
    expect = int(rate * seconds)
    consumer = ClientProc(
        system.key, "e2e-consume", *_args(system, {"stream": stream, "count": expect})
    )
    opts = {"stream": stream, "rate": rate, "seconds": seconds, "size": size, **producer_opts}
    producer = ClientProc(system.key, "e2e-produce", *_args(system, opts), stdin=True)
    consumer.next(60)  # ready: connected and reading
    producer.next(60)  # ready: waiting for the word
    producer.send("go")
    produced = producer.result(seconds + 300)
    res = consumer.result(seconds + 120)
    values = {k: res.get(k) for k in ("p50_ms", "p99_ms", "p999_ms", "max_ms")}
    values["target_rate"] = rate
    values["rate"] = produced["sent"] / seconds
    values["received"] = res.get("seen")
    return values, res.get("cdf", [])


def measure_failover(
    system: System, stop: Callable[[System], None] | None = None
) -> dict[str, float | None]:
    """``stop`` (default: kill -9 of the leader) is timed until a write after it succeeds."""
    probe = ClientProc(system.key, "probe", *_args(system, {"stream": STREAM}), stdin=True)
    probe.next(60)  # ready: writes succeed
    killed_at = now_ns()
    if stop is None:
        system.kill_leader(STREAM)
    else:
        stop(system)
    probe.send(str(killed_at))
    res = probe.result(180)
    return {"recovery_s": res.get("recovery_s"), "failed_writes": res.get("failures")}


def run_one(
    system: System, size: int, rep: int, plan: Plan, log: Callable[[str], None]
) -> list[Sample]:
    """Every workload on one freshly started system, for one message size."""
    count = plan.backlog[size]
    samples = []

    def add(workload: str, values: dict, cdf: list | None = None) -> None:
        samples.append(Sample(system.key, workload, size, rep, values, cdf or []))
        shown = {k: round(v, 3) for k, v in values.items() if isinstance(v, float)}
        log(f"  {system.key:6} {size:5} B rep {rep}  {workload:16} {shown}")

    system.create_stream(STREAM, PARTITIONS)
    produce_opts = {"acks": "all"} if system.kafka_protocol else {}
    add(PRODUCE, measure_throughput(system, "produce", STREAM, size, count, **produce_opts))
    add(CONSUME, measure_throughput(system, "consume", STREAM, size, count))
    if system.kafka_protocol and plan.acks1:
        system.create_stream(ACKS1_STREAM, PARTITIONS)
        add(PRODUCE_ACKS1, measure_throughput(system, "produce", ACKS1_STREAM, size, count, acks=1))
    peak = samples[0].values["msgs_per_s"] or 1.0
    if plan.half_peak_latency:
        add(
            LATENCY,
            *measure_latency(system, LATENCY_STREAM, size, peak / 2, plan.latency_seconds),
        )
    add(
        LATENCY_FIXED,
        *measure_latency(system, FIXED_STREAM, size, plan.fixed_rates[size], plan.latency_seconds),
    )
    if system.kafka_protocol and plan.perf_tools:
        system.create_stream(PERF_STREAM, PARTITIONS)
        add(PERF_PRODUCE, perf_tools.produce(system.endpoint, PERF_STREAM, count, size))
        add(PERF_CONSUME, perf_tools.consume(system.endpoint, PERF_STREAM, count))
    if plan.failover and not (plan.failover_once and size != plan.sizes[0]):
        add(FAILOVER, measure_failover(system))
    return samples


def run(
    factories: dict[str, Callable[[], System]] | dict[str, type[System]],
    plan: Plan,
    log: Callable[[str], None] = print,
    ceilings: Callable[[], dict[str, float]] | None = None,
) -> list[Sample]:
    """Repetitions interleave the systems, so that noise from the machine falls on all alike;
    the machine's ceilings are measured again before each repetition, for the same reason."""
    samples: list[Sample] = []
    rep_no = 0
    for size in plan.sizes:
        for rep in range(1, plan.reps + 1):
            rep_no += 1
            for name, mb_s in (ceilings() if ceilings else {}).items():
                samples.append(Sample(MACHINE, name, 0, rep_no, {"mb_per_s": mb_s}))
                log(f"  ceiling {name}: {mb_s:,.0f} MB/s")
            for make in factories.values():
                t0 = time.monotonic()
                with make() as system:
                    samples += run_one(system, size, rep, plan, log)
                log(f"  {system.key:6} {size:5} B rep {rep}  done in {time.monotonic() - t0:.1f}s")
    return samples
