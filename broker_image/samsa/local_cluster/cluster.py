"""LocalCluster: a ZooKeeper and N broker processes on 127.0.0.1, kept in one directory.

The directory holds ZooKeeper's data, each broker's data (``broker-<id>/``), their logs and a
``cluster.json`` with ports and pids, so that ``samsa local down`` and ``status`` in another
process find them, and ``up`` after ``down`` brings back the same cluster with its data.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from dataclasses import asdict, dataclass, field
from pathlib import Path

from samsa.local_cluster.zookeeper import ZooKeeperServer, free_port

STATE_FILE = "cluster.json"


@dataclass
class BrokerProcess:
    broker_id: int
    port: int
    http_port: int
    pid: int = 0

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"


@dataclass
class ClusterState:
    zookeeper_port: int
    zookeeper_pid: int = 0
    brokers: list[BrokerProcess] = field(default_factory=list)
    overrides: dict[str, str] = field(default_factory=dict)


def pid_alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie child still answers kill 0: ask /proc whether it is really running.
    with contextlib.suppress(OSError):
        stat = Path(f"/proc/{pid}/stat").read_text()
        return stat.split(") ", 1)[1][:1] not in ("Z", "X")
    return True


def readiness(http_port: int, timeout: float = 1.0, host: str = "127.0.0.1") -> tuple[bool, str]:
    """A broker's /readyz on its side port: (ready, what it says)."""
    try:
        with urllib.request.urlopen(f"http://{host}:{http_port}/readyz", timeout=timeout) as r:
            return r.status == 200, r.read().decode(errors="replace").strip()
    except urllib.error.HTTPError as exc:
        return False, exc.read().decode(errors="replace").strip()
    except OSError as exc:
        return False, str(exc)


