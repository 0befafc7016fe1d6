"""What every load generator shares: stamped payloads, pacing, latency summaries, the failover
probe's bookkeeping, and the one JSON line each prints as its result.

Times are CLOCK_MONOTONIC nanoseconds, one clock for every process on the machine, so a
consumer can subtract a producer's stamp.
"""

from __future__ import annotations

import json
import struct
import sys
import threading
import time
from dataclasses import dataclass, field

STAMP = struct.Struct("<q")
now_ns = time.monotonic_ns
#: messages stamped in the first part of a latency run are warm-up, not counted
WARMUP_FRACTION = 0.2
#: points of the latency CDF a client returns (quantiles), enough to draw it
CDF_POINTS = 200


def emit(result: dict) -> None:
    print(json.dumps(result), flush=True)


def filler(size: int) -> bytes:
    # Not compressible, in case a client or broker compresses behind our back.
    import os

    return os.urandom(max(0, size - STAMP.size))


def log_lines(size: int, count: int = 256) -> list[bytes]:
    """`count` distinct records of `size` bytes that compress as application logs do (about
    4:1 each with zstd; a batch of them compresses better, since they share their words)."""
    import random

    rng = random.Random(size)
    words = [b"order", b"checkout", b"payment", b"accepted", b"user", b"warehouse", b"retry"]
    out = []
    for i in range(count):
        line = b""
        while len(line) < size:
            line += (
                b'{"ts":%d,"level":"info","service":"%s","event":"%s","id":"%08x","ms":%d}\n'
                % (
                    1_700_000_000_000 + i * 37 + len(line),
                    rng.choice(words),
                    rng.choice(words),
                    rng.getrandbits(32),
                    rng.randrange(1000),
                )
            )
        out.append(line[:size])
    return out


def stamped(stamp_ns: int, pad: bytes) -> bytes:
    return STAMP.pack(stamp_ns) + pad


def stamp_of(payload: bytes | memoryview) -> int:
    return int(STAMP.unpack_from(payload)[0])


class Pacer:
    """Open-loop pacing: how many messages are due now to keep `rate` per second since start.

    Exactly int(rate * seconds) messages in all, so the consumer knows when it has them all.
    """

    def __init__(self, rate: float, seconds: float, tick: float = 0.001) -> None:
        self.rate = rate
        self.total = int(rate * seconds)
        self.tick = tick
        self.start = time.monotonic()
        self.sent = 0

    def due(self) -> int:
        """Messages to send now (0: sleep `tick` first); -1 once all are sent."""
        if self.sent >= self.total:
            return -1
        due = min(self.total, int(self.rate * (time.monotonic() - self.start)))
        n = max(0, due - self.sent)
        self.sent += n
        return n


@dataclass
class Latencies:
    """End-to-end latencies of the messages a consumer saw, warm-up dropped."""

    first_stamp: int = 0
    samples: list[int] = field(default_factory=list)
    seen: int = 0

    def add(self, stamp: int, now: int) -> None:
        if not self.first_stamp:
            self.first_stamp = stamp
        self.seen += 1
        self.samples.append(now - stamp)

    def add_stamps(self, stamps: list[int], now: int) -> None:
        if stamps and not self.first_stamp:
            self.first_stamp = stamps[0]
        self.seen += len(stamps)
        self.samples.extend(now - s for s in stamps)

    def summary(self, run_seconds: float) -> dict:
        # Stamps are monotonic per producer; samples are in arrival order, stamps near it.
        skip = int(len(self.samples) * WARMUP_FRACTION)
        values = sorted(self.samples[skip:])
        if not values:
            return {"seen": self.seen, "p50_ms": None, "p99_ms": None, "p999_ms": None, "cdf": []}

        def q(p: float) -> float:
            return values[min(len(values) - 1, round(p * (len(values) - 1)))] / 1e6

        return {
            "seen": self.seen,
            "counted": len(values),
            "rate": self.seen / run_seconds if run_seconds else None,
            "p50_ms": q(0.5),
            "p99_ms": q(0.99),
            "p999_ms": q(0.999),
            "max_ms": values[-1] / 1e6,
            "cdf": [q(i / CDF_POINTS) for i in range(CDF_POINTS + 1)],
        }


class KillTime:
    """The harness writes the moment it killed the leader on our stdin; read it on the side."""

    def __init__(self) -> None:
        self.at: int | None = None
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        line = sys.stdin.readline().strip()
        self.at = int(line) if line else -1


@dataclass
class Probe:
    """Writes, one at a time, until one issued after the kill is acknowledged."""

    kill: KillTime
    deadline_s: float = 90.0
    failures_after_kill: int = 0
    announced: bool = False

    def record(self, sent: int, ok: bool) -> dict | None:
        """Account one write; the result once recovery is seen (or given up on)."""
        if ok and not self.announced:
            self.announced = True
            emit({"ready": True})  # the harness may kill the leader now
        at = self.kill.at
        if at is None:
            return None
        if at < 0:
            return {"recovery_s": None, "error": "no kill time given"}
        if sent >= at:
            if ok:
                return {"recovery_s": (now_ns() - at) / 1e9, "failures": self.failures_after_kill}
            self.failures_after_kill += 1
        if (now_ns() - at) / 1e9 > self.deadline_s:
            return {"recovery_s": None, "error": f"no write succeeded in {self.deadline_s}s"}
        return None
