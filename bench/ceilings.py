"""The machine's own ceilings, measured in the same run: loopback TCP, and sequential writes
to the page cache and through to the disk (fsync at the end, as a log's flush would)."""

from __future__ import annotations

import os
import socket
import tempfile
import threading
import time


def loopback_tcp_mb_s(seconds: float = 1.0, chunk: int = 1 << 20) -> float:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    port = server.getsockname()[1]
    received = 0

    def sink() -> None:
        nonlocal received
        conn, _ = server.accept()
        buf = bytearray(chunk)
        with conn:
            while True:
                n = conn.recv_into(buf)
                if not n:
                    return
                received += n

    thread = threading.Thread(target=sink)
    thread.start()
    payload = b"x" * chunk
    with socket.create_connection(("127.0.0.1", port)) as client:
        start = time.perf_counter()
        while time.perf_counter() - start < seconds:
            client.sendall(payload)
        elapsed = time.perf_counter() - start
    thread.join()
    server.close()
    return received / elapsed / 1e6


def sequential_write_mb_s(
    total: int = 512 << 20, chunk: int = 1 << 20, fsync: bool = False, directory: str | None = None
) -> float:
    payload = os.urandom(chunk)
    with tempfile.NamedTemporaryFile(prefix="samsa-bench-", dir=directory) as f:
        fd = f.fileno()
        start = time.perf_counter()
        written = 0
        while written < total:
            written += os.write(fd, payload)
        if fsync:
            os.fsync(fd)
        elapsed = time.perf_counter() - start
    return written / elapsed / 1e6


def measure(quick: bool) -> dict[str, float]:
    """Every ceiling, in MB/s."""
    return {
        "loopback TCP": loopback_tcp_mb_s(0.5 if quick else 2.0),
        "sequential write, page cache": sequential_write_mb_s((128 if quick else 1024) << 20),
        "sequential write, fsync": sequential_write_mb_s(
            (128 if quick else 1024) << 20, fsync=True
        ),
    }
