"""Start and stop the processes a benchmark measures (brokers, load generators), create their
topics, and read their CPU time from /proc."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from confluent_kafka.admin import AdminClient, NewTopic

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def cpu_seconds(pid: int) -> float:
    """User plus system CPU of a process (and its reaped children not counted)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def wait_port(port: int, timeout: float = 30.0, proc: subprocess.Popen | None = None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"the process exited with {proc.returncode} before listening")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.5):
            return
        time.sleep(0.05)
    raise TimeoutError(f"nothing listens on 127.0.0.1:{port} after {timeout}s")


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
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        shutil.rmtree(data, ignore_errors=True)


def run_client(*args: str) -> dict[str, Any]:
    """Run one bench.clients load generator in its own process; its JSON result."""
    out = subprocess.run(
        [sys.executable, "-m", "bench.clients", *args],
        check=True,
        capture_output=True,
        text=True,
        timeout=900,
    )
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def produce_backlog(
    bootstrap: str, topic: str, count: int, size: int, partitions: int, acks: str = "1"
) -> dict[str, Any]:
    """bench.clients produce: `count` records of `size` bytes, round-robin over partitions."""
    return run_client(
        "produce",
        *("--bootstrap", bootstrap, "--topic", topic, "--count", str(count)),
        *("--size", str(size), "--acks", acks, "--partitions", str(partitions)),
    )


def consume_backlog(bootstrap: str, topic: str, count: int, partitions: int) -> dict[str, Any]:
    """bench.clients consume: one consumer assigned every partition reads `count` records."""
    return run_client(
        "consume",
        *("--bootstrap", bootstrap, "--topic", topic, "--count", str(count)),
        *("--partitions", str(partitions)),
    )


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for fut in admin.create_topics([NewTopic(topic, partitions, 1)]).values():
        fut.result(30)
