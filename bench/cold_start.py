"""Cold start: how soon a standalone broker serves after `samsa broker` is run, and what its
imports cost. Baselines from the same run: a bare interpreter, and the broker's modules
imported as start-up loaded them before it learnt to load cluster and HTTP parts on demand
(ZooKeeper's client, the controller, the inter-broker client, aiohttp)."""

from __future__ import annotations

import resource
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.procs import cpu_seconds, free_port, terminate
from bench.table import Row, percentile

# A development environment has Hypothesis, which kio would load; production images do not.
NO_HYPOTHESIS = "import sys; sys.modules['hypothesis'] = None; "
IMPORTS = {
    "bare interpreter (floor)": "pass",
    "import samsa.broker (standalone start-up)": "import samsa.broker.server",
    "+ cluster and HTTP modules (start-up before)": (
        "import samsa.broker.server, samsa.broker.cluster, samsa.broker.http, "
        "samsa.metadata.zk_metadata_store"
    ),
}
# ApiVersions v0 with correlation id 1 and no client id: any broker answers it.
API_VERSIONS = struct.pack(">ihhih", 10, 18, 0, 1, -1)


def _child_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def import_cpu_ms(code: str) -> float:
    """CPU of a fresh interpreter that runs `code` and exits (start-up and teardown included)."""
    before = _child_cpu()
    subprocess.run([sys.executable, "-c", NO_HYPOTHESIS + code], check=True)
    return (_child_cpu() - before) * 1000


def answers(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5) as sock:
            sock.sendall(API_VERSIONS)
            return len(sock.recv(4)) == 4
    except OSError:
        return False


def broker_start(timeout: float = 60.0) -> tuple[float, float]:
    """(ms from spawning `samsa broker` until it answers ApiVersions, its CPU ms by then)."""
    data = Path(tempfile.mkdtemp(prefix="samsa-cold-"))
    port = free_port()
    cmd = [sys.executable, "-m", "samsa.cli", "broker", "--data-dir", str(data)]
    cmd += ["--listen", f"127.0.0.1:{port}", "--log-level", "WARNING"]
    started = time.monotonic()
    proc = subprocess.Popen(cmd)
    try:
        while not answers(port):
            if proc.poll() is not None or time.monotonic() - started > timeout:
                raise RuntimeError(f"the broker did not serve within {timeout:.0f} s")
            time.sleep(0.005)
        return (time.monotonic() - started) * 1000, cpu_seconds(proc.pid) * 1000
    finally:
        terminate(proc)
        shutil.rmtree(data, ignore_errors=True)


def _row(workload: str, system: str, samples: list[float], note: str) -> Row:
    ordered = sorted(samples)
    return Row(workload, system, p50_ms=percentile(ordered, 0.5), p99_ms=ordered[-1], note=note)


def run(quick: bool = False) -> list[Row]:
    reps = 3 if quick else 10
    rows = []
    for label, code in IMPORTS.items():
        cpu = [import_cpu_ms(code) for _ in range(reps)]
        rows.append(_row("import, CPU ms", label, cpu, f"{reps} runs; p99 column: the slowest"))
    starts = [broker_start() for _ in range(reps)]
    note = f"{reps} runs; p99 column: the slowest"
    who = "samsa broker until it answers ApiVersions"
    rows.append(_row("start, wall ms", who, [wall for wall, _ in starts], note))
    rows.append(_row("start, CPU ms", who, [cpu for _, cpu in starts], note))
    return rows
