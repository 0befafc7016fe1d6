"""The aiohttp side port: /healthz (alive), /readyz (caught up), /metrics (Prometheus)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest


class HttpSidePort:
    def __init__(
        self,
        host: str,
        port: int,
        registry: CollectorRegistry,
        ready: Callable[[], tuple[bool, str]],
        alive: Callable[[], tuple[bool, str]],
        before_scrape: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        self.host = host
        self.port = port
        self._registry = registry
        self._ready = ready
        self._alive = alive
        self._before_scrape = before_scrape
        self._runner: web.AppRunner | None = None

    async def start(self) -> None:
        app = web.Application()
        app.router.add_get("/healthz", self._healthz)
        app.router.add_get("/readyz", self._readyz)
        app.router.add_get("/metrics", self._metrics)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port, reuse_address=True)
        await site.start()
        # aiohttp has no public accessor for the port it bound when asked for port 0.
        server: Any = site._server
        if server is not None and getattr(server, "sockets", None):
            self.port = server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    @staticmethod
    def _answer(state: tuple[bool, str]) -> web.Response:
        ok, reason = state
        return web.Response(status=200 if ok else 503, text=reason + "\n")

    async def _healthz(self, request: web.Request) -> web.Response:
        return self._answer(self._alive())

    async def _readyz(self, request: web.Request) -> web.Response:
        return self._answer(self._ready())

    async def _metrics(self, request: web.Request) -> web.Response:
        if self._before_scrape is not None:
            await self._before_scrape()
        body = generate_latest(self._registry)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})
