"""A packet delayer for one network namespace: the kernel here has no netem, so added latency
is done in user space.

The namespace's ``eth0`` redirects every frame it would send (a tc ``mirred`` filter on its
egress) to a veth pair; this process reads each frame from the pair's far end, holds it for
the delay (plus or minus the jitter, never overtaking the frame before it, so TCP sees no
reordering) and sends it out of ``eth0`` with PACKET_QDISC_BYPASS, which skips the filter that
redirected it. Run inside the namespace: ``python netdelay.py <in> <out> <ms> <jitter_ms>``.
"""

from __future__ import annotations

import contextlib
import heapq
import random
import select
import socket
import sys
import time

ETH_P_ALL = 0x0003
SOL_PACKET = 263
PACKET_QDISC_BYPASS = 20


def run(source: str, target: str, ms: float, jitter_ms: float) -> None:
    inbound = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
    inbound.bind((source, 0))
    outbound = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0)
    outbound.setsockopt(SOL_PACKET, PACKET_QDISC_BYPASS, 1)
    outbound.bind((target, 0))
    queue: list[tuple[float, int, bytes]] = []
    sequence = 0
    last_due = 0.0
    while True:
        now = time.monotonic()
        while queue and queue[0][0] <= now:
            frame = heapq.heappop(queue)[2]
            # The link going down, or a frame too large: a lost packet, as on a wire.
            with contextlib.suppress(OSError):
                outbound.send(frame)
        wait = None if not queue else max(0.0, queue[0][0] - now)
        ready, _, _ = select.select([inbound], [], [], wait)
        if ready:
            frame = inbound.recv(65535)
            due = time.monotonic() + (ms + random.uniform(-jitter_ms, jitter_ms)) / 1000
            last_due = max(last_due, due)
            sequence += 1
            heapq.heappush(queue, (last_due, sequence, frame))


if __name__ == "__main__":
    run(sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4]))
