"""A run's results: one sample per system, workload, message size and repetition; medians over
the repetitions; saved as JSON beside the docs so the report can be rebuilt without a rerun."""

from __future__ import annotations

import json
import statistics
from dataclasses import asdict, dataclass, field
from pathlib import Path

PRODUCE = "produce"
PRODUCE_ACKS1 = "produce acks=1"
CONSUME = "consume backlog"
LATENCY = "e2e latency, half peak"
LATENCY_FIXED = "e2e latency, fixed rate"
FAILOVER = "failover"
#: Kafka's own load generators (the Java client), on Kafka-protocol systems only
PERF_PRODUCE = "kafka-producer-perf-test"
PERF_CONSUME = "kafka-consumer-perf-test"
#: the system name under which the machine's ceilings are kept, one sample per repetition
MACHINE = "machine"
WORKLOADS = (
    PRODUCE,
    PRODUCE_ACKS1,
    CONSUME,
    LATENCY,
    LATENCY_FIXED,
    FAILOVER,
    PERF_PRODUCE,
    PERF_CONSUME,
)


@dataclass
class Sample:
    system: str
    workload: str
    size: int
    rep: int
    values: dict[str, float | None]
    cdf: list[float] = field(default_factory=list)


@dataclass
class SystemInfo:
    key: str
    name: str
    topology: str
    recovery: str
    version: str = ""
    client: str = ""


@dataclass
class RunResult:
    quick: bool
    reps: int
    sizes: list[int]
    backlog: dict[str, int]
    latency_seconds: float
    fixed_rates: dict[str, float]
    systems: list[SystemInfo] = field(default_factory=list)
    machine: dict[str, str] = field(default_factory=dict)
    samples: list[Sample] = field(default_factory=list)

    def values(self, system: str, workload: str, size: int, metric: str) -> list[float]:
        return [
            v
            for s in self.samples
            if (s.system, s.workload, s.size) == (system, workload, size)
            and (v := s.values.get(metric)) is not None
        ]

    def median(self, system: str, workload: str, size: int, metric: str) -> float | None:
        vals = self.values(system, workload, size, metric)
        return statistics.median(vals) if vals else None

    def median_cdf(self, system: str, workload: str, size: int) -> list[float]:
        """The pointwise median of the repetitions' latency CDFs (their quantiles)."""
        cdfs = [
            s.cdf
            for s in self.samples
            if (s.system, s.workload, s.size) == (system, workload, size) and s.cdf
        ]
        if not cdfs:
            return []
        n = min(len(c) for c in cdfs)
        return [statistics.median(c[i] for c in cdfs) for i in range(n)]

    def ceilings(self) -> dict[str, list[float]]:
        """Each ceiling's MB/s, one figure per repetition, in the order measured."""
        out: dict[str, list[float]] = {}
        for s in self.samples:
            if s.system == MACHINE and (v := s.values.get("mb_per_s")) is not None:
                out.setdefault(s.workload, []).append(v)
        return out

    def system(self, key: str) -> SystemInfo | None:
        return next((s for s in self.systems if s.key == key), None)

    def save(self, path: Path) -> None:
        path.write_text(json.dumps(asdict(self), indent=1) + "\n")

    @classmethod
    def load(cls, path: Path) -> RunResult:
        raw = json.loads(path.read_text())
        raw["systems"] = [SystemInfo(**s) for s in raw["systems"]]
        raw["samples"] = [Sample(**s) for s in raw["samples"]]
        return cls(**raw)
