"""NATS JetStream's load generator: nats-py on asyncio, publishes pipelined with asynchronous
acknowledgements (a window of unacknowledged messages, as nats.go's PublishAsync), and a push
consumer with AckNone and flow control, the fastest way JetStream hands out a stream.

nats-py's own `publish_async` makes a future per message; we count acknowledgements on one
reply subject instead, which is what the window needs and costs a fraction of it.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable

import nats
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy

from bench.clients.common import Latencies, Pacer, Probe, emit, filler, now_ns, stamp_of, stamped

WINDOW = 8_192  # unacknowledged publishes in flight
BIG = 1 << 30


async def _connect(endpoint: str, **kw: object) -> Client:
    return await nats.connect(
        endpoint.split(","), pending_size=64 << 20, max_reconnect_attempts=-1, **kw
    )


class _Acks:
    """Counts publish acknowledgements arriving on one reply subject."""

    def __init__(self) -> None:
        self.acked = 0
        self.errors = 0
        self.sent = 0
        self.room = asyncio.Event()
        self.done = asyncio.Event()

    async def on_ack(self, msg: Msg) -> None:
        self.acked += 1
        if b'"error"' in msg.data:
            self.errors += 1
        if self.sent - self.acked <= WINDOW // 2:
            self.room.set()
        if self.acked >= self.sent:
            self.done.set()

    async def drained(self, within: float) -> None:
        """Every publish so far acknowledged."""
        self.done.clear()
        if self.acked < self.sent:
            await asyncio.wait_for(self.done.wait(), within)


async def _publisher(nc: Client) -> tuple[_Acks, str]:
    acks = _Acks()
    inbox = nc.new_inbox()
    await nc.subscribe(inbox, cb=acks.on_ack, pending_msgs_limit=BIG, pending_bytes_limit=BIG)
    return acks, inbox


async def produce(endpoint: str, stream: str, count: int, size: int) -> dict:
    nc = await _connect(endpoint)
    acks, inbox = await _publisher(nc)
    payload = filler(size + 8)[:size]
    publish = nc.publish
    start = time.perf_counter()
    for i in range(count):
        if acks.sent - acks.acked >= WINDOW:
            acks.room.clear()
            await acks.room.wait()
        elif i % 512 == 0:
            await asyncio.sleep(0)  # publish never yields: let the flusher and the acks run
        acks.sent += 1
        await publish(stream, payload, reply=inbox)
    await nc.flush()
    await acks.drained(300)
    elapsed = time.perf_counter() - start
    await nc.close()
    return {"count": count, "seconds": elapsed, "errors": acks.errors}


class _Reader:
    """A push consumer's messages: answers flow control and heartbeats, hands on the data."""

    def __init__(self, nc: Client, on_data: Callable[[Msg], None]) -> None:
        self.nc = nc
        self.on_data = on_data

    async def on_msg(self, msg: Msg) -> None:
        headers = msg.headers
        if headers and headers.get("Status") == "100":
            # Flow control asks for a reply once we have read up to it; a heartbeat may say
            # the consumer stalled waiting for one.
            reply = msg.reply or headers.get("Nats-Consumer-Stalled")
            if reply:
                await self.nc.publish(reply, b"")
            return
        self.on_data(msg)


async def _push_consumer(nc: Client, stream: str, on_data: Callable[[Msg], None]) -> None:
    deliver = nc.new_inbox()
    await nc.subscribe(
        deliver,
        cb=_Reader(nc, on_data).on_msg,
        pending_msgs_limit=BIG,
        pending_bytes_limit=BIG,
    )
    js = nc.jetstream(timeout=10)
    await js.add_consumer(
        stream,
        ConsumerConfig(
            deliver_subject=deliver,
            deliver_policy=DeliverPolicy.ALL,
            ack_policy=AckPolicy.NONE,
            flow_control=True,
            idle_heartbeat=1.0,
        ),
    )


async def consume(endpoint: str, stream: str, count: int) -> dict:
    nc = await _connect(endpoint)
    got = 0
    done = asyncio.Event()

    def on_data(_msg: Msg) -> None:
        nonlocal got
        got += 1
        if got >= count:
            done.set()

    start = time.perf_counter()
    await _push_consumer(nc, stream, on_data)
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(done.wait(), 600)
    elapsed = time.perf_counter() - start
    await nc.close()
    return {"count": got, "seconds": elapsed, "errors": max(0, count - got)}


async def e2e_produce(endpoint: str, stream: str, rate: float, seconds: float, size: int) -> dict:
    nc = await _connect(endpoint)
    acks, inbox = await _publisher(nc)
    pad = filler(size)
    pacer = Pacer(rate, seconds)
    while (n := pacer.due()) >= 0:
        if n == 0:
            await asyncio.sleep(pacer.tick)
            continue
        payload = stamped(now_ns(), pad)
        acks.sent += n
        for _ in range(n):
            await nc.publish(stream, payload, reply=inbox)
    await nc.flush()
    await acks.drained(60)
    await nc.close()
    return {"sent": acks.sent, "seconds": seconds, "errors": acks.errors}


async def e2e_consume(endpoint: str, stream: str, expect: int, idle_s: float) -> dict:
    nc = await _connect(endpoint)
    lat = Latencies()
    last = time.monotonic()

    def on_data(msg: Msg) -> None:
        nonlocal last
        lat.add(stamp_of(msg.data), now_ns())
        last = time.monotonic()

    await _push_consumer(nc, stream, on_data)
    await nc.flush()
    emit({"ready": True})
    start = time.monotonic()
    last = start
    # Polled, not awaited on an event: the end is "all seen, or nothing new for idle_s".
    while lat.seen < expect and time.monotonic() - last < idle_s:  # noqa: ASYNC110
        await asyncio.sleep(0.05)
    await nc.close()
    return lat.summary(last - start)


async def probe(endpoint: str, stream: str, state: Probe) -> dict:
    nc = await _connect(endpoint, reconnect_time_wait=0.05, connect_timeout=1)
    js = nc.jetstream(timeout=0.5)
    while True:
        sent = now_ns()
        try:
            await js.publish(stream, b"probe")
            ok = True
        except Exception:
            ok = False
        result = state.record(sent, ok)
        if result is not None:
            await nc.close()
            return result
        if not ok:
            await asyncio.sleep(0.005)
