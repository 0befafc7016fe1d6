"""The tables: medians of each figure per system, Samsa/peer ratios, and Samsa as a fraction of
the machine's ceilings. Built once as rows of text, rendered to the terminal (rich) and to
Markdown (docs/benchmarks.md)."""

from __future__ import annotations

import statistics

from rich.console import Console
from rich.table import Table

from bench.results import (
    CONSUME,
    FAILOVER,
    LATENCY,
    LATENCY_FIXED,
    PERF_CONSUME,
    PERF_PRODUCE,
    PRODUCE,
    PRODUCE_ACKS1,
    RunResult,
)

SAMSA = "samsa"
#: per workload, the figures shown: (metric key, label, digits)
METRICS: dict[str, list[tuple[str, str, int]]] = {
    PRODUCE: [
        ("msgs_per_s", "msg/s", 0),
        ("mb_per_s", "MB/s", 1),
        ("server_cpu_ms_per_mb", "server CPU ms/MB", 1),
        ("client_cpu_ms_per_mb", "client CPU ms/MB", 1),
    ],
    PRODUCE_ACKS1: [("msgs_per_s", "msg/s", 0), ("mb_per_s", "MB/s", 1)],
    CONSUME: [
        ("msgs_per_s", "msg/s", 0),
        ("mb_per_s", "MB/s", 1),
        ("server_cpu_ms_per_mb", "server CPU ms/MB", 1),
        ("client_cpu_ms_per_mb", "client CPU ms/MB", 1),
    ],
    LATENCY: [
        ("rate", "rate msg/s", 0),
        ("p50_ms", "p50 ms", 2),
        ("p99_ms", "p99 ms", 2),
        ("p999_ms", "p99.9 ms", 2),
    ],
    LATENCY_FIXED: [("p50_ms", "p50 ms", 2), ("p99_ms", "p99 ms", 2), ("p999_ms", "p99.9 ms", 2)],
    FAILOVER: [("recovery_s", "writes back after, s", 2)],
    PERF_PRODUCE: [
        ("msgs_per_s", "msg/s", 0),
        ("mb_per_s", "MB/s", 1),
        ("p50_ms", "ack p50 ms", 0),
        ("p99_ms", "ack p99 ms", 0),
    ],
    PERF_CONSUME: [("msgs_per_s", "msg/s", 0), ("mb_per_s", "MB/s", 1)],
}


def fmt(value: float | None, digits: int = 1) -> str:
    if value is None:
        return "-"
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    return f"{value:.{digits}f}"


def ratio(a: float | None, b: float | None) -> str:
    if a is None or b is None or b == 0:
        return "-"
    return f"{a / b:.2f}"


def _size(size: int) -> str:
    return f"{size // 1024} KB" if size >= 1024 and size % 1024 == 0 else f"{size} B"


def comparison(run: RunResult) -> tuple[list[str], list[list[str]]]:
    """Header and rows: each figure's median per system, then Samsa/peer ratios."""
    keys = [s.key for s in run.systems]
    peers = [k for k in keys if k != SAMSA]
    names = {s.key: s.name for s in run.systems}
    header = ["workload", "size", "figure", *(names[k] for k in keys)]
    if SAMSA in keys:
        header += [f"Samsa/{names[p]}" for p in peers]
    rows = []
    for workload, metrics in METRICS.items():
        for size in run.sizes:
            for metric, label, digits in metrics:
                med = {k: run.median(k, workload, size, metric) for k in keys}
                if all(v is None for v in med.values()):
                    continue
                cells = [fmt(med[k], digits) for k in keys]
                if workload == FAILOVER:
                    # a restart is not a failover: say which one each figure is
                    cells = [
                        f"{c} ({s.recovery})" if c != "-" else c
                        for c, s in zip(cells, run.systems, strict=True)
                    ]
                row = [workload, _size(size), label, *cells]
                if SAMSA in keys:
                    row += [ratio(med[SAMSA], med[p]) for p in peers]
                rows.append(row)
    return header, rows


def ceiling_rows(run: RunResult) -> tuple[list[str], list[list[str]]]:
    """Each ceiling, and Samsa's produce and consume MB/s as a fraction of it."""
    header = ["ceiling", "MB/s", "lowest-highest"]
    figures = [
        (workload, size)
        for workload in (PRODUCE, CONSUME)
        for size in run.sizes
        if run.median(SAMSA, workload, size, "mb_per_s") is not None
    ]
    header += [f"Samsa {w} {_size(s)}" for w, s in figures]
    rows = []
    for name, values in run.ceilings().items():
        mb_s = statistics.median(values)
        row = [name, fmt(mb_s), f"{fmt(min(values))}-{fmt(max(values))}"]
        for workload, size in figures:
            samsa = run.median(SAMSA, workload, size, "mb_per_s")
            row.append(f"{samsa / mb_s:.1%}" if samsa is not None and mb_s else "-")
        rows.append(row)
    return header, rows


def systems_caption(run: RunResult) -> str:
    return "; ".join(f"{s.name}: {s.topology}" for s in run.systems)


def print_tables(run: RunResult, console: Console | None = None) -> None:
    console = console or Console(width=200)
    reps = f"median of {run.reps} run{'s' if run.reps > 1 else ''}"
    header, rows = comparison(run)
    table = Table(title=f"Samsa and its peers, {reps}", caption=systems_caption(run))
    for name in header:
        table.add_column(
            name, justify="left" if name in ("workload", "size", "figure") else "right"
        )
    for i, row in enumerate(rows):
        table.add_row(*row, end_section=i + 1 < len(rows) and rows[i + 1][0] != row[0])
    console.print(table)
    header, rows = ceiling_rows(run)
    table = Table(title="The machine's ceilings, measured before each repetition, median")
    for name in header:
        table.add_column(name, justify="left" if name == "ceiling" else "right")
    for row in rows:
        table.add_row(*row)
    console.print(table)


def markdown_table(header: list[str], rows: list[list[str]]) -> str:
    align = ["---" if h in ("workload", "size", "figure", "ceiling") else "---:" for h in header]
    lines = ["| " + " | ".join(header) + " |", "| " + " | ".join(align) + " |"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)
