"""A real broker in a background thread with its own event loop, on a free 127.0.0.1 port.

Its own thread, so that blocking clients (confluent-kafka, kafka-python) can be used from the
test's thread, and async ones from the test's loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import tempfile
import threading
from collections.abc import AsyncIterator, Iterator, Mapping
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from samsa.broker import KafkaServer
from samsa.config import KafkaConfig
from samsa.local_cluster.ports import free_port as free_port


class InProcessBroker:
    """Start, stop and restart a broker that keeps its data directory between runs."""

    def __init__(
        self,
        data_dir: Path,
        config: Mapping[str, Any] | None = None,
        port: int = 0,
        http: bool = False,
    ) -> None:
        self.data_dir = Path(data_dir)
        self.overrides = {str(k): str(v) for k, v in (config or {}).items()}
        self.port = port  # 0: bind any free port, then keep it across restarts
        self.http = http
        self.server: KafkaServer | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    @property
    def bootstrap_servers(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def http_url(self) -> str:
        assert self.server is not None and self.server.http is not None
        return f"http://127.0.0.1:{self.server.http.port}"

    def _config(self) -> KafkaConfig:
        props = {"listeners": f"PLAINTEXT://127.0.0.1:{self.port}", **self.overrides}
        if self.http and "http.listener" not in props:
            props["http.listener"] = "127.0.0.1:0"
        return KafkaConfig(props)

    def _run_loop(self, loop: asyncio.AbstractEventLoop) -> None:
        asyncio.set_event_loop(loop)
        loop.run_forever()

    def call(self, coro: Any, timeout: float = 30) -> Any:
        """Run a coroutine on the broker's loop and wait for its result."""
        assert self._loop is not None
        fut: Future[Any] = asyncio.run_coroutine_threadsafe(coro, self._loop)
        return fut.result(timeout)

    @contextlib.contextmanager
    def loop_held(self, timeout: float = 30) -> Iterator[None]:
        """The broker's event loop blocked until the block exits (as a long pause would):
        what arrives meanwhile is read in one turn of the loop, in the order it arrived."""
        assert self._loop is not None
        held, release = threading.Event(), threading.Event()

        def hold() -> None:
            held.set()
            release.wait(timeout)

        self._loop.call_soon_threadsafe(hold)
        if not held.wait(timeout):
            release.set()
            raise TimeoutError("the broker's loop did not come round")
        try:
            yield
        finally:
            release.set()

    def start(self) -> InProcessBroker:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._run_loop,
            args=(self._loop,),
            name=f"samsa-broker-{self.port}",
            daemon=True,
        )
        self._thread.start()
        self.server = KafkaServer(self._config(), self.data_dir)
        try:
            self.call(self.server.start())
        except BaseException:
            self._halt_loop()
            raise
        self.port = self.server.port
        return self

    def stop(self) -> None:
        if self.server is not None and self._loop is not None:
            with contextlib.suppress(Exception):
                self.call(self.server.stop())
        self._halt_loop()
        self.server = None

    def _halt_loop(self) -> None:
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
            if self._thread is not None:
                self._thread.join(10)
            self._loop.close()
        self._loop = None
        self._thread = None

    def restart(self) -> InProcessBroker:
        self.stop()
        return self.start()

    def __enter__(self) -> InProcessBroker:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


@contextlib.contextmanager
def _tmp_dir(data_dir: Path | None) -> Iterator[Path]:
    if data_dir is not None:
        yield Path(data_dir)
        return
    with tempfile.TemporaryDirectory(prefix="samsa-") as tmp:
        yield Path(tmp)


@contextlib.asynccontextmanager
async def broker(
    config: Mapping[str, Any] | None = None, data_dir: Path | None = None, http: bool = False
) -> AsyncIterator[InProcessBroker]:
    """An in-process broker for the duration of the block (data in a temporary directory)."""
    with _tmp_dir(data_dir) as path:
        b = InProcessBroker(path, config, http=http)
        await asyncio.to_thread(b.start)
        try:
            yield b
        finally:
            await asyncio.to_thread(b.stop)
