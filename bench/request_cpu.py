"""The replicated path's CPU: the three brokers' cores at a light, a middle and a heavy rate,
and what each request costs them, beside the do-nothing asyncio round trip.

One `samsa local up --brokers 3` cluster per run, warmed up as ``bench.replication`` does.
Each case is a librdkafka producer (linger.ms=1) and consumer of 100 B records on 6
partitions at a fixed rate: RF=3 acks=all (min.insync.replicas=2) beside RF=1 acks=1, at
200, 1,000 and 10,000 msg/s. Per case: the brokers' CPU over the load's seconds as cores,
the end-to-end p50 and p99, the requests the brokers answered per second by kind (from
/metrics: Produce, FetchFollower, FetchConsumer, the rest), and the brokers' CPU per request
answered (all of it, idle work included, over every request). Each figure is the median of
``RUNS`` runs on fresh clusters; the load average is in the title row's note. The floor row
is ``bench.round_trip``'s server CPU per round trip, one at a time.
"""

from __future__ import annotations

import os
import re
import statistics
import urllib.request
from dataclasses import dataclass

from bench import round_trip
from bench.replication import http_ports
from bench.samsa_system import SamsaCluster, create_topic
from bench.system import System
from bench.table import Row
from bench.workloads import PARTITIONS, measure_latency

SIZE = 100
RUNS = 3
RATES = (200, 1_000, 10_000)
# (label, replication factor, producer acks)
SETUPS = (("RF=3 acks=all", 3, "all"), ("RF=1 acks=1", 1, "1"))
KINDS = ("Produce", "FetchFollower", "FetchConsumer")
# What issue 31 asks of the three brokers at RF=3 acks=all, in cores, per rate.
AIMS = {200: 0.1, 1_000: 0.3, 10_000: 0.5}
_REQUESTS = re.compile(
    r'^kafka_network_request_metrics_requests_total\{request="(\w+)"\} (\S+)$', re.M
)


def request_counts(texts: list[str]) -> dict[str, float]:
    """Requests answered so far per kind, summed over the brokers' /metrics texts."""
    out: dict[str, float] = {}
    for text in texts:
        for kind, value in _REQUESTS.findall(text):
            out[kind] = out.get(kind, 0.0) + float(value)
    return out


def _scrape(ports: list[int]) -> dict[str, float]:
    texts = []
    for port in ports:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
            texts.append(r.read().decode())
    return request_counts(texts)


@dataclass
class Measured:
    """One case of one run."""

    cores: float
    p50_ms: float | None
    p99_ms: float | None
    per_s: dict[str, float]  # requests answered per second, by kind

    @property
    def requests_per_s(self) -> float:
        return sum(self.per_s.values())

    @property
    def cpu_us_per_request(self) -> float | None:
        total = self.requests_per_s
        return self.cores * 1e6 / total if total else None


def _case(
    system: System, ports: list[int], topic: str, rate: int, acks: str, seconds: float
) -> Measured:
    before, cpu = _scrape(ports), system.cpu_seconds()
    values, _ = measure_latency(system, topic, SIZE, rate, seconds, create=False, acks=acks)
    cpu = system.cpu_seconds() - cpu
    after = _scrape(ports)
    per_s = {kind: (after[kind] - before.get(kind, 0.0)) / seconds for kind in after}
    return Measured(cpu / seconds, values["p50_ms"], values["p99_ms"], per_s)


def one_run(seconds: float) -> dict[tuple[str, int], Measured]:
    """Every case on one fresh cluster."""
    out: dict[tuple[str, int], Measured] = {}
    with SamsaCluster() as system:
        ports = http_ports(system.workdir / "data")
        endpoint = system.endpoint
        for label, rf, _ in SETUPS:
            config = {"min.insync.replicas": "2"} if rf > 1 else {}
            for rate in RATES:
                create_topic(endpoint, _topic(label, rate), PARTITIONS, rf, config)
        create_topic(endpoint, "warm-up", PARTITIONS, 3, {"min.insync.replicas": "2"})
        # The first consumer makes the brokers create __consumer_offsets: kept out of the cases.
        measure_latency(system, "warm-up", SIZE, 1_000, 5.0, create=False, acks="all")
        for label, _, acks in SETUPS:
            for rate in RATES:
                out[(label, rate)] = _case(system, ports, _topic(label, rate), rate, acks, seconds)
    return out


def _topic(label: str, rate: int) -> str:
    return f"cpu-{label.split()[0].lower().replace('=', '')}-{rate}"


def _median(values: list[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.median(present) if present else None


def rows_of(runs: list[dict[tuple[str, int], Measured]], floor_us: float) -> list[Row]:
    """Median rows over the runs: one per case, its request kinds and CPU per request in the
    note; RF=3's rows name the aim."""
    rows = []
    for label, _, _ in SETUPS:
        for rate in RATES:
            cases = [run[(label, rate)] for run in runs if (label, rate) in run]
            cores = _median([c.cores for c in cases])
            per_request = _median([c.cpu_us_per_request for c in cases])
            kinds = {
                kind: _median([c.per_s.get(kind, 0.0) for c in cases]) or 0.0 for kind in KINDS
            }
            others = _median(
                [c.requests_per_s - sum(c.per_s.get(k, 0.0) for k in KINDS) for c in cases]
            )
            aim = AIMS.get(rate) if label.startswith("RF=3") else None
            note = (
                f"cores {cores:.2f}"
                + (f" (aim {aim})" if aim is not None else "")
                + "; req/s "
                + ", ".join(f"{k} {v:,.0f}" for k, v in kinds.items())
                + f", other {others or 0:,.0f}; "
                + (
                    f"{per_request:,.0f} µs CPU/request ({per_request / floor_us:.0f}x the floor)"
                    if per_request is not None and floor_us
                    else "-"
                )
            )
            rows.append(
                Row(
                    f"{label}, {rate:,} msg/s",
                    "samsa, 3 brokers",
                    SIZE,
                    msgs_per_s=rate,
                    p50_ms=_median([c.p50_ms for c in cases]),
                    p99_ms=_median([c.p99_ms for c in cases]),
                    note=note,
                    extra={"cores": cores or 0.0, "cpu_us_per_request": per_request or 0.0},
                )
            )
    return rows


def run(quick: bool = False) -> list[Row]:
    seconds = 5.0 if quick else 15.0
    runs_wanted = 1 if quick else RUNS
    _, floor_us = round_trip.measure(1.0 if quick else 3.0, 1)
    runs = [one_run(seconds) for _ in range(runs_wanted)]
    load = os.getloadavg()
    title = Row(
        "floor: asyncio round trip, one at a time",
        "no broker",
        note=(
            f"server CPU {floor_us:.1f} µs per round trip; {runs_wanted} run(s) of "
            f"{seconds:.0f} s per case, medians; load average after "
            f"{load[0]:.2f} {load[1]:.2f} {load[2]:.2f}"
        ),
        extra={"cpu_us": floor_us},
    )
    return [title, *rows_of(runs, floor_us)]
