"""The machine's cost of a request round trip to an asyncio server that does no work.

A process of its own runs the smallest server of the broker's shape (asyncio.BufferedProtocol,
size-prefixed frames, one write per burst of answers); a client sends 400-byte frames one at a
time, then with many in flight. Its CPU per round trip is the floor under each of the broker's
hops: one at a time, every request wakes a sleeping process, which on a virtual machine costs
far more than the work. ``python -m bench.round_trip PORT`` runs the server."""

from __future__ import annotations

import asyncio
import socket
import struct
import subprocess
import sys
import time

from bench.procs import cpu_seconds, free_port, terminate, wait_port

_SIZE = struct.Struct(">i")
FRAME = _SIZE.pack(396) + b"\0" * 396
ANSWER = _SIZE.pack(8) + b"\0" * 8


class _Echo(asyncio.BufferedProtocol):
    """Answers every whole frame with 8 bytes."""

    def __init__(self) -> None:
        self.buf = bytearray(1 << 20)
        self.view = memoryview(self.buf)
        self.end = 0
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        transport.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def get_buffer(self, sizehint: int) -> memoryview:
        return self.view[self.end :]

    def buffer_updated(self, nbytes: int) -> None:
        self.end += nbytes
        start = answers = 0
        while self.end - start >= 4:
            (size,) = _SIZE.unpack_from(self.buf, start)
            if self.end - start < 4 + size:
                break
            start += 4 + size
            answers += 1
        self.buf[: self.end - start] = bytes(self.buf[start : self.end])
        self.end -= start
        if answers and self.transport is not None:
            self.transport.write(ANSWER * answers)


async def _serve(port: int) -> None:
    server = await asyncio.get_running_loop().create_server(_Echo, "127.0.0.1", port)
    async with server:
        await server.serve_forever()


def _exchange(sock: socket.socket, count: int, window: int) -> None:
    sent = answered = 0
    pending = 0
    while answered < count:
        burst = min(window - (sent - answered), count - sent)
        if burst > 0:
            sock.sendall(FRAME * burst)
            sent += burst
        pending += len(sock.recv(1 << 16))
        whole = pending // len(ANSWER)
        answered += whole
        pending -= whole * len(ANSWER)


def measure(seconds: float, window: int) -> tuple[float, float]:
    """(round trips per second, the server's CPU microseconds per round trip)."""
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "bench.round_trip", str(port)])
    try:
        wait_port(port, proc=proc)
        with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            _exchange(sock, 2000, window)  # warm
            count = 0
            cpu = cpu_seconds(proc.pid)
            start = time.perf_counter()
            while time.perf_counter() - start < seconds:
                _exchange(sock, 1000, window)
                count += 1000
            elapsed = time.perf_counter() - start
            cpu = cpu_seconds(proc.pid) - cpu
        return count / elapsed, cpu * 1e6 / count
    finally:
        terminate(proc)


if __name__ == "__main__":
    asyncio.run(_serve(int(sys.argv[1])))
