"""One standalone broker process for the component benchmarks, its topics, and librdkafka load
run through the peers' load generators (``python -m bench.clients samsa ...``)."""

from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from confluent_kafka.admin import AdminClient, NewTopic

from bench.procs import free_port, terminate, wait_port


@contextlib.contextmanager
def samsa_broker(overrides: dict[str, str] | None = None) -> Iterator[tuple[str, int]]:
    """A standalone broker process on a free port; yields (bootstrap, pid)."""
    data = Path(tempfile.mkdtemp(prefix="samsa-bench-"))
    port = free_port()
    cmd = [
        sys.executable,
        "-m",
        "samsa.cli",
        "broker",
        "--data-dir",
        str(data),
        "--listen",
        f"127.0.0.1:{port}",
        "--log-level",
        "WARNING",
    ]
    for key, value in (overrides or {}).items():
        cmd += ["--override", f"{key}={value}"]
    proc = subprocess.Popen(cmd)
    try:
        wait_port(port, proc=proc)
        yield f"127.0.0.1:{port}", proc.pid
    finally:
        terminate(proc)
        shutil.rmtree(data, ignore_errors=True)


def run_client(*args: str) -> dict[str, Any]:
    """One Kafka load generator in its own process; its JSON result (the last line)."""
    out = subprocess.run(
        [sys.executable, "-m", "bench.clients", "samsa", *args],
        check=True,
        capture_output=True,
        text=True,
        timeout=900,
    )
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def produce_backlog(
    bootstrap: str,
    topic: str,
    count: int,
    size: int,
    acks: str = "1",
    idempotence: bool = False,
    compressible: bool = False,
) -> dict[str, Any]:
    """`count` records of `size` bytes, round-robin over the topic's partitions; random bytes,
    or with `compressible` text that compresses as log lines do."""
    return run_client(
        "produce",
        *("--endpoint", bootstrap, "--stream", topic, "--count", str(count)),
        *("--size", str(size), "--acks", acks),
        *(["--idempotence"] if idempotence else []),
        *(["--compressible"] if compressible else []),
    )


def consume_backlog(bootstrap: str, topic: str, count: int) -> dict[str, Any]:
    """One consumer assigned every partition reads `count` records from the start."""
    return run_client(
        "consume", *("--endpoint", bootstrap, "--stream", topic, "--count", str(count))
    )


def create_topic(
    bootstrap: str, topic: str, partitions: int, config: dict[str, str] | None = None
) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for fut in admin.create_topics([NewTopic(topic, partitions, 1, config=config or {})]).values():
        fut.result(30)
