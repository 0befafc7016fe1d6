"""Nodes in network namespaces, and the cuts and delays between them (the campaign's
``Network``).

Each node ("zk", "b0", ...) gets a namespace of its own with one veth whose other end is a port
of a bridge in the root namespace; the bridge holds the subnet's first address, so that clients
in the root namespace reach every node, and nodes reach each other through it. Every name
carries a short random tag (and the namespaces the creating pid, so that a later run removes
what a killed one left), so that several tests run at once.

Cuts are policy-routing rules in the receiving namespace: ``from <source> iif eth0 blackhole``,
so that packets are dropped silently on arrival, as a partition does (senders see timeouts,
not errors). The local table's rule is moved behind them, or local delivery would win, and
neighbour entries are pinned, or the starved ARP would turn silence into EHOSTUNREACH. This
kernel has no netem: a delay redirects the node's egress (tc ``mirred``) through a veth pair
to a user-space delayer (chaos/netdelay.py).
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import random
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import TracebackType

from samsa.local_cluster.cluster import pid_alive

PREFIX = "samsa-chaos-"
CUT_PREF = 100
LOCAL_PREF = 1000
NODE_LINK = "eth0"
DELAY_IN, DELAY_OUT = "dly0", "dly1"
DELAYER = Path(__file__).with_name("netdelay.py")


def broker_node(broker_id: int) -> str:
    """The node name of a broker: "b0", "b1", ...; ZooKeeper's is "zk"."""
    return f"b{broker_id}"


ZOOKEEPER_NODE = "zk"


class NetnsUnavailable(RuntimeError):
    """Namespaces cannot be made here (no root, no CAP_NET_ADMIN, no iproute2)."""


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30)
    if check and proc.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {proc.stderr.strip()}")
    return proc


def unavailable_reason() -> str | None:
    """Why namespaces cannot be made here, or None when they can."""
    probe = f"{PREFIX}probe-{os.getpid()}-{random.randrange(1 << 24):06x}"
    try:
        proc = _ip("netns", "add", probe, check=False)
    except FileNotFoundError:
        return "iproute2's `ip` is not installed"
    if proc.returncode != 0:
        return f"`ip netns add` refused (needs root or CAP_NET_ADMIN): {proc.stderr.strip()}"
    _ip("netns", "del", probe, check=False)
    return None


def _set_offloads_off(namespace: str, link: str) -> None:
    """Checksum and segmentation offloads off (ethtool's ioctls; no ethtool binary here), so
    that frames redirected through ``link`` are complete when the delayer reads them."""
    code = (
        "import ctypes,fcntl,socket,struct,sys\n"
        "for cmd in (0x17,0x1f,0x24,0x19):\n"
        " b=ctypes.create_string_buffer(struct.pack('II',cmd,0))\n"
        " r=struct.pack('16sP',sys.argv[1].encode(),ctypes.addressof(b))+bytes(16)\n"
        " s=socket.socket(socket.AF_INET,socket.SOCK_DGRAM)\n"
        " fcntl.ioctl(s.fileno(),0x8946,r)\n"
    )
    proc = subprocess.run(
        ["ip", "netns", "exec", namespace, sys.executable, "-c", code, link],
        capture_output=True,
        text=True,
        timeout=30,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"offloads off on {link}: {proc.stderr.strip()}")


def sweep_stale() -> list[str]:
    """Remove namespaces (and their links) left by runs whose process is gone."""
    removed = []
    listing = _ip("netns", "list", check=False).stdout
    pattern = re.compile(rf"^{re.escape(PREFIX)}(\d+)-([0-9a-f]+)-(\S+)")
    tags = set()
    for line in listing.splitlines():
        m = pattern.match(line.strip())
        if not m or pid_alive(int(m.group(1))):
            continue
        name = line.split()[0]
        _kill_namespace_processes(name)
        _ip("netns", "del", name, check=False)
        tags.add(m.group(2))
        removed.append(name)
    for tag in tags:
        _ip("link", "del", f"c{tag}br", check=False)
    return removed


