"""Redis Streams as a system under test: one Debian redis-server (7.x), appendonly with
appendfsync everysec. A single node: it has no replica to fail over to, so its recovery is a
restart that replays the append-only file."""

from __future__ import annotations

import time

import redis

from bench.procs import Server, free_port, require_binary
from bench.system import System


class RedisStreams(System):
    key = "redis"
    name = "Redis Streams"
    topology = "1 node, AOF everysec, no replica"
    recovery = "restart"
    client = "redis-py + hiredis, pipelined XADD, XREADGROUP"

    def start(self) -> None:
        port = free_port()
        (self.workdir / "data").mkdir(exist_ok=True)
        self.server = Server(
            "redis-server",
            [
                require_binary("redis-server"),
                "--bind",
                "127.0.0.1",
                "--port",
                str(port),
                "--dir",
                str(self.workdir / "data"),
                "--appendonly",
                "yes",
                "--appendfsync",
                "everysec",
                # The AOF is the durability under test; no RDB snapshots forking on the side.
                "--save",
                "",
                "--protected-mode",
                "no",
                "--daemonize",
                "no",
            ],
            self.workdir / "redis.log",
            port,
        )
        self.server.start()
        self.endpoint = f"redis://127.0.0.1:{port}"
        self._wait_loaded()

    def _wait_loaded(self, timeout: float = 120.0) -> None:
        client = redis.Redis.from_url(self.endpoint, socket_timeout=5)
        deadline = time.monotonic() + timeout
        try:
            while True:
                try:
                    client.ping()  # answers LOADING while it replays the AOF
                    return
                except (redis.BusyLoadingError, redis.ConnectionError):
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.05)
        finally:
            client.close()

    def create_stream(self, name: str, partitions: int) -> None:
        # A stream is one key: Redis has no partitions. The group lets XREADGROUP read it.
        client = redis.Redis.from_url(self.endpoint)
        try:
            client.xgroup_create(name, "bench", id="0", mkstream=True)
        finally:
            client.close()

    def stored(self, stream: str) -> int:
        client = redis.Redis.from_url(self.endpoint)
        try:
            return int(client.xlen(stream))
        finally:
            client.close()

    def kill_leader(self, stream: str) -> None:
        self.server.kill()
        self.server.start()

    def server_pids(self) -> list[int]:
        server = getattr(self, "server", None)
        return [server.pid] if server is not None and server.alive else []

    def _stop_servers(self) -> list[int]:
        server = getattr(self, "server", None)
        code = server.stop() if server is not None else None
        return [] if code is None else [code]
