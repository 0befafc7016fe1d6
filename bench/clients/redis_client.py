"""Redis Streams' load generator: redis-py's connection with the hiredis parser, pipelined.

XADD goes out in pipelines of pre-encoded commands, the next one written before the replies
of the last are read, so the server never waits for the client; XREADGROUP reads with NOACK
(no pending-entries list, as a Kafka consumer commits offsets apart from reading) and large
COUNTs, two requests in flight.
"""

from __future__ import annotations

import time
from urllib.parse import urlparse

import redis

from bench.clients.common import Latencies, Pacer, Probe, emit, filler, now_ns, stamp_of, stamped

PIPELINE = 1_000
READ_COUNT = 10_000


def _connection(endpoint: str, **kw: object) -> redis.Connection:
    url = urlparse(endpoint)
    conn = redis.Connection(
        host=url.hostname or "127.0.0.1", port=url.port or 6379, protocol=2, **kw
    )
    conn.connect()
    return conn


def _bulk(value: bytes) -> bytes:
    return b"$%d\r\n%s\r\n" % (len(value), value)


def xadd(stream: str, payload: bytes) -> bytes:
    """One XADD <stream> * v <payload>, as RESP bytes."""
    return b"*5\r\n" + b"".join(_bulk(a) for a in (b"XADD", stream.encode(), b"*", b"v", payload))


def _failed(conn: redis.Connection) -> int:
    """Read one reply: 1 if it is an error, else 0."""
    try:
        conn.read_response(disable_decoding=True)
    except redis.ResponseError:
        return 1
    return 0


def produce(endpoint: str, stream: str, count: int, size: int) -> dict:
    conn = _connection(endpoint)
    batch = xadd(stream, filler(size + 8)[:size]) * PIPELINE
    errors = 0
    in_flight = 0
    start = time.perf_counter()
    remaining = count
    while remaining or in_flight:
        n = min(PIPELINE, remaining)
        if n:
            conn.send_packed_command(
                [batch if n == PIPELINE else batch[: len(batch) // PIPELINE * n]]
            )
            remaining -= n
        # Read the previous pipeline's replies while this one is on its way.
        for _ in range(in_flight):
            errors += _failed(conn)
        in_flight = n
    elapsed = time.perf_counter() - start
    conn.disconnect()
    return {"count": count, "seconds": elapsed, "errors": errors}


def _xreadgroup(stream: str, block_ms: int | None = None) -> tuple:
    args: tuple = ("XREADGROUP", "GROUP", "bench", "c1", "COUNT", READ_COUNT, "NOACK")
    if block_ms is not None:
        args += ("BLOCK", block_ms)
    return (*args, "STREAMS", stream, ">")


def _entries(reply: object) -> list:
    # [[stream, [[id, [field, value]], ...]]], or None when a BLOCK timed out
    return reply[0][1] if reply else []  # type: ignore[index]


def consume(endpoint: str, stream: str, count: int) -> dict:
    conn = _connection(endpoint)
    request = conn.pack_command(*_xreadgroup(stream))
    got = 0
    start = time.perf_counter()
    deadline = start + 600
    conn.send_packed_command(request)
    while got < count and time.perf_counter() < deadline:
        conn.send_packed_command(request)
        got += len(_entries(conn.read_response(disable_decoding=True)))
    conn.read_response(disable_decoding=True)  # the one still in flight
    elapsed = time.perf_counter() - start
    conn.disconnect()
    return {"count": min(got, count), "seconds": elapsed, "errors": max(0, count - got)}


def e2e_produce(endpoint: str, stream: str, rate: float, seconds: float, size: int) -> dict:
    conn = _connection(endpoint)
    pad = filler(size)
    pacer = Pacer(rate, seconds)
    sent = errors = 0
    while (n := pacer.due()) >= 0:
        if n == 0:
            time.sleep(pacer.tick)
            continue
        conn.send_packed_command([xadd(stream, stamped(now_ns(), pad)) * n])
        for _ in range(n):
            errors += _failed(conn)
        sent += n
    conn.disconnect()
    return {"sent": sent, "seconds": seconds, "errors": errors}


def e2e_consume(endpoint: str, stream: str, expect: int, idle_s: float) -> dict:
    conn = _connection(endpoint)
    request = conn.pack_command(*_xreadgroup(stream, block_ms=100))
    lat = Latencies()
    conn.send_packed_command(request)
    first = _entries(conn.read_response(disable_decoding=True))
    emit({"ready": True})
    start = last = time.monotonic()
    lat.add_stamps([stamp_of(e[1][1]) for e in first], now_ns())
    while lat.seen < expect and time.monotonic() - last < idle_s:
        conn.send_packed_command(request)
        entries = _entries(conn.read_response(disable_decoding=True))
        if entries:
            now = now_ns()
            last = time.monotonic()
            lat.add_stamps([stamp_of(e[1][1]) for e in entries], now)
    conn.disconnect()
    return lat.summary(last - start)


def probe(endpoint: str, stream: str, state: Probe) -> dict:
    client = redis.Redis.from_url(
        endpoint, socket_timeout=0.5, socket_connect_timeout=0.5, retry_on_timeout=False
    )
    while True:
        sent = now_ns()
        try:
            client.xadd(stream, {"v": b"probe"})
            ok = True
        except redis.RedisError:
            ok = False
        result = state.record(sent, ok)
        if result is not None:
            client.close()
            return result
        if not ok:
            time.sleep(0.005)
