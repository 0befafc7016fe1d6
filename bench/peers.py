"""`python -m bench peers`: Samsa, Apache Kafka, NATS JetStream and Redis Streams through the
same workloads in one run; prints the tables and, with --docs, rewrites docs/benchmarks.md and
its plots."""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from collections.abc import Callable
from pathlib import Path

from bench import ceilings, docs
from bench.kafka_system import ApacheKafkaCluster
from bench.nats_system import NatsJetStream
from bench.redis_system import RedisStreams
from bench.report import print_tables
from bench.results import RunResult, SystemInfo
from bench.samsa_system import samsa_system
from bench.system import System
from bench.workloads import FULL, QUICK, Plan, run

SYSTEMS = ("samsa", "kafka", "nats", "redis")


def system_classes(names: list[str], samsa_mode: str) -> dict[str, type[System]]:
    table: dict[str, Callable[[], type[System]]] = {
        "samsa": lambda: samsa_system(samsa_mode),  # decided once, not per start
        "kafka": lambda: ApacheKafkaCluster,
        "nats": lambda: NatsJetStream,
        "redis": lambda: RedisStreams,
    }
    return {name: table[name]() for name in names}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench peers", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="one small repetition (< 2 min)")
    parser.add_argument("--reps", type=int, help="repetitions (default 3, quick 1)")
    parser.add_argument("--systems", default=",".join(SYSTEMS), help="comma-separated")
    parser.add_argument("--sizes", help="message sizes in bytes, comma-separated")
    parser.add_argument(
        "--samsa",
        choices=["auto", "standalone", "cluster"],
        default="auto",
        help="auto: the 3-broker cluster if `samsa local up` exists, else one broker",
    )
    parser.add_argument("--no-failover", action="store_true", help="skip the failover step")
    parser.add_argument("--docs", type=Path, help="rewrite DOCS/benchmarks.md and its plots")
    parser.add_argument("--from-json", type=Path, help="render a saved results.json, no run")
    args = parser.parse_args(argv)

    if args.from_json:
        result = RunResult.load(args.from_json)
    else:
        names = [n.strip() for n in args.systems.split(",") if n.strip()]
        unknown = set(names) - set(SYSTEMS)
        if unknown:
            parser.error(f"unknown systems: {', '.join(sorted(unknown))}")
        plan = QUICK if args.quick else FULL
        if args.reps:
            plan = dataclasses.replace(plan, reps=args.reps)
        if args.sizes:
            sizes = tuple(int(s) for s in args.sizes.split(","))
            default = max(plan.backlog.values())
            plan = dataclasses.replace(
                plan, sizes=sizes, backlog={s: plan.backlog.get(s, default) for s in sizes}
            )
        if args.no_failover:
            plan = dataclasses.replace(plan, failover=False)
        result = measure(names, plan, args.samsa, args.quick)
    print_tables(result)
    if args.docs:
        print(f"wrote {docs.write(result, args.docs)}")


def measure(names: list[str], plan: Plan, samsa_mode: str, quick: bool) -> RunResult:
    if not quick:
        print("waiting for the machine's load average to settle", file=sys.stderr)
        docs.settle()
    started = time.monotonic()
    busy0, total0 = docs.cpu_busy()
    machine = docs.machine_facts()
    makers = system_classes(names, samsa_mode)
    samples = run(
        makers,
        plan,
        log=lambda line: print(line, file=sys.stderr),
        ceilings=lambda: ceilings.measure(quick),
    )
    busy1, total1 = docs.cpu_busy()
    machine["load average at end"] = docs.load_average()
    machine["CPU busy during the run (all processes)"] = (
        f"{(busy1 - busy0) / max(1.0, total1 - total0):.0%}"
    )
    machine["run time"] = f"{time.monotonic() - started:.0f} s"
    infos = [
        SystemInfo(cls.key, cls.name, cls.topology, cls.recovery, "", cls.client)
        for cls in makers.values()
    ]
    return RunResult(
        quick=quick,
        reps=plan.reps,
        sizes=list(plan.sizes),
        backlog={str(k): v for k, v in plan.backlog.items()},
        latency_seconds=plan.latency_seconds,
        fixed_rates={str(k): v for k, v in plan.fixed_rates.items()},
        systems=infos,
        machine=machine,
        samples=samples,
    )


if __name__ == "__main__":
    main()
