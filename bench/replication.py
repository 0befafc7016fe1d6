"""Replication latency: what RF=3 costs beside RF=1, and where its milliseconds go.

One `samsa local up --brokers 3` cluster, warmed up (see run). End-to-end latency
(librdkafka, 100 B records, 6 partitions, linger.ms=1) at 10,000 msg/s of RF=1 acks=1 (the
baseline), RF=3 acks=1 and RF=3 acks=all, RF=3 acks=all at 1,000 msg/s, then RF=3 acks=all
at half of its peak measured in the same run; then the same on Apache Kafka, the reference,
and Samsa's ratio to it on each row. Before them, a round trip to an asyncio server that does
no work (``bench.round_trip``): the cost of each hop on this machine. Beside Samsa's rows,
the replication stages (``samsa.replica.latency_stages``) from the brokers' /metrics: the
histograms' growth over that run, summed over the three brokers, read as percentiles the way
Prometheus's histogram_quantile reads them (bucket bounds interpolated, so they are coarse).
The brokers' CPU per MB delivered is beside each latency: on a shared machine it is steadier
than latency.
"""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from bench import round_trip
from bench.kafka_system import ApacheKafkaCluster
from bench.samsa_system import SamsaCluster, create_topic
from bench.system import System
from bench.table import Row
from bench.workloads import PARTITIONS, measure_latency, measure_throughput
from samsa.replica.latency_stages import STAGES
from samsa_dev.jars import JarsUnavailable

