"""A Samsa cluster whose nodes each run in a network namespace: ZooKeeper in "zk", broker i
in "b<i>", each binding and advertising its namespace's address, so that cuts between the
namespaces (chaos/netns.py) are partitions between the processes.

The seam for the campaign's cluster is two functions, ``zookeeper_argv`` and ``broker_argv``:
the commands to run, which ``Network.wrap`` puts in a node's namespace, given the node's
address. ``NetnsCluster`` is the small driver the tests use around them.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType

from kazoo.client import KazooClient

from chaos.faults.base import Network
from chaos.netns import broker_node
from samsa.local_cluster.cluster import readiness
from samsa.local_cluster.zookeeper import MAIN_CLASS, zookeeper_classpath
from samsa.testing.cluster import FAST, REPLICATED

ZOOKEEPER_PORT = 2181
BROKER_PORT = 9092
HTTP_PORT = 8080


def zookeeper_argv(data_dir: Path, address: str, tick_time_ms: int = 500) -> list[str]:
    """ZooKeeper serving ``address``:2181, its data and zoo.cfg in ``data_dir``."""
    (data_dir / "data").mkdir(parents=True, exist_ok=True)
    cfg = data_dir / "zoo.cfg"
    cfg.write_text(
        f"tickTime={tick_time_ms}\n"
        f"dataDir={(data_dir / 'data').resolve()}\n"
        f"clientPort={ZOOKEEPER_PORT}\n"
        f"clientPortAddress={address}\n"
        "admin.enableServer=false\n"
        "4lw.commands.whitelist=*\n"
        "minSessionTimeout=1000\n"
        "maxSessionTimeout=60000\n"
    )
    return [
        "java",
        "-Xmx256m",
        "-XX:+UseSerialGC",
        f"-Dzookeeper.log.dir={data_dir.resolve()}",
        "-cp",
        zookeeper_classpath(),
        MAIN_CLASS,
        str(cfg.resolve()),
    ]


def broker_argv(
    broker_id: int,
    data_dir: Path,
    address: str,
    zookeeper_connect: str,
    overrides: Mapping[str, str],
    python: str = sys.executable,
) -> list[str]:
    """A broker listening (and so advertising) ``address``:9092, its side port on :8080."""
    props = {"zookeeper.connect": zookeeper_connect, "broker.id": str(broker_id), **overrides}
    argv = [python, "-m", "samsa.cli", "broker", "--data-dir", str(data_dir)]
    argv += ["--listen", f"{address}:{BROKER_PORT}", "--http", f"{address}:{HTTP_PORT}"]
    for key, value in props.items():
        argv += ["--override", f"{key}={value}"]
    return argv


def ruok(address: str, timeout: float = 1.0) -> bool:
    try:
        with socket.create_connection((address, ZOOKEEPER_PORT), timeout=timeout) as s:
            s.sendall(b"ruok")
            return s.recv(16) == b"imok"
    except OSError:
        return False


class NetnsCluster:
    """ZooKeeper and ``brokers`` broker processes in ``network``'s namespaces (FAST and
    REPLICATED settings of samsa.testing.cluster, then ``overrides``), their files under
    ``data_dir``; a context manager that stops them all on exit. It is also the campaign's
    ``Environment`` (chaos/faults/base.py) for such a cluster."""

    def __init__(
        self,
        network: Network,
        data_dir: Path,
        brokers: int = 3,
        overrides: Mapping[str, str] | None = None,
    ) -> None:
        self.network = network
        self.root = Path(data_dir)
        self.size = brokers
        self.overrides = {**FAST, **REPLICATED, **(overrides or {})}
        self._zookeeper: subprocess.Popen[bytes] | None = None
        self._brokers: dict[int, subprocess.Popen[bytes]] = {}

    # ------------------------------------------------------------------ addresses

    @property
    def brokers(self) -> list[int]:
        return list(range(self.size))

    @property
    def zookeeper_connect(self) -> str:
        return f"{self.network.address('zk')}:{ZOOKEEPER_PORT}"

    def bootstrap(self, broker_id: int) -> str:
        return f"{self.network.address(broker_node(broker_id))}:{BROKER_PORT}"

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(self.bootstrap(b) for b in self.brokers)

    def broker_dir(self, broker_id: int) -> Path:
        return self.root / f"broker-{broker_id}"

    def data_dir(self, broker: int) -> Path:
        return self.broker_dir(broker)

    def clock_file(self, broker: int) -> Path:
        return self.root / f"broker-{broker}.clock"

    @property
    def timeouts(self) -> Mapping[str, int]:
        keys = ("zookeeper.session.timeout.ms", "replica.lag.time.max.ms")
        return {k: int(self.overrides[k]) for k in keys if k in self.overrides}

    def log_path(self, broker_id: int) -> Path:
        return self.root / f"broker-{broker_id}.log"

    # ------------------------------------------------------------------ processes

    def _spawn(
        self, node: str, argv: list[str], log: Path, env: Mapping[str, str] | None = None
    ) -> subprocess.Popen[bytes]:
        with log.open("ab") as out:
            return subprocess.Popen(
                self.network.wrap(node, argv),
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                env={**os.environ, **(env or {})},
            )

    def start_zookeeper(self, timeout: float = 60.0) -> None:
        zk_dir = self.root / "zookeeper"
        zk_dir.mkdir(parents=True, exist_ok=True)
        address = self.network.address("zk")
        argv = zookeeper_argv(zk_dir, address)
        self._zookeeper = self._spawn("zk", argv, zk_dir / "zookeeper.log")
        deadline = time.monotonic() + timeout
        while not ruok(address):
            if self._zookeeper.poll() is not None:
                raise RuntimeError(f"ZooKeeper exited; see {zk_dir / 'zookeeper.log'}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"ZooKeeper did not answer at {address} in {timeout:.0f} s")
            time.sleep(0.05)

    @property
    def zookeeper_pid(self) -> int:
        assert self._zookeeper is not None
        return self._zookeeper.pid

    def stop_zookeeper(self) -> None:
        proc, self._zookeeper = self._zookeeper, None
        if proc is not None and proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)

    def restart_zookeeper(self) -> None:
        self.stop_zookeeper()
        self.start_zookeeper()

    def start_broker(self, broker_id: int) -> None:
        node = broker_node(broker_id)
        self.broker_dir(broker_id).mkdir(parents=True, exist_ok=True)
        argv = broker_argv(
            broker_id,
            self.broker_dir(broker_id),
            self.network.address(node),
            self.zookeeper_connect,
            {"offsets.topic.replication.factor": str(min(3, self.size)), **self.overrides},
        )
        clock = {"SAMSA_CLOCK_OFFSET_FILE": str(self.clock_file(broker_id))}
        self._brokers[broker_id] = self._spawn(node, argv, self.log_path(broker_id), clock)

    def broker_pid(self, broker_id: int) -> int | None:
        proc = self._brokers.get(broker_id)
        return proc.pid if proc is not None and proc.poll() is None else None

    def kill_broker(self, broker_id: int) -> None:
        proc = self._brokers.get(broker_id)
        if proc is not None and proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGCONT)
                proc.kill()
            proc.wait(10)

    def stop_broker(self, broker_id: int, timeout: float = 10.0) -> None:
        """SIGTERM (a controlled shutdown), then SIGKILL if it is not gone in time."""
        proc = self._brokers.get(broker_id)
        if proc is None or proc.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, signal.SIGCONT)
            proc.terminate()
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill_broker(broker_id)

    def wait_ready(self, timeout: float = 120.0, brokers: list[int] | None = None) -> None:
        wanted = self.brokers if brokers is None else brokers
        deadline = time.monotonic() + timeout
        while True:
            pending = []
            for b in wanted:
                if self.broker_pid(b) is None:
                    raise RuntimeError(f"broker {b} exited; see {self.log_path(b)}")
                ok, why = readiness(HTTP_PORT, host=self.network.address(broker_node(b)))
                if not ok:
                    pending.append(f"broker {b}: {why}")
            if not pending:
                return
            if time.monotonic() > deadline:
                raise TimeoutError("cluster not ready: " + "; ".join(pending))
            time.sleep(0.1)

    def start(self, timeout: float = 120.0) -> NetnsCluster:
        self.root.mkdir(parents=True, exist_ok=True)
        self.start_zookeeper()
        for b in self.brokers:
            self.start_broker(b)
        self.wait_ready(timeout)
        return self

    def stop(self) -> None:
        for b in self.brokers:
            self.kill_broker(b)
        self.stop_zookeeper()

    def __enter__(self) -> NetnsCluster:
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # ------------------------------------------------------------------ ZooKeeper's view

    def zookeeper(self) -> KazooClient:
        """A started client from the root namespace; the caller stops it."""
        client = KazooClient(hosts=self.zookeeper_connect, timeout=10)
        client.start(timeout=30)
        return client

    def controller(self) -> int:
        with contextlib.closing(_Zk(self)) as zk:
            data = zk.get("/controller")
        return -1 if data is None else int(json.loads(data)["brokerid"])

    def partition_state(self, topic: str, partition: int) -> dict[str, object]:
        """{"leader", "leader_epoch", "isr", ...} as the controller wrote it in ZooKeeper."""
        with contextlib.closing(_Zk(self)) as zk:
            data = zk.get(f"/brokers/topics/{topic}/partitions/{partition}/state")
        if data is None:
            raise KeyError(f"{topic}-{partition} has no state in ZooKeeper")
        state: dict[str, object] = json.loads(data)
        return state

    def registered_brokers(self) -> list[int]:
        with contextlib.closing(_Zk(self)) as zk:
            return sorted(int(b) for b in zk.children("/brokers/ids"))


class _Zk:
    """One short-lived ZooKeeper read session."""

    def __init__(self, cluster: NetnsCluster) -> None:
        self.client = cluster.zookeeper()

    def get(self, path: str) -> bytes | None:
        from kazoo.exceptions import NoNodeError

        try:
            return bytes(self.client.get(path)[0])
        except NoNodeError:
            return None

    def children(self, path: str) -> list[str]:
        return list(self.client.get_children(path))

    def close(self) -> None:
        self.client.stop()
        self.client.close()
