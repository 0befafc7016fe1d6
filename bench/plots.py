"""PNG plots for docs/benchmarks.md (matplotlib, no display): throughput bars and latency CDFs."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from bench.results import CONSUME, LATENCY, LATENCY_FIXED, PRODUCE, RunResult

COLOURS = {"samsa": "#1f77b4", "nats": "#2ca02c", "redis": "#d62728"}


def throughput_bars(run: RunResult, path: Path) -> None:
    """Producer and consumer msg/s and MB/s, one group of bars per workload and size."""
    groups = [(w, size) for w in (PRODUCE, CONSUME) for size in run.sizes]
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
    for ax, metric, label in (
        (axes[0], "msgs_per_s", "messages / s"),
        (axes[1], "mb_per_s", "MB / s"),
    ):
        width = 0.8 / max(1, len(run.systems))
        for i, system in enumerate(run.systems):
            values = [run.median(system.key, w, size, metric) or 0 for w, size in groups]
            # whiskers: the lowest and highest repetition around the median
            spread = [run.values(system.key, w, size, metric) or [0] for w, size in groups]
            err = [
                [v - min(s) for v, s in zip(values, spread, strict=True)],
                [max(s) - v for v, s in zip(values, spread, strict=True)],
            ]
            xs = [g + (i - (len(run.systems) - 1) / 2) * width for g in range(len(groups))]
            ax.bar(
                xs,
                values,
                width,
                yerr=err,
                capsize=3,
                label=f"{system.name} ({system.topology})",
                color=COLOURS.get(system.key),
            )
        ax.set_xticks(range(len(groups)))
        ax.set_xticklabels([f"{w.split()[0]}\n{size} B" for w, size in groups])
        ax.set_ylabel(label)
        ax.grid(axis="y", alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.suptitle(f"Throughput, median of {run.reps} run(s), whiskers from lowest to highest")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def latency_cdfs(run: RunResult, path: Path) -> None:
    """End-to-end latency CDFs, one panel per size and load (half peak, fixed rate)."""
    panels = [(w, size) for w in (LATENCY, LATENCY_FIXED) for size in run.sizes]
    fig, axes = plt.subplots(2, len(run.sizes), figsize=(6 * len(run.sizes), 8), squeeze=False)
    for ax, (workload, size) in zip(axes.flat, panels, strict=False):
        for system in run.systems:
            cdf = run.median_cdf(system.key, workload, size)
            if not cdf:
                continue
            qs = [i / (len(cdf) - 1) for i in range(len(cdf))]
            rate = run.median(system.key, workload, size, "rate")
            label = f"{system.name} @ {rate:,.0f} msg/s" if rate else system.name
            ax.plot(cdf, qs, label=label, color=COLOURS.get(system.key))
        ax.set_xscale("log")
        ax.set_xlabel("end-to-end latency, ms (log)")
        ax.set_ylabel("fraction of messages")
        ax.set_title(f"{workload}, {size} B")
        ax.grid(alpha=0.3, which="both")
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