SIZE = 100
RATE = 10_000
WARM_UP_S = 5.0
STAGE_METRIC = "kafka_server_replication_stage_time_seconds"
# (label, topic, producer acks, msg/s): the last, a tenth of the rate, is the replicated path
# with CPU to spare.
CASES = (
    ("RF=1 acks=1", "lat-rf1", "1", RATE),
    ("RF=3 acks=1", "lat-rf3-acks1", "1", RATE),
    ("RF=3 acks=all", "lat-rf3", "all", RATE),
    ("RF=3 acks=all, 1,000 msg/s", "lat-rf3-low", "all", RATE // 10),
)
HALF_PEAK = "RF=3 acks=all, half peak"
NAMES = {"samsa": "samsa, 3 brokers", "kafka": "kafka, 3 KRaft nodes"}
KAFKA = NAMES["kafka"]

Buckets = dict[str, dict[float, float]]  # stage -> upper bound -> cumulative count


def http_ports(data_dir: Path) -> list[int]:
    state = json.loads((data_dir / "cluster.json").read_text())
    return [int(b["http_port"]) for b in state["brokers"]]


def scrape(ports: list[int]) -> Buckets:
    """The stage histograms' cumulative buckets, summed over brokers."""
    out: Buckets = {}
    for port in ports:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
            text = r.read().decode()
        for family in text_string_to_metric_families(text):
            if family.name != STAGE_METRIC:
                continue
            for sample in family.samples:
                if sample.name.endswith("_bucket"):
                    per = out.setdefault(sample.labels["stage"], {})
                    le = float(sample.labels["le"])
                    per[le] = per.get(le, 0.0) + sample.value
    return out


def quantile(buckets: dict[float, float], q: float) -> float | None:
    """histogram_quantile over cumulative buckets: linear within the bucket holding q."""
    bounds = sorted(buckets)
    if not bounds or buckets[bounds[-1]] <= 0:
        return None
    rank = q * buckets[bounds[-1]]
    lower, below = 0.0, 0.0
    for le in bounds:
        count = buckets[le]
        if count >= rank:
            if le == float("inf"):
                return lower
            inside = count - below
            return lower + (le - lower) * ((rank - below) / inside if inside else 1.0)
        lower, below = le, count
    return lower


def growth(before: Buckets, after: Buckets) -> Buckets:
    return {
        stage: {le: n - before.get(stage, {}).get(le, 0.0) for le, n in per.items()}
        for stage, per in after.items()
    }


def _run_case(
    system: System,
    ports: list[int],
    label: str,
    topic: str,
    rate: float,
    seconds: float,
    acks: str,
) -> list[Row]:
    """The e2e row of one case, then (Samsa only: `ports` of its /metrics) its stage rows."""
    before = scrape(ports)
    cpu = system.cpu_seconds()
    values, _ = measure_latency(system, topic, SIZE, rate, seconds, create=False, acks=acks)
    cpu = system.cpu_seconds() - cpu
    mb = (values["received"] or 0) * SIZE / 1e6
    rows = [
        Row(
            f"e2e {label}",
            NAMES[system.key],
            SIZE,
            msgs_per_s=values["rate"],
            p50_ms=values["p50_ms"],
            p99_ms=values["p99_ms"],
            p999_ms=values["p999_ms"],
            cpu_ms_per_mb=cpu * 1000 / mb if mb else None,
            note=f"target {rate:,.0f}/s; received {values['received']}; max {_ms_text(values)}",
        )
    ]
    stages = growth(before, scrape(ports))
    for stage in STAGES:
        per = stages.get(stage)
        count = per.get(float("inf"), 0.0) if per else 0.0
        if not count:
            continue
        assert per is not None
        rows.append(
            Row(
                f"  stage {stage}",
                label,
                p50_ms=_ms(quantile(per, 0.5)),
                p99_ms=_ms(quantile(per, 0.99)),
                p999_ms=_ms(quantile(per, 0.999)),
                note=f"{count:,.0f} timed",
            )
        )
    return rows


def _cases(system: System, ports: list[int], quick: bool) -> list[Row]:
    """Every case on one running cluster: RF=1 and RF=3 at 10,000 msg/s, the peak, and half
    of that peak."""
    seconds = 5.0 if quick else 15.0
    peak_count = 200_000 if quick else 1_000_000
    endpoint = system.endpoint
    create_topic(endpoint, "lat-rf1", PARTITIONS, 1, {})
    for topic in ("lat-rf3-acks1", "lat-rf3", "lat-rf3-low", "lat-rf3-half", "peak-rf3", "warm-up"):
        create_topic(endpoint, topic, PARTITIONS, 3, {"min.insync.replicas": "2"})
    # The first consumer makes the brokers create __consumer_offsets (50 partitions, RF=3)
    # and their followers start on it: a fresh cluster's one-off, kept out of the figures.
    measure_latency(system, "warm-up", SIZE, RATE / 10, WARM_UP_S, create=False, acks="all")
    rows: list[Row] = []
    for label, topic, acks, rate in CASES:
        rows += _run_case(system, ports, label, topic, rate, seconds, acks)
    peak = measure_throughput(system, "produce", "peak-rf3", SIZE, peak_count, acks="all")
    half = (peak["msgs_per_s"] or 2 * RATE) / 2
    rows.append(
        Row(
            "peak produce RF=3 acks=all",
            NAMES[system.key],
            SIZE,
            msgs_per_s=peak["msgs_per_s"],
            mb_per_s=peak["mb_per_s"],
            cpu_ms_per_mb=peak["server_cpu_ms_per_mb"],
        )
    )
    rows += _run_case(system, ports, HALF_PEAK, "lat-rf3-half", half, seconds, "all")
    return rows


def _ceiling_rows(quick: bool) -> list[Row]:
    """A request's round trip to a server that does no work: the floor under every hop."""
    seconds = 1.0 if quick else 3.0
    rows = []
    for window, label in ((1, "one at a time"), (64, "64 in flight")):
        per_s, cpu_us = round_trip.measure(seconds, window)
        rows.append(
            Row(
                f"ceiling: asyncio round trip, {label}",
                "no broker",
                400,
                msgs_per_s=per_s,
                note=f"server CPU {cpu_us:.1f} µs per round trip",
                extra={"cpu_us": cpu_us},
            )
        )
    return rows


def _compared(samsa: list[Row], kafka: list[Row]) -> None:
    """Samsa's e2e and peak rows say how they stand against Kafka's of the same case."""
    theirs = {row.workload: row for row in kafka if row.system == KAFKA}
    for row in samsa:
        other = theirs.get(row.workload)
        if other is None:
            continue
        if row.workload.startswith("peak"):
            pairs = [("msg/s", row.msgs_per_s, other.msgs_per_s)]
        else:
            pairs = [("p50", row.p50_ms, other.p50_ms), ("p99", row.p99_ms, other.p99_ms)]
        parts = [f"{name} {mine / ref:.3g}x" for name, mine, ref in pairs if mine and ref]
        if parts:
            row.note = f"{row.note}; Samsa/Kafka {', '.join(parts)}".lstrip("; ")


def run(quick: bool = False) -> list[Row]:
    rows = _ceiling_rows(quick)
    with SamsaCluster() as system:
        samsa = _cases(system, http_ports(system.workdir / "data"), quick)
    kafka: list[Row] = []
    try:
        with ApacheKafkaCluster() as reference:
            kafka = _cases(reference, [], quick)
    except JarsUnavailable as exc:
        kafka = [Row("Apache Kafka", KAFKA, note=f"not run: {exc}")]
    _compared(samsa, kafka)
    return rows + samsa + kafka


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else seconds * 1000


def _ms_text(values: dict) -> str:
    top = values.get("max_ms")
    return "-" if top is None else f"{top:.1f} ms"
