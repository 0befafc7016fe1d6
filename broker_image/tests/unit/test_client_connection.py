"""The broker's own client connection (controller channel, AlterPartition, fetchers) against a
real TCP peer that never answers: a request that times out leaves nothing behind for asyncio to
complain about."""

from __future__ import annotations

import asyncio
import gc
from typing import Any

import pytest

from samsa.client.connection import BrokerConnection
from samsa.controller.broker_liveness import BrokerProber, LivenessPolicy


async def test_a_request_timing_out_leaves_no_unretrieved_exception() -> None:
    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read()  # reads the requests, answers none, until the client goes
        writer.close()

    server = await asyncio.start_server(silent, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    loop = asyncio.get_running_loop()
    complaints: list[dict[str, Any]] = []
    loop.set_exception_handler(lambda _loop, context: complaints.append(context))
    try:
        for _ in range(3):
            conn = await BrokerConnection("127.0.0.1", port).connect()
            with pytest.raises(TimeoutError):
                await conn.request(18, 0, {}, timeout_s=0.05)  # ApiVersions v0
            await conn.aclose()
            del conn
        gc.collect()
    finally:
        loop.set_exception_handler(None)
        server.close()
        await server.wait_closed()
    assert [c["message"] for c in complaints] == []


async def test_a_prober_stopped_mid_probe_closes_the_connection_it_had_just_opened() -> None:
    # A broker that accepts and never answers: the probe's connection is new and its
    # ApiVersions still waiting when the controller stops probing (it resigned).
    asked, ended = asyncio.Event(), asyncio.Event()

    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read(1)
        asked.set()
        await reader.read()
        ended.set()
        writer.close()

    server = await asyncio.start_server(silent, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    prober = BrokerProber(
        lambda _broker: ("127.0.0.1", port),
        on_dead=lambda _broker: None,
        on_back=lambda _broker: None,
        policy=LivenessPolicy(),
        interval_s=0.1,
        timeout_s=30,
        client_id="test-prober",
    )
    gc.disable()  # the leaked connection must not be closed by the collector instead
    try:
        prober.watch(1)
        async with asyncio.timeout(5):
            await asked.wait()
        await prober.close()
        async with asyncio.timeout(5):
            await ended.wait()
    finally:
        gc.enable()
        server.close()
        await server.wait_closed()
