"""Day-2 operations against real brokers: how long the operator takes to roll 3 brokers and to
rebalance 1 GB from 3 brokers to 5, and the producer's latency meanwhile, beside the same
load with no operation.

The operator is installed by its chart on the real control plane (samsa_dev.kube), and the
brokers are real processes run by the node agent, as in tests/integration. The load
is an idempotent acks=all producer at a fixed rate in a process of its own; latency is from
``produce()`` to its acknowledgement.

``python -m bench.operations load ...`` is that producer (the harness starts it).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from bench.table import Row, percentile

REPO = Path(__file__).resolve().parents[1]
# The cluster's helpers are the day-2 tests' own.
HELPERS = (
    "broker_image/tests",
    "broker_image/tests/cluster",
    "tests/integration",
)
RATE, SIZE = 1000, 1024  # the measured load: 1 MB/s of 1 KB records
THROTTLE = 50 << 20  # bytes a second into each broker while partitions move


def run(quick: bool = False) -> list[Row]:
    return asyncio.run(_run(quick))


async def _run(quick: bool) -> list[Row]:
    for folder in HELPERS:
        if str(REPO / folder) not in sys.path:
            sys.path.insert(0, str(REPO / folder))
    quiet = 10.0 if quick else 30.0
    bulk_bytes = (100 if quick else 1000) * 1_000_000
    rows = []
    async with _cluster() as (kube, brokers):
        from cluster_support import create_topic

        bootstrap = brokers.bootstrap_servers
        await asyncio.to_thread(create_topic, brokers, "latency", 6, 3)
        await asyncio.to_thread(create_topic, brokers, "bulk", 12, 3)
        rows.append(_row("no operation", await _quiet_load(bootstrap, quiet)))
        result, took = await _under_load(bootstrap, _roll(kube))
        rows.append(_row("rolling restart, 3 brokers", result, f"took {took:.0f} s"))
        await asyncio.to_thread(_fill, bootstrap, "bulk", bulk_bytes)
        rows.append(
            _row(
                f"no operation, {bulk_bytes // 10**6} MB more", await _quiet_load(bootstrap, quiet)
            )
        )
        result, took = await _under_load(bootstrap, _scale(kube, 5))
        rows.append(
            _row(
                f"rebalance 3 to 5 brokers, {bulk_bytes // 10**6} MB",
                result,
                f"took {took:.0f} s, throttle {THROTTLE >> 20} MiB/s",
            )
        )
    return rows


@asynccontextmanager
async def _cluster() -> AsyncIterator[tuple[Any, Any]]:
    """The control plane, ZooKeeper, the operator's chart, the node agent, 3 brokers."""
    from day2_support import start_cluster

    from samsa.local_cluster import ZooKeeperServer
    from samsa_dev.kube.agent import NodeAgent
    from samsa_dev.kube.api import Api
    from samsa_dev.kube.harness import KubeNamespace, control_plane, namespace_name

    work = Path(tempfile.mkdtemp(prefix="samsa-bench-ops-"))
    tools = REPO / ".tools"
    with control_plane(work) as plane, ZooKeeperServer(work / "zookeeper") as zk:
        name = namespace_name("bench")
        agent = NodeAgent(Api(plane.kubeconfig), work / "agent", namespaces={name})
        kube = KubeNamespace(plane, name, work, str(tools / "kubectl"), str(tools / "helm"), agent)
        await kube.start()
        try:
            _, brokers = await start_cluster(kube, zk, 3, throttle=THROTTLE)
            yield kube, brokers
        finally:
            await kube.close()


async def _roll(kube: Any) -> None:
    from day2_support import wait_status

    await kube.kubectl("annotate", "kc", "day2", "kafka.samsa.dev/manual-rolling-update=true")

    def done(status: dict[str, Any]) -> bool:
        last = status.get("lastRoll") or {}
        return status.get("roll") is None and len(last.get("restarted", [])) == 3

    await wait_status(kube, done, "the roll", 600)


