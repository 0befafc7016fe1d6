"""One result row, percentiles, and the rich table every component benchmark prints."""

from __future__ import annotations

from dataclasses import dataclass, field

from rich.console import Console
from rich.table import Table


def percentile(sorted_values: list[float], q: float) -> float | None:
    if not sorted_values:
        return None
    index = min(len(sorted_values) - 1, max(0, round(q * (len(sorted_values) - 1))))
    return sorted_values[index]


@dataclass
class Row:
    workload: str
    system: str
    size: int = 0
    msgs_per_s: float | None = None
    mb_per_s: float | None = None
    p50_ms: float | None = None
    p99_ms: float | None = None
    p999_ms: float | None = None
    cpu_ms_per_mb: float | None = None
    note: str = ""
    extra: dict[str, float] = field(default_factory=dict)


def _fmt(value: float | None, digits: int = 1, scale: float = 1.0) -> str:
    if value is None:
        return "-"
    value *= scale
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    return f"{value:.{digits}f}"


def print_table(title: str, rows: list[Row]) -> None:
    table = Table(title=title)
    for name in (
        "workload",
        "system",
        "size B",
        "msg/s",
        "MB/s",
        "p50 ms",
        "p99 ms",
        "p99.9 ms",
        "broker CPU ms/MB",
        "note",
    ):
        table.add_column(
            name, justify="left" if name in ("workload", "system", "note") else "right"
        )
    for r in rows:
        table.add_row(
            r.workload,
            r.system,
            str(r.size) if r.size else "-",
            _fmt(r.msgs_per_s, 0),
            _fmt(r.mb_per_s),
            _fmt(r.p50_ms, 2),
            _fmt(r.p99_ms, 2),
            _fmt(r.p999_ms, 2),
            _fmt(r.cpu_ms_per_mb, 3),
            r.note,
        )
    Console(width=160).print(table)
