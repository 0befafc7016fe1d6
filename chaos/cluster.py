"""ChaosCluster: the campaign's Environment, a real ZooKeeper (Debian's package) and 3 or 5
Samsa broker processes, replication factor 3, min.insync.replicas 2 and fast failure detection.

As root, each broker's data directory is a small tmpfs of its own, so that a fault can fill
it; the mounts are undone on ``close`` whatever happened. Each broker reads its clock offset
from a file of its own (env SAMSA_CLOCK_OFFSET_FILE).

Every command line passes through ``self.wrap(node, argv)`` and every node binds and advertises
``self.address(node)``; both ask ``network`` when one is plugged in (nodes "zk", "b0", "b1",
...), so that running the nodes in network namespaces changes nothing here but ``network``.
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

from chaos.faults.base import Network
from samsa.local_cluster.cluster import pid_alive, readiness
from samsa.local_cluster.zookeeper import MAIN_CLASS, free_port, zookeeper_classpath
from samsa.testing.cluster import FAST, REPLICATED

# Detection in a few seconds, but not so short that two busy cores look like failures. A pause
# past replica.lag.time.max.ms must fit within the session, pings (a third of the session
# apart) included, for a "long pause" to differ from a session expiry.
SESSION_TIMEOUT_MS = 7000
REPLICA_LAG_MS = 2000
OVERRIDES = {
    **FAST,
    **REPLICATED,
    "zookeeper.session.timeout.ms": str(SESSION_TIMEOUT_MS),
    "replica.lag.time.max.ms": str(REPLICA_LAG_MS),
    "unclean.leader.election.enable": "false",
    "log.cleaner.backoff.ms": "1000",
}
TMPFS_SIZE = "64m"


def _is_root() -> bool:
    return os.geteuid() == 0


def _mounted(path: Path) -> bool:
    target = str(path.resolve())
    with open("/proc/self/mounts") as mounts:
        return any(line.split()[1] == target for line in mounts)


class ChaosCluster:
    def __init__(
        self,
        root: Path,
        brokers: int = 3,
        overrides: Mapping[str, str] | None = None,
        tmpfs: bool | None = None,
        network: Network | None = None,
    ) -> None:
        self.root = Path(root).resolve()
        self.size = brokers
        self.overrides = {**OVERRIDES, **(overrides or {})}
        self.tmpfs = _is_root() if tmpfs is None else tmpfs
        self._network = network
        self._ports: dict[str, int] = {"zk": free_port()}
        self._http: dict[int, int] = {}
        for b in range(brokers):
            self._ports[f"b{b}"] = free_port()
            self._http[b] = free_port()
        self._procs: dict[int, subprocess.Popen[bytes]] = {}
        self._zk: subprocess.Popen[bytes] | None = None
        self._mounts: list[Path] = []

    # ------------------------------------------------------------------ the seam for netns

    def address(self, node: str) -> str:
        return self._network.address(node) if self._network is not None else "127.0.0.1"

    def wrap(self, node: str, argv: list[str]) -> list[str]:
        return self._network.wrap(node, argv) if self._network is not None else argv

    # ------------------------------------------------------------------ Environment

    @property
    def brokers(self) -> list[int]:
        return list(range(self.size))

    @property
    def network(self) -> Network | None:
        return self._network

    @property
    def timeouts(self) -> Mapping[str, int]:
        session = int(self.overrides["zookeeper.session.timeout.ms"])
        lag = int(self.overrides["replica.lag.time.max.ms"])
        return {
            "zookeeper.session.timeout.ms": session,
            "replica.lag.time.max.ms": lag,
            "detection.ms": max(session, lag),
        }

    def data_dir(self, broker: int) -> Path:
        return self.root / f"broker-{broker}" / "data"

    def clock_file(self, broker: int) -> Path:
        return self.root / f"broker-{broker}" / "clock-offset-ms"

    def broker_pid(self, broker: int) -> int | None:
        proc = self._procs.get(broker)
        if proc is None or proc.poll() is not None:
            return None
        return proc.pid

    @property
    def zookeeper_pid(self) -> int:
        return self._zk.pid if self._zk is not None and self._zk.poll() is None else 0

    @property
    def zookeeper_connect(self) -> str:
        return f"{self.address('zk')}:{self._ports['zk']}"

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(self.bootstrap(b) for b in self.brokers)

    def bootstrap(self, broker: int) -> str:
        return f"{self.address(f'b{broker}')}:{self._ports[f'b{broker}']}"

    def controller(self) -> int:
        from kazoo.client import KazooClient

        zk = KazooClient(hosts=self.zookeeper_connect, timeout=3.0)
        try:
            zk.start(timeout=3.0)
            data, _ = zk.get("/controller")
            return int(json.loads(data).get("brokerid", -1))
        except Exception:
            return -1
        finally:
            with contextlib.suppress(Exception):
                zk.stop()
                zk.close()

    # ------------------------------------------------------------------ ZooKeeper

    def start_zookeeper(self, timeout: float = 60.0) -> None:
        if self.zookeeper_pid:
            return
        home = self.root / "zookeeper"
        (home / "data").mkdir(parents=True, exist_ok=True)
        cfg = home / "zoo.cfg"
        cfg.write_text(
            "tickTime=500\n"
            f"dataDir={(home / 'data').resolve()}\n"
            f"clientPort={self._ports['zk']}\n"
            f"clientPortAddress={self.address('zk')}\n"
            "admin.enableServer=false\n"
            "4lw.commands.whitelist=*\n"
            "minSessionTimeout=1000\n"
            "maxSessionTimeout=60000\n"
        )
        argv = [
            "java",
            "-Xmx256m",
            "-XX:+UseSerialGC",
            f"-Dzookeeper.log.dir={home}",
            "-cp",
            zookeeper_classpath(),
            MAIN_CLASS,
            str(cfg),
        ]
        with (home / "zookeeper.log").open("ab") as log:
            self._zk = subprocess.Popen(
                self.wrap("zk", argv),
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        deadline = time.monotonic() + timeout
        while not self._zk_ok():
            if self._zk.poll() is not None:
                raise RuntimeError(f"ZooKeeper exited; see {home / 'zookeeper.log'}")
            if time.monotonic() > deadline:
                raise TimeoutError("ZooKeeper did not answer ruok")
            time.sleep(0.1)

    def _zk_ok(self) -> bool:
        try:
            with socket.create_connection((self.address("zk"), self._ports["zk"]), 1.0) as s:
                s.sendall(b"ruok")
                return s.recv(16) == b"imok"
        except OSError:
            return False

    def kill_zookeeper(self) -> None:
        if self._zk is not None and self._zk.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self._zk.pid, signal.SIGCONT)
                os.kill(self._zk.pid, signal.SIGKILL)
            self._zk.wait(30)

    def restart_zookeeper(self) -> None:
        """Start ZooKeeper again on its port and data (killing it first if it runs)."""
        self.kill_zookeeper()
        self.start_zookeeper()

    # ------------------------------------------------------------------ brokers

    def _mount(self, broker: int) -> None:
        data = self.data_dir(broker)
        data.mkdir(parents=True, exist_ok=True)
        if self.tmpfs and not _mounted(data):
            subprocess.run(
                ["mount", "-t", "tmpfs", "-o", f"size={TMPFS_SIZE}", "tmpfs", str(data)],
                check=True,
            )
            self._mounts.append(data)

    def start_broker(self, broker: int) -> None:
        if self.broker_pid(broker) is not None:
            return
        node = f"b{broker}"
        self._mount(broker)
        clock = self.clock_file(broker)
        if not clock.exists():
            clock.write_text("0\n")
        props = {
            "zookeeper.connect": self.zookeeper_connect,
            "broker.id": str(broker),
            **self.overrides,
        }
        argv = [
            sys.executable,
            "-m",
            "samsa.cli",
            "broker",
            "--data-dir",
            str(self.data_dir(broker)),
            "--listen",
            self.bootstrap(broker),
            "--http",
            f"{self.address(node)}:{self._http[broker]}",
        ]
        for key, value in props.items():
            argv += ["--override", f"{key}={value}"]
        env = {**os.environ, "SAMSA_CLOCK_OFFSET_FILE": str(clock)}
        with (self.root / f"broker-{broker}" / "broker.log").open("ab") as log:
            self._procs[broker] = subprocess.Popen(
                self.wrap(node, argv),
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env,
                start_new_session=True,
            )

    def kill_broker(self, broker: int) -> None:
        proc = self._procs.get(broker)
        if proc is None or proc.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, signal.SIGCONT)
            os.kill(proc.pid, signal.SIGKILL)
        proc.wait(30)

    def ready(self, broker: int) -> bool:
        if self.broker_pid(broker) is None:
            return False
        return readiness(self._http[broker], host=self.address(f"b{broker}"))[0]

    def wait_ready(self, timeout: float = 120.0) -> None:
        deadline = time.monotonic() + timeout
        while True:
            for b in self.brokers:
                if self._procs.get(b) is not None and not pid_alive(self._procs[b].pid):
                    raise RuntimeError(f"broker {b} exited; see {self.root}/broker-{b}/broker.log")
            if all(self.ready(b) for b in self.brokers):
                return
            if time.monotonic() > deadline:
                raise TimeoutError("brokers not ready")
            time.sleep(0.2)

    # ------------------------------------------------------------------ lifetime

    def up(self, timeout: float = 120.0) -> ChaosCluster:
        self.root.mkdir(parents=True, exist_ok=True)
        try:
            self.start_zookeeper()
            for b in self.brokers:
                (self.root / f"broker-{b}").mkdir(parents=True, exist_ok=True)
                self.start_broker(b)
            self.wait_ready(timeout)
        except BaseException:
            self.close()
            raise
        return self

    def close(self) -> None:
        """Every process killed and every tmpfs unmounted, whatever state they were in."""
        for b in self.brokers:
            with contextlib.suppress(Exception):
                self.kill_broker(b)
        with contextlib.suppress(Exception):
            self.kill_zookeeper()
        for path in reversed(self._mounts):
            subprocess.run(["umount", "-l", str(path)], check=False)
        self._mounts.clear()

    def __enter__(self) -> ChaosCluster:
        return self.up()

    def __exit__(self, *exc: object) -> None:
        self.close()
