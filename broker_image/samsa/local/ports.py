"""Free TCP ports on 127.0.0.1 for the servers that local clusters, tests and benchmarks
start (ZooKeeper, brokers, Apache Kafka)."""

from __future__ import annotations

import random
import socket
from pathlib import Path

_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")
_LOWEST = 10_000
_pick = random.SystemRandom()  # not the seeded generator: parallel workers must differ


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
    Below the range only servers bind, and they pick at random."""
    top = _ephemeral_start()
    if top > _LOWEST + 1000:
        for _ in range(100):
            port = _pick.randrange(_LOWEST, top)
            if _bindable(port):
                return port
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
