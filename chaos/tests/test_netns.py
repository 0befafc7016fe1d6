"""The namespaces' network with real TCP: nodes reach each other and the root namespace, a
partition drops packets both ways and silently (connects time out), a one-way cut lets an
established connection carry data one way only, a delay slows every round trip, and healing
undoes all of it; nothing is left behind, even when the body fails."""

from __future__ import annotations

import os
import queue
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from chaos.netns import PREFIX, Netns, NetnsUnavailable, sweep_stale, unavailable_reason

PEER = str(Path(__file__).with_name("tcp_peer.py"))
PORT = 7000
CONNECT = (
    "import socket,sys\n"
    "try:\n"
    " socket.create_connection((sys.argv[1],int(sys.argv[2])),timeout=float(sys.argv[3]))\n"
    " print('ok')\n"
    "except OSError as e:\n"
    " print(type(e).__name__)\n"
)


def require_netns() -> None:
    reason = unavailable_reason()
    if reason is not None:
        pytest.skip(f"NETWORK NAMESPACES UNAVAILABLE, network faults not tested: {reason}")


class Peer:
    """A tcp_peer.py process whose output lines arrive on a queue."""

    def __init__(self, argv: list[str]) -> None:
        self.proc = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            bufsize=1,
        )
        self.lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line.rstrip("\n"))

    def send(self, line: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()

    def expect(self, wanted: str, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        seen = []
        while time.monotonic() < deadline:
            try:
                line = self.lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                break
            if line == wanted:
                return
            seen.append(line)
        raise AssertionError(f"{wanted!r} not received within {timeout} s (saw {seen})")

    def nothing_within(self, seconds: float) -> None:
        """Nothing arrives for ``seconds``: the absence a cut is meant to cause."""
        try:
            line = self.lines.get(timeout=seconds)
        except queue.Empty:
            return
        raise AssertionError(f"{line!r} crossed a cut")

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait(10)


@pytest.fixture
def net() -> Iterator[Netns]:
    require_netns()
    with Netns(["zk", "b0", "b1"]) as network:
        yield network


@pytest.fixture
def echo_servers(net: Netns) -> Iterator[None]:
    peers = [
        Peer(net.wrap(node, [sys.executable, PEER, "listen", str(PORT), "--echo"]))
        for node in net.nodes()
    ]
    try:
        for p in peers:
            p.expect("listening")
        yield
    finally:
        for p in peers:
            p.stop()


def connects(net: Netns, source: str | None, target: str, timeout: float = 1.5) -> str:
    """'ok', or the error a connect from ``source`` (None: the root namespace) ended with."""
    argv = [sys.executable, "-c", CONNECT, net.address(target), str(PORT), str(timeout)]
    if source is not None:
        argv = net.wrap(source, argv)
    return subprocess.run(argv, capture_output=True, text=True, timeout=60).stdout.strip()


def test_every_node_reaches_every_other_and_the_root_namespace(net: Netns, echo_servers: None):
    addresses = {net.address(n) for n in net.nodes()}
    assert len(addresses) == 3
    for target in net.nodes():
        assert connects(net, None, target) == "ok"
        for source in net.nodes():
            assert connects(net, source, target) == "ok", (source, target)


def test_a_partition_drops_both_ways_silently_and_heal_restores(net: Netns, echo_servers: None):
    net.partition(["b0"], ["b1", "zk"])
    # Dropped, not refused: the connects time out, as across a real partition.
    assert connects(net, "b0", "b1") == "TimeoutError"
    assert connects(net, "b1", "b0") == "TimeoutError"
    assert connects(net, "b0", "zk") == "TimeoutError"
    assert connects(net, "zk", "b0") == "TimeoutError"
    # The rest of the network, and clients in the root namespace, are untouched.
    assert connects(net, "b1", "zk") == "ok"
    assert connects(net, None, "b0") == "ok"
    assert connects(net, "b0", "b0") == "ok"
    net.heal()
    assert net.cuts() == set()
    for source, target in [("b0", "b1"), ("b1", "b0"), ("b0", "zk"), ("zk", "b0")]:
        assert connects(net, source, target) == "ok", (source, target)


def test_a_one_way_cut_carries_an_established_connection_one_way_only(net: Netns):
    server = Peer(net.wrap("b0", [sys.executable, PEER, "listen", str(PORT)]))
    client = None
    try:
        server.expect("listening")
        client = Peer(net.wrap("b1", [sys.executable, PEER, "connect", net.address("b0"), "7000"]))
        client.expect("connected")
        server.expect("accepted")
        client.send("before")
        server.expect("before")

        net.one_way("b1", "b0")
        client.send("from b1")
        server.send("from b0")
        client.expect("from b0")  # b0 -> b1 still flows
        server.nothing_within(3.0)  # b1 -> b0 is dropped
        net.heal()
        # TCP retransmits what was dropped once the way is open again.
        server.expect("from b1", timeout=60)
    finally:
        server.stop()
        if client is not None:
            client.stop()


def round_trips(net: Netns, node: str, count: int = 5) -> list[float]:
    """Seconds per line echoed by ``node``'s echo server, from the root namespace."""
    import socket

    times = []
    with socket.create_connection((net.address(node), PORT), timeout=30) as conn:
        reader = conn.makefile("r")
        for i in range(count):
            start = time.monotonic()
            conn.sendall(f"ping {i}\n".encode())
            assert reader.readline().strip() == f"ping {i}"
            times.append(time.monotonic() - start)
    return times


def test_a_delay_slows_every_round_trip_until_healed(net: Netns, echo_servers: None):
    assert statistics.median(round_trips(net, "b0")) < 0.15
    net.delay("b0", 200, 20)
    assert net.delayed() == ["b0"]
    # The echo's reply leaves b0 and waits 200 +- 20 ms: no round trip can be quicker.
    assert min(round_trips(net, "b0")) >= 0.18
    # The other nodes are not slowed.
    assert statistics.median(round_trips(net, "b1")) < 0.15
    net.heal()
    assert net.delayed() == []
    assert statistics.median(round_trips(net, "b0")) < 0.15


def _leftovers(tag: str) -> tuple[list[str], list[str]]:
    namespaces = [
        line.split()[0]
        for line in subprocess.run(
            ["ip", "netns", "list"], capture_output=True, text=True
        ).stdout.splitlines()
        if f"-{tag}-" in line
    ]
    links = [
        line
        for line in subprocess.run(
            ["ip", "-o", "link"], capture_output=True, text=True
        ).stdout.splitlines()
        if f"c{tag}" in line
    ]
    return namespaces, links


def test_everything_is_removed_on_exit_even_when_the_body_fails():
    require_netns()
    network = Netns(["zk", "b0"])
    with pytest.raises(RuntimeError, match="boom"), network:
        assert _leftovers(network.tag)[0]
        sleeper = subprocess.Popen(network.wrap("b0", ["sleep", "600"]))
        network.partition(["b0"], ["zk"])
        network.delay("zk", 50)
        raise RuntimeError("boom")
    assert _leftovers(network.tag) == ([], [])
    assert sleeper.wait(10) is not None  # what ran inside was killed


def test_names_fit_linux_limits():
    network = Netns(["zk", "b0", "b10", "abcdef"])
    for node in network.nodes():
        assert len(network._root_link(node) + "i") <= 15
        assert network.namespace(node).startswith(PREFIX)
    assert len(network.bridge) <= 15
    with pytest.raises(ValueError):
        Netns(["b0", "b0"])


def test_unavailable_is_reported_not_crashed(monkeypatch: pytest.MonkeyPatch):
    """Without `ip` the network is reported unavailable with its reason."""
    monkeypatch.setenv("PATH", "/nonexistent")
    assert unavailable_reason() is not None
    with pytest.raises(NetnsUnavailable), Netns(["b0"]):
        pass


def test_what_a_killed_run_left_is_swept():
    require_netns()
    gone = subprocess.Popen(["true"])
    gone.wait()
    stale = f"{PREFIX}{gone.pid}-fffff-b0"
    subprocess.run(["ip", "netns", "add", stale], check=True)
    mine = f"{PREFIX}{os.getpid()}-eeeee-b0"  # this process is alive: left alone
    subprocess.run(["ip", "netns", "add", mine], check=True)
    try:
        assert stale in sweep_stale()
        names = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
        assert stale not in names and mine in names
    finally:
        subprocess.run(["ip", "netns", "del", stale], capture_output=True)
        subprocess.run(["ip", "netns", "del", mine], capture_output=True)
