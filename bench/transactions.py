"""Transactions' cost: one standalone broker, librdkafka producing 1 KB records to 6
partitions with acks=all, idempotent beside transactional with a commit every 100 ms, from the
same run. `python -m bench.transactions --bootstrap ... --topic ... --count N` is the
transactional producer in its own process; it prints its result as one JSON line."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from typing import Any

from confluent_kafka import Producer

from bench.procs import cpu_seconds
from bench.standalone import create_topic, produce_backlog, samsa_broker
from bench.table import Row

PARTITIONS = 6
SIZE = 1024
COMMIT_INTERVAL_S = 0.1


def transactional_produce(bootstrap: str, topic: str, count: int, size: int) -> dict[str, Any]:
    """``count`` records round-robin over the partitions in transactions committed every
    100 ms; the commits' durations too."""
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "transactional.id": f"bench-{time.monotonic_ns()}",
            "linger.ms": 5,
            "batch.size": 1_000_000,
            "batch.num.messages": 100_000,
            "queue.buffering.max.messages": 2_000_000,
            "queue.buffering.max.kbytes": 2_000_000,
            "compression.type": "none",
        }
    )
    partitions = len(producer.list_topics(topic, timeout=10).topics[topic].partitions)
    payload = (b"0123456789abcdef" * (size // 16 + 1))[:size]
    producer.init_transactions(60)
    commits: list[float] = []
    start = time.perf_counter()
    producer.begin_transaction()
    last_commit = start
    for i in range(count):
        while True:
            try:
                producer.produce(topic, payload, partition=i % partitions)
                break
            except BufferError:
                producer.poll(0.001)
        if i % 1000 == 0:
            producer.poll(0)
            now = time.perf_counter()
            if now - last_commit >= COMMIT_INTERVAL_S:
                producer.commit_transaction(60)
                done = time.perf_counter()
                commits.append(done - now)
                last_commit = done
                producer.begin_transaction()
    t0 = time.perf_counter()
    producer.commit_transaction(60)
    commits.append(time.perf_counter() - t0)
    elapsed = time.perf_counter() - start
    commits.sort()
    return {
        "count": count,
        "seconds": elapsed,
        "commits": len(commits),
        "commit_p50_ms": commits[len(commits) // 2] * 1000,
        "commit_p99_ms": commits[min(len(commits) - 1, int(len(commits) * 0.99))] * 1000,
    }


def run(quick: bool = False) -> list[Row]:
    count = 50_000 if quick else 500_000
    mb = count * SIZE / 1e6
    rows: list[Row] = []
    with samsa_broker({"log.segment.bytes": str(256 << 20)}) as (bootstrap, pid):
        create_topic(bootstrap, "bench-idem", PARTITIONS)
        create_topic(bootstrap, "bench-txn", PARTITIONS)
        cpu0 = cpu_seconds(pid)
        res = produce_backlog(bootstrap, "bench-idem", count, SIZE, "all", idempotence=True)
        cpu1 = cpu_seconds(pid)
        rows.append(
            Row(
                "produce acks=all",
                "idempotent",
                SIZE,
                count / res["seconds"],
                mb / res["seconds"],
                cpu_ms_per_mb=(cpu1 - cpu0) * 1000 / mb,
            )
        )
        out = subprocess.run(
            [
                sys.executable,
                "-m",
                "bench.transactions",
                *("--bootstrap", bootstrap, "--topic", "bench-txn", "--count", str(count)),
            ],
            check=True,
            capture_output=True,
            text=True,
            timeout=1800,
        )
        txn = json.loads(out.stdout.strip().splitlines()[-1])
        cpu2 = cpu_seconds(pid)
        rows.append(
            Row(
                "produce acks=all",
                "transactional, commit every 100 ms",
                SIZE,
                count / txn["seconds"],
                mb / txn["seconds"],
                p50_ms=txn["commit_p50_ms"],
                p99_ms=txn["commit_p99_ms"],
                cpu_ms_per_mb=(cpu2 - cpu1) * 1000 / mb,
                note=f"{txn['commits']} commits; p50/p99 = commit_transaction's duration",
            )
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--count", type=int, required=True)
    parser.add_argument("--size", type=int, default=SIZE)
    args = parser.parse_args()
    print(json.dumps(transactional_produce(args.bootstrap, args.topic, args.count, args.size)))


if __name__ == "__main__":
    main()
