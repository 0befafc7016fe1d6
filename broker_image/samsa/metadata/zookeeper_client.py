"""ZooKeeperClient: one ZooKeeper session, and znode reads and writes over it from asyncio.

Kafka's ZooKeeperClient: the connection (retried until ZooKeeper answers), the session's
state changes handed to listeners, and the plain znode operations, with no knowledge of
Kafka's layout (that is KafkaZkClient's).  kazoo runs its own threads: every call here uses
kazoo's async API and is bridged to an asyncio future, and watch callbacks are handed to the
event loop, so nothing blocks the loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import Any

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import (
    ConnectionClosedError,
    ConnectionLoss,
    NodeExistsError,
    NoNodeError,
    SessionExpiredError,
)
from kazoo.protocol.states import ZnodeStat

from samsa.wall_clock import wall_clock_ms

log = logging.getLogger(__name__)

# ZooKeeper out of reach: the connection lost, the session expired, or the client closed.
# An operation that fails so may or may not have been applied.
ZOOKEEPER_LOST: tuple[type[Exception], ...] = (
    ConnectionLoss,
    SessionExpiredError,
    ConnectionClosedError,
)


class ZooKeeperClient:
    """One ZooKeeper session, and the znodes read and written through it."""

    def __init__(
        self,
        connect: str,
        session_timeout_ms: int = 18_000,
        connection_timeout_ms: int | None = None,
    ) -> None:
        chroot_at = connect.find("/")
        self.connect = connect
        self.session_timeout_ms = session_timeout_ms
        self.connection_timeout_ms = connection_timeout_ms or session_timeout_ms
        self.zk = KazooClient(
            hosts=connect,
            timeout=session_timeout_ms / 1000,
            connection_retry={"max_tries": -1, "delay": 0.1, "backoff": 2, "max_delay": 2},
            command_retry=None,
        )
        self.chroot = connect[chroot_at:] if chroot_at >= 0 else ""
        self._loop: asyncio.AbstractEventLoop | None = None
        self._state_listeners: list[Callable[[KazooState], None]] = []

    # ---------------------------------------------------------------- session

    async def start(self) -> None:
        """Connect, retrying with backoff until ZooKeeper answers (logged, never fatal)."""
        self._loop = asyncio.get_running_loop()
        self.zk.add_listener(self._on_state)
        delay = 0.5
        while True:
            try:
                await asyncio.to_thread(self.zk.start, self.connection_timeout_ms / 1000)
                break
            except Exception as exc:
                log.warning(
                    "ZooKeeper at %s is not reachable (%s); retrying in %.1f s",
                    self.connect,
                    exc,
                    delay,
                )
                await asyncio.sleep(delay)
                delay = min(delay * 2, 10.0)

    async def close(self) -> None:
        try:
            await asyncio.to_thread(self.zk.stop)
            await asyncio.to_thread(self.zk.close)
        except Exception:
            log.debug("closing the ZooKeeper client failed", exc_info=True)

    def add_state_listener(self, listener: Callable[[KazooState], None]) -> None:
        """Called on the event loop with SUSPENDED, LOST or CONNECTED."""
        self._state_listeners.append(listener)

    def _on_state(self, state: KazooState) -> None:
        loop = self._loop
        if loop is None or loop.is_closed():
            return
        for listener in self._state_listeners:
            loop.call_soon_threadsafe(listener, state)

    @property
    def session_id(self) -> int | None:
        sid = self.zk.client_id
        return sid[0] if sid else None

    @property
    def connected(self) -> bool:
        return bool(self.zk.connected)

    def on_loop(self, fn: Callable[..., None]) -> Callable[..., Any]:
        """Wrap a watch callback (run by kazoo's thread) to run on the event loop instead."""
        loop = self._loop
        assert loop is not None

        def call(*args: Any) -> None:
            if not loop.is_closed():
                loop.call_soon_threadsafe(fn, *args)

        return call

    # ---------------------------------------------------------------- async bridge

    async def _wait(self, async_result: Any) -> Any:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()

        def settle(value: Any, error: BaseException | None) -> None:
            if future.done():
                return
            if error is not None:
                future.set_exception(error)
            else:
                future.set_result(value)

        def done(result: Any) -> None:
            try:
                value = result.get_nowait()
            except BaseException as exc:
                loop.call_soon_threadsafe(settle, None, exc)
            else:
                loop.call_soon_threadsafe(settle, value, None)

        async_result.rawlink(done)
        return await future

    # ---------------------------------------------------------------- znodes

    async def get(self, path: str) -> tuple[bytes, ZnodeStat] | None:
        try:
            result: tuple[bytes, ZnodeStat] = await self._wait(self.zk.get_async(path))
            return result
        except NoNodeError:
            return None

    async def children(self, path: str) -> list[str]:
        try:
            return list(await self._wait(self.zk.get_children_async(path)))
        except NoNodeError:
            return []

    async def exists(self, path: str) -> ZnodeStat | None:
        stat: ZnodeStat | None = await self._wait(self.zk.exists_async(path))
        return stat

    async def create(
        self,
        path: str,
        value: bytes = b"",
        ephemeral: bool = False,
        makepath: bool = False,
        sequence: bool = False,
    ) -> str:
        created: str = await self._wait(
            self.zk.create_async(
                path, value, ephemeral=ephemeral, makepath=makepath, sequence=sequence
            )
        )
        return created

    async def set(self, path: str, value: bytes, version: int = -1) -> ZnodeStat:
        stat: ZnodeStat = await self._wait(self.zk.set_async(path, value, version))
        return stat

    async def delete(self, path: str, recursive: bool = False) -> None:
        try:
            if recursive:
                await asyncio.to_thread(self.zk.delete, path, -1, True)
            else:
                await self._wait(self.zk.delete_async(path))
        except NoNodeError:
            pass

    async def ensure_path(self, path: str) -> None:
        with contextlib.suppress(NodeExistsError):
            await self.create(path, b"", makepath=True)

    async def set_or_create(self, path: str, value: bytes) -> None:
        try:
            await self.set(path, value)
        except NoNodeError:
            try:
                await self.create(path, value, makepath=True)
            except NodeExistsError:
                await self.set(path, value)

    # ---------------------------------------------------------------- change notifications

    async def watch_notifications(
        self, root: str, on_change: Callable[[], None], expiry_ms: int
    ) -> Any:
        """Call on_change (on the event loop) whenever a notification znode is added under
        ``root``, and delete those older than ``expiry_ms``, as Kafka's
        ZkNodeChangeNotificationListener does; every broker may purge, the first one wins.
        Returns the watch, which lives as long as it is referenced."""
        from kazoo.recipe.watchers import ChildrenWatch

        await self.ensure_path(root)

        def changed(children: list[str]) -> None:
            on_change()
            if children:
                asyncio.get_running_loop().create_task(self._purge(root, expiry_ms))

        return await asyncio.to_thread(ChildrenWatch, self.zk, root, self.on_loop(changed))

    async def _purge(self, root: str, expiry_ms: int) -> None:
        cutoff = wall_clock_ms() - expiry_ms
        for child in await self.children(root):
            stat = await self.exists(f"{root}/{child}")
            if stat is not None and stat.ctime < cutoff:
                await self.delete(f"{root}/{child}")