def _scale(kube: Any, brokers: int) -> Any:
    async def scale() -> None:
        from day2_support import merge, wait_status

        await merge(kube, {"spec": {"brokers": {"replicas": brokers}}})

        def done(status: dict[str, Any]) -> bool:
            last = status.get("lastScaling") or {}
            return status.get("scaling") is None and last.get("toReplicas") == brokers

        await wait_status(kube, done, "the rebalance", 1800)

    return scale()


# -- the load -------------------------------------------------------------------------------


def _start_load(bootstrap: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "bench.operations", "load", "--bootstrap", bootstrap],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=REPO,
    )


def _stop_load(proc: subprocess.Popen[str]) -> dict[str, Any]:
    out, _ = proc.communicate("stop\n", timeout=180)
    return dict(json.loads(out.strip().splitlines()[-1]))


async def _quiet_load(bootstrap: str, seconds: float) -> dict[str, Any]:
    proc = _start_load(bootstrap)
    await asyncio.sleep(seconds)  # the measurement window, not a synchronisation
    return await asyncio.to_thread(_stop_load, proc)


async def _under_load(bootstrap: str, operation: Any) -> tuple[dict[str, Any], float]:
    proc = _start_load(bootstrap)
    await asyncio.sleep(2)  # the producer settles before the operation starts
    started = time.monotonic()
    await operation
    took = time.monotonic() - started
    return await asyncio.to_thread(_stop_load, proc), took


def _fill(bootstrap: str, topic: str, total: int) -> None:
    size = 10_000
    subprocess.run(
        [
            sys.executable,
            "-m",
            "bench.clients",
            "samsa",
            "produce",
            "--endpoint",
            bootstrap,
            "--stream",
            topic,
            "--count",
            str(total // size),
            "--size",
            str(size),
            "--acks",
            "all",
        ],
        check=True,
        capture_output=True,
        cwd=REPO,
        timeout=1800,
    )


def _row(workload: str, result: dict[str, Any], note: str = "") -> Row:
    errors = result["errors"]
    return Row(
        workload,
        "samsa",
        SIZE,
        result["acked"] / result["seconds"],
        result["acked"] * SIZE / 1e6 / result["seconds"],
        result["p50_ms"],
        result["p99_ms"],
        result["p999_ms"],
        note=", ".join(x for x in (note, f"{errors} errors" if errors else "") if x),
    )


def load_main(argv: list[str]) -> None:
    """Produce RATE records a second until a line arrives on stdin; print the latencies."""
    from confluent_kafka import Producer

    parser = argparse.ArgumentParser(prog="python -m bench.operations load")
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--topic", default="latency")
    parser.add_argument("--rate", type=float, default=RATE)
    args = parser.parse_args(argv)
    stop = threading.Event()

    def wait_for_stop() -> None:
        sys.stdin.readline()
        stop.set()

    threading.Thread(target=wait_for_stop, daemon=True).start()
    producer = Producer(
        {
            "bootstrap.servers": args.bootstrap,
            "acks": "all",
            "enable.idempotence": True,
            "linger.ms": 1,
            "message.timeout.ms": 300_000,
        }
    )
    latencies: list[float] = []
    errors = 0

    def delivered(sent: float) -> Callable[[Any, Any], None]:
        def callback(err: Any, _msg: Any) -> None:
            nonlocal errors
            if err is not None:
                errors += 1
            else:
                latencies.append((time.perf_counter() - sent) * 1000)

        return callback

    value = b"x" * SIZE
    started = time.perf_counter()
    due = started
    while not stop.is_set():
        due += 1 / args.rate
        wait = due - time.perf_counter()
        producer.poll(max(wait, 0))
        sent = time.perf_counter()
        producer.produce(args.topic, value, on_delivery=delivered(sent))
    seconds = time.perf_counter() - started
    producer.flush(300)
    ordered = sorted(latencies)
    print(
        json.dumps(
            {
                "acked": len(ordered),
                "errors": errors,
                "seconds": seconds,
                "p50_ms": percentile(ordered, 0.5),
                "p99_ms": percentile(ordered, 0.99),
                "p999_ms": percentile(ordered, 0.999),
            }
        ),
        flush=True,
    )


if __name__ == "__main__" and sys.argv[1:2] == ["load"]:
    load_main(sys.argv[2:])
