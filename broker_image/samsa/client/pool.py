"""ConnectionPool: one lazily (re)opened connection per broker id."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from samsa.client.connection import BrokerConnection, ClientSecurity


class ConnectionPool:
    """``address_of(broker_id)`` gives (host, port), or None for a broker not known now."""

    def __init__(
        self,
        address_of: Callable[[int], tuple[str, int] | None],
        client_id: str = "samsa",
        connect_timeout: float = 5.0,
        security: ClientSecurity | None = None,
    ) -> None:
        self.security = security
        self._address_of = address_of
        self.client_id = client_id
        self.connect_timeout = connect_timeout
        self._conns: dict[int, BrokerConnection] = {}
        self._locks: dict[int, asyncio.Lock] = {}

    async def get(self, broker_id: int) -> BrokerConnection:
        conn = self._conns.get(broker_id)
        address = self._address_of(broker_id)
        if address is None:
            raise ConnectionError(f"broker {broker_id} is not known")
        if conn is not None and not conn.closed and (conn.host, conn.port) == address:
            return conn
        lock = self._locks.setdefault(broker_id, asyncio.Lock())
        async with lock:
            conn = self._conns.get(broker_id)
            if conn is not None and not conn.closed and (conn.host, conn.port) == address:
                return conn
            if conn is not None:
                conn.close()
            conn = BrokerConnection(address[0], address[1], self.client_id, self.security)
            await conn.connect(self.connect_timeout)
            self._conns[broker_id] = conn
            return conn

    async def request(
        self, broker_id: int, api_key: int, version: int, body: Any, timeout_s: float = 30.0
    ) -> Any:
        conn = await self.get(broker_id)
        return await conn.request(api_key, version, body, timeout_s)

    def drop(self, broker_id: int) -> None:
        conn = self._conns.pop(broker_id, None)
        if conn is not None:
            conn.close()

    async def close(self) -> None:
        conns = list(self._conns.values())
        self._conns.clear()
        for conn in conns:
            await conn.aclose()