def _kill_namespace_processes(namespace: str, timeout: float = 10.0) -> None:
    """SIGKILL whatever still runs in a namespace of ours, and wait until it is gone (a
    process keeps a deleted namespace, and its links, alive)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        pids = [int(p) for p in _ip("netns", "pids", namespace, check=False).stdout.split()]
        if not pids:
            return
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.05)


def _taken_subnets() -> list[ipaddress.IPv4Network]:
    taken = []
    for line in _ip("-4", "route", "show", "table", "all", check=False).stdout.splitlines():
        first = line.split()[0] if line.split() else ""
        if first in ("default", "broadcast", "local"):
            first = line.split()[1] if first != "default" else ""
        with contextlib.suppress(ValueError):
            if first:
                taken.append(ipaddress.IPv4Network(first, strict=False))
    return taken


class Netns:
    """A ``Network`` (chaos/faults/base.py): one namespace per node, a bridge between them.

    A context manager: everything is removed on exit, whatever happened inside."""

    def __init__(self, nodes: list[str]) -> None:
        if len(set(nodes)) != len(nodes) or not nodes:
            raise ValueError(f"nodes must be distinct and non-empty: {nodes}")
        for node in nodes:
            if not re.fullmatch(r"[a-z0-9]{1,6}", node):
                raise ValueError(f"node name {node!r}: 1 to 6 lowercase letters or digits")
        self._nodes = list(nodes)
        self.tag = f"{random.randrange(1 << 20):05x}"
        self.subnet: ipaddress.IPv4Network | None = None
        self._addresses: dict[str, str] = {}
        self._cuts: set[tuple[str, str]] = set()
        self._delayers: dict[str, subprocess.Popen[bytes]] = {}
        self._created: list[str] = []
        self._bridge_made = False

    # ------------------------------------------------------------------ names

    def namespace(self, node: str) -> str:
        return f"{PREFIX}{os.getpid()}-{self.tag}-{node}"

    def _root_link(self, node: str) -> str:
        return f"c{self.tag}{node}"  # at most 1 + 5 + 6 = 12 characters

    @property
    def bridge(self) -> str:
        return f"c{self.tag}br"

    @property
    def gateway(self) -> str:
        """The bridge's address: what the nodes see of the root namespace."""
        assert self.subnet is not None
        return str(self.subnet.network_address + 1)

    # ------------------------------------------------------------------ Network

    def nodes(self) -> list[str]:
        return list(self._nodes)

    def address(self, node: str) -> str:
        return self._addresses[node]

    def wrap(self, node: str, argv: list[str]) -> list[str]:
        return ["ip", "netns", "exec", self.namespace(node), *argv]

    def partition(self, side_a: list[str], side_b: list[str]) -> None:
        for a in side_a:
            for b in side_b:
                self._cut(a, b)
                self._cut(b, a)

    def one_way(self, source: str, target: str) -> None:
        self._cut(source, target)

    def delay(self, node: str, ms: int, jitter_ms: int = 0) -> None:
        self._undelay(node)
        ns = self.namespace(node)
        if _ip("-n", ns, "link", "show", DELAY_IN, check=False).returncode != 0:
            _ip("-n", ns, "link", "add", DELAY_IN, "type", "veth", "peer", "name", DELAY_OUT)
            _ip("-n", ns, "link", "set", DELAY_IN, "up")
            _ip("-n", ns, "link", "set", DELAY_OUT, "up")
            # Frames leave dly0 checksummed and segmented, as the delayer must send them.
            _set_offloads_off(ns, DELAY_IN)
        proc = subprocess.Popen(
            self.wrap(
                node,
                [sys.executable, str(DELAYER), DELAY_OUT, NODE_LINK, str(ms), str(jitter_ms)],
            ),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        self._delayers[node] = proc
        self._tc(node, "qdisc", "replace", "dev", NODE_LINK, "clsact")
        # The delayer's socket is open before frames go its way (it binds within ms; frames
        # redirected earlier are lost packets, which TCP retransmits).
        self._tc(
            node,
            *("filter", "add", "dev", NODE_LINK, "egress", "protocol", "all", "prio", "1"),
            *("u32", "match", "u32", "0", "0"),
            *("action", "mirred", "egress", "redirect", "dev", DELAY_IN),
        )

    def heal(self) -> None:
        for node in list(self._delayers):
            self._undelay(node)
        for source, target in sorted(self._cuts):
            _ip(
                "-n",
                self.namespace(target),
                *("rule", "del", "pref", str(CUT_PREF), "from", self.address(source)),
                check=False,
            )
        self._cuts.clear()

    # ------------------------------------------------------------------ what is cut

    def cuts(self) -> set[tuple[str, str]]:
        """(source, target) pairs whose packets are dropped now."""
        return set(self._cuts)

    def delayed(self) -> list[str]:
        return sorted(self._delayers)

    def _cut(self, source: str, target: str) -> None:
        if source == target or (source, target) in self._cuts:
            return
        _ip(
            "-n",
            self.namespace(target),
            *("rule", "add", "pref", str(CUT_PREF), "from", self.address(source)),
            *("iif", NODE_LINK, "blackhole"),
        )
        self._cuts.add((source, target))

    def _undelay(self, node: str) -> None:
        proc = self._delayers.pop(node, None)
        if proc is None:
            return
        self._tc(node, "filter", "del", "dev", NODE_LINK, "egress", check=False)
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        proc.wait(10)

    def _tc(self, node: str, *args: str, check: bool = True) -> None:
        proc = subprocess.run(
            self.wrap(node, ["tc", *args]), capture_output=True, text=True, timeout=30
        )
        if check and proc.returncode != 0:
            raise RuntimeError(f"tc {' '.join(args)} in {node}: {proc.stderr.strip()}")

    # ------------------------------------------------------------------ up and down

    def __enter__(self) -> Netns:
        reason = unavailable_reason()
        if reason is not None:
            raise NetnsUnavailable(reason)
        sweep_stale()
        try:
            self._create()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def _pick_subnet(self) -> ipaddress.IPv4Network:
        taken = _taken_subnets()
        rng = random.Random()
        for _ in range(1000):
            candidate = ipaddress.IPv4Network(
                f"10.{rng.randrange(160, 250)}.{rng.randrange(256)}.0/24"
            )
            if not any(candidate.overlaps(t) for t in taken):
                return candidate
        raise RuntimeError("no free 10.x.y.0/24 subnet for the namespaces")

    def _create(self) -> None:
        self.subnet = self._pick_subnet()
        prefix = self.subnet.prefixlen
        _ip("link", "add", self.bridge, "type", "bridge")
        self._bridge_made = True
        _ip("addr", "add", f"{self.gateway}/{prefix}", "dev", self.bridge)
        _ip("link", "set", self.bridge, "up")
        for i, node in enumerate(self._nodes):
            ns = self.namespace(node)
            address = str(self.subnet.network_address + 2 + i)
            _ip("netns", "add", ns)
            self._created.append(node)
            outer = self._root_link(node)
            inner = f"{outer}i"
            _ip("link", "add", outer, "type", "veth", "peer", "name", inner)
            _ip("link", "set", inner, "netns", ns)
            _ip("-n", ns, "link", "set", inner, "name", NODE_LINK)
            _ip("link", "set", outer, "master", self.bridge, "up")
            _ip("-n", ns, "addr", "add", f"{address}/{prefix}", "dev", NODE_LINK)
            _ip("-n", ns, "link", "set", NODE_LINK, "up")
            _ip("-n", ns, "link", "set", "lo", "up")
            # Cuts at CUT_PREF must be consulted before the local table, or local delivery
            # would accept the packets they drop.
            _ip("-n", ns, "rule", "add", "pref", str(LOCAL_PREF), "table", "local")
            _ip("-n", ns, "rule", "del", "pref", "0", "table", "local")
            self._addresses[node] = address
        self._pin_neighbours()

    def _pin_neighbours(self) -> None:
        """Permanent ARP entries between all nodes and the bridge: a node answers no ARP
        request from a source it drops (the request's route lookup hits the cut), so without
        them a cut node would soon get EHOSTUNREACH instead of silence."""
        macs = {node: self._mac(self.namespace(node), NODE_LINK) for node in self._nodes}
        macs["root"] = self._mac(None, self.bridge)
        addresses = {**self._addresses, "root": self.gateway}
        for node in self._nodes:
            for other, mac in macs.items():
                if other != node:
                    _ip(
                        *("-n", self.namespace(node), "neigh", "replace", addresses[other]),
                        *("lladdr", mac, "dev", NODE_LINK, "nud", "permanent"),
                    )
        for node in self._nodes:
            _ip(
                *("neigh", "replace", self._addresses[node], "lladdr", macs[node]),
                *("dev", self.bridge, "nud", "permanent"),
            )

    @staticmethod
    def _mac(namespace: str | None, link: str) -> str:
        where = ["-n", namespace] if namespace else []
        out = _ip(*where, "-o", "link", "show", link).stdout
        return out.split("link/ether", 1)[1].split()[0]

    def close(self) -> None:
        """Heal, kill what still runs in the namespaces, and remove them and the bridge."""
        with contextlib.suppress(Exception):
            self.heal()
        for node in self._created:
            ns = self.namespace(node)
            _kill_namespace_processes(ns)
            _ip("netns", "del", ns, check=False)
            _ip("link", "del", self._root_link(node), check=False)
        self._created.clear()
        if self._bridge_made:
            _ip("link", "del", self.bridge, check=False)
            self._bridge_made = False