class LocalCluster:
    def __init__(
        self,
        data_dir: Path,
        brokers: int = 3,
        overrides: dict[str, str] | None = None,
        python: str = sys.executable,
    ) -> None:
        self.data_dir = Path(data_dir).resolve()
        self.size = brokers
        self.overrides = dict(overrides or {})
        self.python = python
        self.zookeeper: ZooKeeperServer | None = None
        self.state: ClusterState | None = None
        self._procs: dict[int, subprocess.Popen[bytes]] = {}

    # ------------------------------------------------------------------ state file

    @property
    def state_path(self) -> Path:
        return self.data_dir / STATE_FILE

    def load_state(self) -> ClusterState | None:
        try:
            raw = json.loads(self.state_path.read_text())
        except (OSError, ValueError):
            return None
        return ClusterState(
            zookeeper_port=int(raw["zookeeper_port"]),
            zookeeper_pid=int(raw.get("zookeeper_pid", 0)),
            brokers=[BrokerProcess(**b) for b in raw.get("brokers", [])],
            overrides=dict(raw.get("overrides", {})),
        )

    def save_state(self) -> None:
        assert self.state is not None
        self.data_dir.mkdir(parents=True, exist_ok=True)
        tmp = self.state_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(asdict(self.state), indent=1))
        os.replace(tmp, self.state_path)

    @property
    def bootstrap_servers(self) -> str:
        assert self.state is not None
        return ",".join(b.bootstrap for b in self.state.brokers)

    @property
    def zookeeper_connect(self) -> str:
        assert self.state is not None
        return f"127.0.0.1:{self.state.zookeeper_port}"

    # ------------------------------------------------------------------ up and down

    def up(self, timeout: float = 90.0) -> LocalCluster:
        """Start whatever is not running; return once every broker is ready."""
        previous = self.load_state()
        zk_port = previous.zookeeper_port if previous else free_port()
        if previous is not None and previous.zookeeper_pid and pid_alive(previous.zookeeper_pid):
            self.state = previous
        else:
            if previous is not None and not _port_free(zk_port):
                zk_port = free_port()
            self.zookeeper = ZooKeeperServer(self.data_dir / "zookeeper", zk_port).start()
            assert self.zookeeper.process is not None
            self.state = ClusterState(zk_port, self.zookeeper.process.pid)
            if previous is not None:
                self.state.brokers = previous.brokers
                self.state.overrides = previous.overrides
        self.state.overrides.update(self.overrides)
        known = {b.broker_id: b for b in self.state.brokers}
        for broker_id in range(self.size):
            if broker_id not in known:
                known[broker_id] = BrokerProcess(broker_id, free_port(), free_port())
        self.state.brokers = [known[i] for i in sorted(known)]
        self.save_state()
        for b in self.state.brokers:
            if not pid_alive(b.pid):
                self.start_broker(b.broker_id)
        self.wait_ready(timeout)
        return self

    def broker(self, broker_id: int) -> BrokerProcess:
        assert self.state is not None
        for b in self.state.brokers:
            if b.broker_id == broker_id:
                return b
        raise KeyError(f"no broker {broker_id} in this cluster")

    def broker_dir(self, broker_id: int) -> Path:
        return self.data_dir / f"broker-{broker_id}"

    def start_broker(self, broker_id: int) -> None:
        """Start (or restart) one broker process, on the ports it had."""
        assert self.state is not None
        b = self.broker(broker_id)
        if not _port_free(b.port):
            b.port = free_port()
        if not _port_free(b.http_port):
            b.http_port = free_port()
        props = {
            "zookeeper.connect": self.zookeeper_connect,
            "broker.id": str(broker_id),
            "offsets.topic.replication.factor": str(min(3, len(self.state.brokers))),
            **self.state.overrides,
        }
        cmd = [
            self.python,
            "-m",
            "samsa.cli",
            "broker",
            "--data-dir",
            str(self.broker_dir(broker_id)),
            "--listen",
            f"127.0.0.1:{b.port}",
            "--http",
            f"127.0.0.1:{b.http_port}",
        ]
        for key, value in props.items():
            cmd += ["--override", f"{key}={value}"]
        self.broker_dir(broker_id).mkdir(parents=True, exist_ok=True)
        with open(self.data_dir / f"broker-{broker_id}.log", "ab") as log:
            proc = subprocess.Popen(
                cmd,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        self._procs[broker_id] = proc
        b.pid = proc.pid
        self.save_state()

    def wait_ready(self, timeout: float = 90.0, brokers: list[int] | None = None) -> None:
        assert self.state is not None
        wanted = [b for b in self.state.brokers if brokers is None or b.broker_id in brokers]
        deadline = time.monotonic() + timeout
        while True:
            pending = []
            for b in wanted:
                if not pid_alive(b.pid):
                    raise RuntimeError(
                        f"broker {b.broker_id} exited; see "
                        f"{self.data_dir / f'broker-{b.broker_id}.log'}"
                    )
                ok, why = readiness(b.http_port)
                if not ok:
                    pending.append(f"broker {b.broker_id}: {why}")
            if not pending:
                return
            if time.monotonic() > deadline:
                raise TimeoutError("cluster not ready: " + "; ".join(pending))
            time.sleep(0.1)

    def signal_broker(self, broker_id: int, sig: int) -> None:
        os.kill(self.broker(broker_id).pid, sig)

    def kill_broker(self, broker_id: int) -> None:
        """kill -9, and reap it."""
        b = self.broker(broker_id)
        with contextlib.suppress(ProcessLookupError):
            os.kill(b.pid, signal.SIGKILL)
        self._reap(b, 10)

    def stop_broker(self, broker_id: int, timeout: float = 60.0) -> None:
        """SIGTERM (a controlled shutdown), then SIGKILL if it does not exit in time."""
        b = self.broker(broker_id)
        if not pid_alive(b.pid):
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(b.pid, signal.SIGCONT)
            os.kill(b.pid, signal.SIGTERM)
        if not self._reap(b, timeout):
            with contextlib.suppress(ProcessLookupError):
                os.kill(b.pid, signal.SIGKILL)
            self._reap(b, 10)

    def _reap(self, b: BrokerProcess, timeout: float) -> bool:
        proc = self._procs.get(b.broker_id)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if proc is not None and proc.pid == b.pid:
                if proc.poll() is not None:
                    return True
            elif not pid_alive(b.pid):
                return True
            time.sleep(0.05)
        return False

    def down(self, timeout: float = 60.0) -> None:
        """Stop the brokers (controlled shutdowns, one at a time), then ZooKeeper."""
        state = self.state or self.load_state()
        if state is None:
            return
        self.state = state
        for b in state.brokers:
            self.stop_broker(b.broker_id, timeout)
        if self.zookeeper is not None:
            self.zookeeper.stop()
        elif state.zookeeper_pid and pid_alive(state.zookeeper_pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(state.zookeeper_pid, signal.SIGTERM)
            deadline = time.monotonic() + 10
            while pid_alive(state.zookeeper_pid) and time.monotonic() < deadline:
                time.sleep(0.05)
            if pid_alive(state.zookeeper_pid):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(state.zookeeper_pid, signal.SIGKILL)
        state.zookeeper_pid = 0
        for b in state.brokers:
            b.pid = 0
        self.save_state()

    def status(self) -> list[tuple[str, int, int, bool, str]]:
        """(process, pid, port, running, readiness) for ZooKeeper and each broker."""
        state = self.state or self.load_state()
        if state is None:
            return []
        rows = [
            (
                "zookeeper",
                state.zookeeper_pid,
                state.zookeeper_port,
                pid_alive(state.zookeeper_pid),
                "",
            )
        ]
        for b in state.brokers:
            alive = pid_alive(b.pid)
            rows.append(
                (
                    f"broker {b.broker_id}",
                    b.pid,
                    b.port,
                    alive,
                    readiness(b.http_port)[1] if alive else "",
                )
            )
        return rows


def _port_free(port: int) -> bool:
    """Whether a broker could bind the port again; it binds with SO_REUSEADDR, so connections
    of its previous run in TIME_WAIT do not hold the port."""
    import socket

    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True
