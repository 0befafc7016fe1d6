"""The tables, plots and docs page from a made-up run: the pure half of the harness."""

from __future__ import annotations

import os
import socket
from pathlib import Path

from bench import docs
from bench.procs import pid_listening_on
from bench.report import ceiling_rows, comparison, markdown_table
from bench.results import (
    CONSUME,
    FAILOVER,
    LATENCY,
    MACHINE,
    PRODUCE,
    RunResult,
    Sample,
    SystemInfo,
)
from bench.samsa_system import _BOOTSTRAP_LINE


def made_up_run() -> RunResult:
    run = RunResult(
        quick=False,
        reps=3,
        sizes=[100],
        backlog={"100": 1000},
        latency_seconds=1,
        fixed_rates={"100": 10_000},
        systems=[
            SystemInfo("samsa", "Samsa", "1 standalone broker, RF=1", "restart"),
            SystemInfo("nats", "NATS JetStream", "3 servers", "failover"),
        ],
        machine={"load average at start": "0.10 0.20 0.30"},
    )
    for rep, loopback in enumerate([900.0, 1000.0, 1200.0], 1):
        run.samples.append(Sample(MACHINE, "loopback TCP", 0, rep, {"mb_per_s": loopback}))
    for rep, (samsa, nats) in enumerate([(300.0, 100.0), (100.0, 50.0), (200.0, 80.0)], 1):
        for key, rate in (("samsa", samsa), ("nats", nats)):
            run.samples += [
                Sample(key, PRODUCE, 100, rep, {"msgs_per_s": rate, "mb_per_s": rate / 10}),
                Sample(key, CONSUME, 100, rep, {"msgs_per_s": rate * 2, "mb_per_s": None}),
                Sample(key, LATENCY, 100, rep, {"p50_ms": 1.0}, [0.5, 1.0, 2.0 * rep]),
                Sample(key, FAILOVER, 100, rep, {"recovery_s": None}),
            ]
    return run


def test_comparison_shows_medians_and_samsa_over_peer_ratios() -> None:
    header, rows = comparison(made_up_run())
    assert header[-1] == "Samsa/NATS JetStream"
    produce = next(r for r in rows if r[0] == PRODUCE and r[2] == "msg/s")
    assert produce[3:] == ["200", "80", "2.50"]  # medians of 300/100/200 and 100/50/80
    # A figure no system has (every recovery_s None, every consume MB/s None) is left out.
    assert not any(r[0] == FAILOVER for r in rows)
    assert not any(r[0] == CONSUME and r[2] == "MB/s" for r in rows)


def test_ceilings_give_samsa_as_a_fraction() -> None:
    header, rows = ceiling_rows(made_up_run())
    # median produce 20 MB/s of 1,000; consume has no MB/s in this run, so no column
    assert header[3:] == ["Samsa produce 100 B"]
    assert rows == [["loopback TCP", "1,000", "900.0-1,200", "2.0%"]]


def test_docs_page_has_the_table_the_plots_and_the_standalone_caveat(tmp_path: Path) -> None:
    run = made_up_run()
    page = docs.write(run, tmp_path).read_text()
    assert markdown_table(*comparison(run)) in page
    assert "standalone broker (RF=1)" in page
    for name in ("throughput.png", "latency-cdf.png"):
        assert (tmp_path / "benchmarks" / name).read_bytes()[:4] == b"\x89PNG"
    again = RunResult.load(tmp_path / "benchmarks" / "results.json")
    assert again.median_cdf("samsa", LATENCY, 100) == [0.5, 1.0, 4.0]


def test_finds_the_process_listening_on_a_port() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        assert pid_listening_on(s.getsockname()[1]) == os.getpid()


def test_reads_the_bootstrap_line_samsa_local_up_prints() -> None:
    assert _BOOTSTRAP_LINE.match("127.0.0.1:9092,127.0.0.1:9093\n")
    assert not _BOOTSTRAP_LINE.match("starting broker 1 on 127.0.0.1:9092")


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def test_a_full_run_waits_for_the_load_average_to_settle_but_not_forever() -> None:
    clock = FakeClock()
    readings = iter([3.8, 2.1, 0.9, 0.4, 0.1])
    load = docs.settle(60, 0.5, 5, lambda: next(readings), clock.sleep, lambda: clock.now)
    assert (load, clock.now) == (0.4, 15)
    clock = FakeClock()
    load = docs.settle(60, 0.5, 5, lambda: 2.0, clock.sleep, lambda: clock.now)
    assert (load, clock.now) == (2.0, 60)
