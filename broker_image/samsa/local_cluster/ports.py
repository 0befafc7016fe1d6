"""Free TCP ports on 127.0.0.1 for the servers that local clusters, tests and benchmarks
start (ZooKeeper, brokers, Apache Kafka)."""

from __future__ import annotations

import os
import random
import socket
import threading
from pathlib import Path

_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")
_LOWEST = 10_000
_pick = random.SystemRandom()  # not the seeded generator: parallel workers must differ
# Ports handed out by this process, the most recent first to stay: a port picked but not yet
# bound by the server it is for still looks free, and a cluster picks all its ports before
# any of its brokers binds one.  Old ones are let go, so a long run cannot exhaust the range.
_given: dict[int, None] = {}
_REMEMBERED = 4096
_lock = threading.Lock()


def _stripe() -> tuple[int, int]:
    """(this worker's index, the number of workers) under pytest-xdist, else (0, 1): each
    worker takes only the ports congruent to its index, so two workers never pick the same."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    try:
        count = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
        index = int(worker.removeprefix("gw")) if worker.startswith("gw") else 0
    except ValueError:
        return 0, 1
    return (index % count, count) if count > 1 else (0, 1)


def _ephemeral_start() -> int:
    try:
        return int(_RANGE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32_768


def _bindable(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_port() -> int:
    """A port nothing listens on, from below the kernel's ephemeral range.

    A port the kernel hands out for port 0 comes from that range, where it can be handed out
    again at once as some client connection's source port, before a slow server binds it
    (Apache Kafka, a JVM, failed to start on "Address already in use" in a full test run).
    Below the range only servers bind, and they pick at random: never a port this process
    handed out recently, nor, under pytest-xdist, one of another worker's."""
    top = _ephemeral_start()
    index, count = _stripe()
    if top > _LOWEST + 1000 * count:
        with _lock:
            for _ in range(1000):
                port = _pick.randrange(_LOWEST, top)
                port -= (port - index) % count
                if port >= _LOWEST and port not in _given and _bindable(port):
                    _given[port] = None
                    if len(_given) > _REMEMBERED:
                        del _given[next(iter(_given))]
                    return port
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
