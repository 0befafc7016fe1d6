"""Asking ZooKeeper servers their role, with the `srvr` four-letter word.

The only module that speaks to ZooKeeper, and it reads nothing but a server's mode: the
operator never reads or writes znodes (it works through the Kafka admin protocol).
"""

from __future__ import annotations

import asyncio
import contextlib

WAIT = 2.0  # seconds for a server to connect, and again to answer


async def server_mode(host: str, port: int) -> str | None:
    """'leader', 'follower' or 'standalone'; None when the server does not answer."""
    try:
        reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), WAIT)
    except (OSError, TimeoutError):
        return None
    try:
        writer.write(b"srvr")
        await writer.drain()
        data = await asyncio.wait_for(reader.read(), WAIT)
    except (OSError, TimeoutError):
        return None
    finally:
        writer.close()
        with contextlib.suppress(OSError):
            await writer.wait_closed()
    for line in data.decode(errors="replace").splitlines():
        if line.startswith("Mode:"):
            return line.partition(":")[2].strip() or None
    return None


def parse_address(address: str, default_port: int) -> tuple[str, int]:
    host, _, port = address.strip().rpartition(":")
    if not host:
        return address.strip(), default_port
    return host, int(port)
