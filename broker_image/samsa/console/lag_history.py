"""Each consumer group's lag over time, as the console samples it while it runs: a bounded
window of (time, total lag, lag per partition) in memory, and the chart drawn from it. Pure."""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field

Partition = tuple[str, int]


@dataclass(frozen=True)
class Sample:
    at: float  # epoch seconds
    total: int
    partitions: Mapping[Partition, int] = field(default_factory=dict)


class LagHistory:
    """The last `keep` samples of each group; a group not seen for `keep` samples is dropped."""

    def __init__(self, keep: int = 360) -> None:
        self.keep = keep
        self._samples: dict[str, deque[Sample]] = {}
        self._missed: dict[str, int] = {}

    def record(self, at: float, lags: Mapping[str, Mapping[Partition, int | None]]) -> None:
        """One sampling round: every group's lag per partition (None: unknown, left out)."""
        for group, partitions in lags.items():
            known = {tp: v for tp, v in partitions.items() if v is not None}
            window = self._samples.setdefault(group, deque(maxlen=self.keep))
            window.append(Sample(at, sum(known.values()), known))
            self._missed[group] = 0
        for group in list(self._samples):
            if group in lags:
                continue
            self._missed[group] += 1
            if self._missed[group] >= self.keep:
                del self._samples[group], self._missed[group]

    def samples(self, group: str) -> list[Sample]:
        return list(self._samples.get(group, ()))

    def as_json(self, group: str) -> list[dict[str, object]]:
        return [
            {
                "at": s.at,
                "total": s.total,
                "partitions": [
                    {"topic": t, "partition": p, "lag": lag}
                    for (t, p), lag in sorted(s.partitions.items())
                ],
            }
            for s in self.samples(group)
        ]


def chart_points(
    samples: list[Sample], width: int, height: int
) -> tuple[list[tuple[float, float]], int]:
    """The samples' total lag as SVG coordinates (time left to right, lag bottom to top), and
    the lag at the top of the chart."""
    if not samples:
        return [], 0
    top = max(max(s.total for s in samples), 1)
    start, end = samples[0].at, samples[-1].at
    span = end - start or 1.0
    points = [
        (round((s.at - start) / span * width, 1), round(height - s.total / top * height, 1))
        for s in samples
    ]
    return points, top
