"""ZooKeeperServer: a standalone ZooKeeper (Debian's zookeeper package) on a 127.0.0.1 port.

Started as Debian's init script starts it (QuorumPeerMain with the package's jar) with a small
zoo.cfg of its own: tickTime, dataDir, clientPort, clientPortAddress=127.0.0.1, the admin
server off and the four-letter words on, so `ruok` tells when it serves.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

from samsa.local_cluster.ports import free_port

MAIN_CLASS = "org.apache.zookeeper.server.quorum.QuorumPeerMain"
# Debian's layout; ZOOKEEPER_CLASSPATH overrides it (another distribution, a tarball).
DEBIAN_CLASSPATH = ("/etc/zookeeper/conf", "/usr/share/java/zookeeper.jar")
INSTALL_HINT = (
    "ZooKeeper is not installed: on Debian or Ubuntu run `sudo apt-get install zookeeper "
    "default-jre-headless` (or `make setup`), or point ZOOKEEPER_CLASSPATH at its jars"
)


class ZooKeeperNotInstalled(RuntimeError):
    pass


def zookeeper_classpath() -> str:
    override = os.environ.get("ZOOKEEPER_CLASSPATH")
    if override:
        return override
    if shutil.which("java") is None or not Path(DEBIAN_CLASSPATH[1]).exists():
        raise ZooKeeperNotInstalled(INSTALL_HINT)
    return ":".join(DEBIAN_CLASSPATH)


def four_letter_word(port: int, word: str, timeout: float = 1.0) -> str | None:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
            s.sendall(word.encode())
            chunks = []
            while True:
                data = s.recv(4096)
                if not data:
                    break
                chunks.append(data)
            return b"".join(chunks).decode(errors="replace")
    except OSError:
        return None


class ZooKeeperServer:
    """One ZooKeeper process with its data in ``data_dir``; its pid is kept in a file there
    so that another process (``samsa local down``) can stop it."""

    def __init__(self, data_dir: Path, port: int | None = None, tick_time_ms: int = 500) -> None:
        self.data_dir = Path(data_dir)
        self.port = port or free_port()
        self.tick_time_ms = tick_time_ms
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def connect_string(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def pid_file(self) -> Path:
        return self.data_dir / "zookeeper.pid"

    def start(self, timeout: float = 30.0) -> ZooKeeperServer:
        classpath = zookeeper_classpath()
        (self.data_dir / "data").mkdir(parents=True, exist_ok=True)
        cfg = self.data_dir / "zoo.cfg"
        cfg.write_text(
            f"tickTime={self.tick_time_ms}\n"
            f"dataDir={(self.data_dir / 'data').resolve()}\n"
            f"clientPort={self.port}\n"
            "clientPortAddress=127.0.0.1\n"
            "admin.enableServer=false\n"
            "4lw.commands.whitelist=*\n"
            # Sessions as short as two ticks, so tests can expire them quickly.
            "minSessionTimeout=1000\n"
            "maxSessionTimeout=60000\n"
        )
        log = (self.data_dir / "zookeeper.log").open("ab")
        self.process = subprocess.Popen(
            [
                "java",
                "-Xmx256m",
                "-XX:+UseSerialGC",
                f"-Dzookeeper.log.dir={self.data_dir.resolve()}",
                "-cp",
                classpath,
                MAIN_CLASS,
                str(cfg.resolve()),
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        log.close()
        self.pid_file.write_text(str(self.process.pid))
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(
                    f"ZooKeeper exited with status {self.process.returncode}; "
                    f"see {self.data_dir / 'zookeeper.log'}"
                )
            if self.ruok():
                return self
            time.sleep(0.05)
        self.stop()
        raise TimeoutError(f"ZooKeeper did not answer on port {self.port} within {timeout:.0f} s")

    def ruok(self) -> bool:
        return four_letter_word(self.port, "ruok", 0.5) == "imok"

    def stop(self, timeout: float = 10.0) -> None:
        process = self.process
        if process is None:
            return
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout)
        self.process = None
        with contextlib.suppress(FileNotFoundError):
            self.pid_file.unlink()

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGKILL)
            self.process.wait(10)

    def __enter__(self) -> ZooKeeperServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
