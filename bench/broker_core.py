"""Issue 2's benchmark: one standalone broker, librdkafka producer and consumer, acks=1;
and beside it acks=all with and without enable.idempotence, the cost of idempotence.

Baselines from the same run: the loopback TCP and page-cache write ceilings of this machine,
so each MB/s figure can be read as a fraction of what the hardware allows.
"""

from __future__ import annotations

import json
import subprocess
import sys

from confluent_kafka.admin import AdminClient, NewTopic

from bench.ceilings import loopback_tcp_mb_s, page_cache_write_mb_s
from bench.procs import cpu_seconds, samsa_broker
from bench.report import Row, percentile

PARTITIONS = 6


def _client(*args: str) -> dict:
    out = subprocess.run(
        [sys.executable, "-m", "bench.clients", *args],
        check=True,
        capture_output=True,
        text=True,
        timeout=900,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def _create_topic(bootstrap: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for fut in admin.create_topics([NewTopic(topic, PARTITIONS, 1)]).values():
        fut.result(30)


def run(quick: bool = False) -> list[Row]:
    rows = [
        Row("ceiling", "loopback TCP", mb_per_s=loopback_tcp_mb_s(0.5 if quick else 2.0)),
        Row(
            "ceiling",
            "page-cache write",
            mb_per_s=page_cache_write_mb_s((128 if quick else 1024) << 20),
        ),
    ]
    for size in (100, 1024):
        count = (
            (200_000 if quick else 3_000_000) if size == 100 else (50_000 if quick else 1_000_000)
        )
        with samsa_broker({"log.segment.bytes": str(256 << 20)}) as (bootstrap, pid):
            topic = f"bench-{size}"
            rows.append(
                _produce_row(bootstrap, pid, "produce acks=1", topic, count, size, "1", False)
            )
            mb = count * size / 1e6
            cpu0 = cpu_seconds(pid)
            res = _client(
                "consume",
                "--bootstrap",
                bootstrap,
                "--topic",
                topic,
                "--count",
                str(count),
                "--partitions",
                str(PARTITIONS),
            )
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
        # acks=all with and without idempotence (which implies acks=all): the difference is
        # the cost of the producer-state checks.  A broker each, as a log written before in
        # the same page cache slows the writes that follow it.
        for workload, idempotence in (("produce acks=all", False), ("produce idempotent", True)):
            with samsa_broker({"log.segment.bytes": str(256 << 20)}) as (bootstrap, pid):
                rows.append(
                    _produce_row(
                        bootstrap, pid, workload, f"bench-{size}", count, size, "all", idempotence
                    )
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
    idempotence: bool,
) -> Row:
    _create_topic(bootstrap, topic)
    cpu0 = cpu_seconds(pid)
    args = ["produce", "--bootstrap", bootstrap, "--topic", topic, "--count", str(count)]
    args += ["--size", str(size), "--acks", acks, "--partitions", str(PARTITIONS)]
    res = _client(*args, *(["--idempotence"] if idempotence else []))
    cpu1 = cpu_seconds(pid)
    mb = count * size / 1e6
    lat = res["latencies"]
    return Row(
        workload,
        "samsa",
        size,
        count / res["seconds"],
        mb / res["seconds"],
        _ms(percentile(lat, 0.5)),
        _ms(percentile(lat, 0.99)),
        _ms(percentile(lat, 0.999)),
        (cpu1 - cpu0) * 1000 / mb,
        note=f"{res['errors']} errors" if res["errors"] else "",
    )


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else seconds * 1000
