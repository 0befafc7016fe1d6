"""NATS JetStream as a system under test: three clustered nats-server processes (Debian's),
one stream with 3 replicas on file storage."""

from __future__ import annotations

import asyncio
import signal
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

import nats
from nats.js.api import StorageType, StreamConfig
from nats.js.client import JetStreamContext

from bench.procs import Server, free_port, require_binary
from bench.system import System

T = TypeVar("T")

CONFIG = """\
server_name: {name}
listen: 127.0.0.1:{port}
jetstream {{
  store_dir: "{store}"
  max_file_store: 64GB
  max_memory_store: 1GB
}}
cluster {{
  name: bench
  listen: 127.0.0.1:{cluster_port}
  routes: [{routes}]
}}
"""


class NatsJetStream(System):
    key = "nats"
    name = "NATS JetStream"
    topology = "3 servers, stream R=3, file storage"
    recovery = "failover"
    client = "nats-py, pipelined async publish acks, push consumer"
    size = 3

    def start(self) -> None:
        binary = require_binary("nats-server")
        ports = [free_port() for _ in range(self.size)]
        cluster_ports = [free_port() for _ in range(self.size)]
        self.servers: dict[str, Server] = {}
        for i in range(self.size):
            name = f"n{i + 1}"
            routes = ", ".join(
                f"nats://127.0.0.1:{p}" for j, p in enumerate(cluster_ports) if j != i
            )
            conf = self.workdir / f"{name}.conf"
            conf.write_text(
                CONFIG.format(
                    name=name,
                    port=ports[i],
                    store=self.workdir / name,
                    cluster_port=cluster_ports[i],
                    routes=routes,
                )
            )
            # nats-server exits 1 on SIGTERM and 0 on SIGINT, shutting down cleanly on both.
            self.servers[name] = Server(
                f"nats-server {name}",
                [binary, "-c", str(conf)],
                self.workdir / f"{name}.log",
                ports[i],
                stop_signal=signal.SIGINT,
            )
        for server in self.servers.values():
            server.start()
        self.endpoint = ",".join(f"nats://127.0.0.1:{p}" for p in ports)

    async def _jetstream(
        self, op: Callable[[JetStreamContext], Awaitable[T]], patience: float = 60.0
    ) -> T:
        nc = await nats.connect(self.endpoint.split(","), connect_timeout=5)
        try:
            js = nc.jetstream(timeout=5)
            deadline = time.monotonic() + patience
            while True:
                try:
                    return await op(js)
                except Exception:
                    # A cluster just up (or just failed over) elects its meta leader first.
                    if time.monotonic() > deadline:
                        raise
                    await asyncio.sleep(0.2)
        finally:
            await nc.close()

    def create_stream(self, name: str, partitions: int) -> None:
        config = StreamConfig(
            name=name, subjects=[name], num_replicas=self.size, storage=StorageType.FILE
        )

        async def create(js: JetStreamContext) -> None:
            await js.add_stream(config)
            info = await js.stream_info(name)
            if info.cluster is None or info.cluster.leader is None:
                raise RuntimeError("no stream leader yet")

        asyncio.run(self._jetstream(create))

    def stream_leader(self, stream: str) -> str:
        async def leader(js: JetStreamContext) -> str:
            info = await js.stream_info(stream)
            if info.cluster is None or info.cluster.leader is None:
                raise RuntimeError("no stream leader")
            return info.cluster.leader

        return str(asyncio.run(self._jetstream(leader)))

    def stored(self, stream: str) -> int:
        async def count(js: JetStreamContext) -> int:
            return int((await js.stream_info(stream)).state.messages)

        return int(asyncio.run(self._jetstream(count)))

    def kill_leader(self, stream: str) -> None:
        self.servers[self.stream_leader(stream)].kill()

    def server_pids(self) -> list[int]:
        return [s.pid for s in getattr(self, "servers", {}).values() if s.alive]

    def _stop_servers(self) -> list[int]:
        codes = [s.stop() for s in getattr(self, "servers", {}).values()]
        return [c for c in codes if c is not None]
