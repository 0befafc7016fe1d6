"""The machine's own ceilings, measured in the same run: loopback TCP and page-cache writes."""

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


def page_cache_write_mb_s(total: int = 512 << 20, chunk: int = 1 << 20) -> float:
    payload = os.urandom(chunk)
    with tempfile.NamedTemporaryFile(prefix="samsa-bench-") as f:
        fd = f.fileno()
        start = time.perf_counter()
        written = 0
        while written < total:
            written += os.write(fd, payload)
        elapsed = time.perf_counter() - start
    return written / elapsed / 1e6
