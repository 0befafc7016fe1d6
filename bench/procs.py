"""Server processes the harness starts, kills and stops, and their CPU time read from /proc."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

from samsa.local_cluster.ports import free_port as free_port

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def require_binary(name: str) -> str:
    """The path of a server binary `make setup` installs, or a clear error."""
    path = shutil.which(name)
    if path is None:
        raise RuntimeError(f"{name} is not installed: run `make setup`")
    return path


def cpu_seconds(pid: int) -> float:
    """User plus system CPU of a live process; 0 once it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def port_open(port: int) -> bool:
    with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.5):
        return True
    return False


def terminate(proc: subprocess.Popen, timeout: float = 30.0) -> int:
    """SIGTERM, then SIGKILL after `timeout`; the exit status."""
    proc.send_signal(signal.SIGTERM)
    try:
        return proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        return proc.wait()


def wait_port(port: int, timeout: float = 30.0, proc: subprocess.Popen | None = None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"the process exited with {proc.returncode} before listening")
        if port_open(port):
            return
        time.sleep(0.05)
    raise TimeoutError(f"nothing listens on 127.0.0.1:{port} after {timeout}s")


def pid_listening_on(port: int) -> int | None:
    """The process holding a TCP LISTEN socket on 127.0.0.1:port (or any address), from /proc.

    How the harness finds a broker it did not start itself, e.g. one of `samsa local up`'s.
    """
    inodes: set[str] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError):
            for line in Path(table).read_text().splitlines()[1:]:
                cols = line.split()
                local, state, inode = cols[1], cols[3], cols[9]
                if state == "0A" and int(local.rsplit(":", 1)[1], 16) == port:
                    inodes.add(f"socket:[{inode}]")
    if not inodes:
        return None
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            for fd in (proc / "fd").iterdir():
                with contextlib.suppress(OSError):
                    if os.readlink(fd) in inodes:
                        return int(proc.name)
    return None


class Server:
    """One server process: its output goes to a log file beside its data, for post-mortems."""

    def __init__(
        self, name: str, cmd: list[str], log: Path, port: int, stop_signal: int = signal.SIGTERM
    ) -> None:
        self.name = name
        self.stop_signal = stop_signal
        self.cmd = cmd
        self.log = log
        self.port = port
        self.proc: subprocess.Popen | None = None

    def start(self, timeout: float = 30.0) -> None:
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(
                self.cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
            )
        try:
            wait_port(self.port, timeout, self.proc)
        except (RuntimeError, TimeoutError) as exc:
            tail = self.log.read_text(errors="replace")[-2000:]
            self.kill()
            raise RuntimeError(f"{self.name} did not start: {exc}\n{tail}") from None

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self) -> None:
        """SIGKILL, as a crash would."""
        if self.alive:
            assert self.proc is not None
            self.proc.kill()
            self.proc.wait()

    def stop(self, timeout: float = 30.0) -> int | None:
        """Ask it to shut down and wait; the exit code, or None if it had already been killed."""
        if not self.alive:
            return None
        assert self.proc is not None
        self.proc.send_signal(self.stop_signal)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            return -signal.SIGKILL
