"""The broker core on its own: one standalone broker, librdkafka producer and consumer.

acks=1 produce and backlog consume; beside them acks=all with and without
enable.idempotence, whose difference is the cost of the producer-state checks.  Baselines
from the same run: the loopback TCP and page-cache write ceilings of this machine.  End-to-end
latency is measured by the peers comparison (``bench.peers``).
"""

from __future__ import annotations

from bench.ceilings import loopback_tcp_mb_s, sequential_write_mb_s
from bench.procs import cpu_seconds
from bench.standalone import consume_backlog, create_topic, produce_backlog, samsa_broker
from bench.table import Row

PARTITIONS = 6
BROKER = {"log.segment.bytes": str(256 << 20)}


def run(quick: bool = False) -> list[Row]:
    rows = [
        Row("ceiling", "loopback TCP", mb_per_s=loopback_tcp_mb_s(0.5 if quick else 2.0)),
        Row(
            "ceiling",
            "page-cache write",
            mb_per_s=sequential_write_mb_s((128 if quick else 1024) << 20),
        ),
    ]
    for size in (100, 1024):
        count = (
            (200_000 if quick else 3_000_000) if size == 100 else (50_000 if quick else 1_000_000)
        )
        topic = f"bench-{size}"
        with samsa_broker(BROKER) as (bootstrap, pid):
            create_topic(bootstrap, topic, PARTITIONS)
            rows.append(_produce_row(bootstrap, pid, "produce acks=1", topic, count, size, "1"))
            mb = count * size / 1e6
            cpu0 = cpu_seconds(pid)
            res = consume_backlog(bootstrap, topic, count)
            cpu1 = cpu_seconds(pid)
            rows.append(
                Row(
                    "consume backlog",
                    "samsa",
                    size,
                    res["count"] / res["seconds"],
                    res["count"] * size / 1e6 / res["seconds"],
                    cpu_ms_per_mb=(cpu1 - cpu0) * 1000 / mb,
                    note=f"{res['errors']} missing" if res["errors"] else "",
                )
            )
        # A broker each: a log written before in the same page cache slows the writes after it.
        for workload, idempotence in (("produce acks=all", False), ("produce idempotent", True)):
            with samsa_broker(BROKER) as (bootstrap, pid):
                create_topic(bootstrap, topic, PARTITIONS)
                rows.append(
                    _produce_row(bootstrap, pid, workload, topic, count, size, "all", idempotence)
                )
    return rows


def _produce_row(
    bootstrap: str,
    pid: int,
    workload: str,
    topic: str,
    count: int,
    size: int,
    acks: str,
    idempotence: bool = False,
) -> Row:
    cpu0 = cpu_seconds(pid)
    res = produce_backlog(bootstrap, topic, count, size, acks, idempotence)
    cpu1 = cpu_seconds(pid)
    mb = count * size / 1e6
    return Row(
        workload,
        "samsa",
        size,
        count / res["seconds"],
        mb / res["seconds"],
        cpu_ms_per_mb=(cpu1 - cpu0) * 1000 / mb,
        note=f"{res['errors']} errors" if res["errors"] else "",
    )
