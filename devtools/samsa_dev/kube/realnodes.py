"""Real nodes joined to the control plane (`samsa-dev k8s up --nodes real`): per node a
network namespace on the host bridge, containerd (Debian's) with runc and the CNI plugins in
it, the images imported into its k8s.io namespace, a kubelet and a kube-proxy; then CoreDNS
as the cluster's DNS. What runs and what is written is in kube/nodeconfig.py; this module
starts it, records it (``nodes/state.json``) and removes it all again: processes,
containers, mounts under the nodes' folders, cgroups, namespaces, links and routes, and the
host sysctls the kubelet rewrote.

Every program runs in the host's mount namespace, entered into the node's network namespace
with ``nsenter --net`` (``ip netns exec`` remounts /sys, which hides the cgroup mounts from
runc). Needs root."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import functools
import json
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from samsa.local_cluster.cluster import pid_alive
from samsa_dev import images
from samsa_dev.kube import build, certs, nodeconfig
from samsa_dev.kube.api import Api, ApiError, kubeconfig
from samsa_dev.kube.control_plane import spawn, stop_session
from samsa_dev.kube.nodeconfig import Node
from samsa_dev.programs import ProgramUnavailable

if TYPE_CHECKING:
    from samsa_dev.kube.control_plane import ControlPlane

CGROUPS = Path("/sys/fs/cgroup")
CONTAINER_LOGS = Path("/var/log/containers")
HOST_PROGRAMS = ("containerd", "runc", "ctr", "nsenter", "ip", "iptables", "conntrack")


@dataclass
class NodesState:
    count: int = 0
    pids: dict[str, int] = field(default_factory=dict)
    sysctls: dict[str, str] = field(default_factory=dict)
    # Of nodeconfig.HOST_FOLDERS, those that were not there before the nodes.
    made: list[str] = field(default_factory=list)


def why_not() -> str | None:
    """Why real nodes cannot run here, or None."""
    if os.geteuid() != 0:
        return "real nodes need root (network namespaces, cgroups, mounts)"
    missing = [p for p in HOST_PROGRAMS if shutil.which(p) is None]
    if missing:
        return f"missing {', '.join(missing)}: run `make setup` (apt)"
    if not Path("/usr/lib/cni/bridge").exists():
        return "no CNI plugins in /usr/lib/cni: run `make setup` (containernetworking-plugins)"
    if not (CGROUPS / "memory").is_dir():
        return "real nodes are configured for cgroup v1 (cgroupfs) and find no memory hierarchy"
    return None


def _run(command: list[str], check: bool = True) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(command, capture_output=True, text=True, timeout=120)
    if check and result.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed: {result.stderr.strip()}")
    return result


def _sysctl_path(name: str) -> Path:
    return Path("/proc/sys") / name.replace(".", "/")


def _hierarchies() -> list[Path]:
    """The mounted cgroup hierarchies (v1 controllers and the v2 one beside them)."""
    found = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        left, _, right = line.partition(" - ")
        if right.split(" ")[0] in ("cgroup", "cgroup2"):
            found.append(Path(left.split(" ")[4]))
    return found


def _cgroup_folders(root: Path) -> list[Path]:
    """A cgroup and its descendants, deepest first. The runtime removes cgroups meanwhile:
    os.walk passes over a folder that went."""
    return [Path(folder) for folder, _, _ in os.walk(root, topdown=False)]


class RealNodes:
    def __init__(self, plane: ControlPlane, count: int | None = None) -> None:
        self.plane = plane
        self.folder = plane.folder / "nodes"
        self.state = self.load_state()
        self.count = count if count is not None else self.state.count
        self.nodes = nodeconfig.nodes(self.folder, self.count) if self.count else []

    # -- state ------------------------------------------------------------------------------

    def load_state(self) -> NodesState:
        path = self.folder / "state.json"
        if not path.exists():
            return NodesState()
        return NodesState(**json.loads(path.read_text()))

    def save_state(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        (self.folder / "state.json").write_text(json.dumps(asdict(self.state), indent=1))

    def log(self, name: str) -> Path:
        return self.folder / "logs" / f"{name}.log"

    def running(self) -> dict[str, bool]:
        return {name: pid_alive(pid) for name, pid in self.state.pids.items()}

    # -- up ---------------------------------------------------------------------------------

    def up(self, server_port: int, archives: dict[str, Path], deadline: float) -> None:
        """Network, containerd with the images, kubelet and kube-proxy on every node (the
        caller waits for the Nodes to be Ready). On failure the caller calls `down`."""
        reason = why_not()
        if reason:
            raise ProgramUnavailable(reason)
        kubelet, proxy = build.binary("kubelet"), build.binary("kube-proxy")
        self.down()
        self.folder.mkdir(parents=True, exist_ok=True)
        (self.folder / "logs").mkdir(exist_ok=True)
        self.state = NodesState(count=self.count)
        saved = [*nodeconfig.KUBELET_HOST_SYSCTLS, *nodeconfig.NODES_HOST_SYSCTLS]
        self.state.sysctls = {name: _sysctl_path(name).read_text().strip() for name in saved}
        self.state.made = [p for p in nodeconfig.HOST_FOLDERS if not Path(p).exists()]
        self.save_state()
        for name, value in nodeconfig.NODES_HOST_SYSCTLS.items():
            _sysctl_path(name).write_text(value)
        for command in nodeconfig.network_up(self.nodes):
            _run(command)
        server = f"https://{nodeconfig.HOST_IP}:{server_port}"
        pki = self.plane.pki
        proxy_cert, proxy_key = certs.client(pki.folder, "kube-proxy", "system:kube-proxy")
        for node in self.nodes:
            self._prepare(node, server, proxy_cert, proxy_key)
            self._spawn(
                f"containerd-{node.index}",
                node,
                ["containerd", "--config", str(node.path("containerd.toml"))],
            )
        self.save_state()
        for node in self.nodes:
            self._wait_containerd(node, deadline)
        self._import(archives)
        for node in self.nodes:
            config = nodeconfig.kubelet_flags(
                node, node.path("kubelet.json"), node.path("kubelet.kubeconfig")
            )
            self._spawn(f"kubelet-{node.index}", node, [str(kubelet), *config])
            self._spawn(
                f"kube-proxy-{node.index}",
                node,
                [str(proxy), f"--config={node.path('kube-proxy.json')}", "--v=1"],
            )
        self.save_state()

    def _prepare(self, node: Node, server: str, proxy_cert: Path, proxy_key: Path) -> None:
        for sub in ("cni/net.d", "cni/ipam", "containerd", "kubelet", "pod-logs", "runc"):
            node.path(sub).mkdir(parents=True, exist_ok=True)
        for name, value in nodeconfig.NODE_SYSCTLS.items():
            path = _sysctl_path(name)
            _run(["nsenter", f"--net={node.netns_path}", "sh", "-c", f"echo {value} > {path}"])
        for hierarchy in _hierarchies():
            cgroup = hierarchy / node.cgroup_root.lstrip("/")
            cgroup.mkdir(exist_ok=True)
            for name in ("cpuset.cpus", "cpuset.mems"):
                if (hierarchy / name).exists():
                    (cgroup / name).write_text((hierarchy / name).read_text())
        pki = self.plane.pki
        cert, key = certs.client(
            pki.folder, f"kubelet-{node.index}", f"system:node:{node.name}", "system:nodes"
        )
        ca = str(pki.ca_cert)
        files: dict[str, Any] = {
            "containerd.toml": nodeconfig.containerd_config(node),
            "cni/net.d/10-samsa.conflist": nodeconfig.cni_conflist(node),
            "resolv.conf": "# The nodes reach no upstream DNS: cluster names only (CoreDNS).\n",
            "kubelet.kubeconfig": kubeconfig(server, ca, cert=str(cert), key=str(key)),
            "kube-proxy.kubeconfig": kubeconfig(
                server, ca, cert=str(proxy_cert), key=str(proxy_key)
            ),
            "kubelet.json": nodeconfig.kubelet_config(node, pki.ca_cert, node.path("resolv.conf")),
            "kube-proxy.json": nodeconfig.kube_proxy_config(
                node, node.path("kube-proxy.kubeconfig")
            ),
        }
        for name, content in files.items():
            text = content if isinstance(content, str) else json.dumps(content, indent=1)
            node.path(name).write_text(text)

    def _spawn(self, name: str, node: Node, command: list[str]) -> None:
        inside = ["nsenter", f"--net={node.netns_path}", *command]
        self.state.pids[name] = spawn(inside, self.log(name), node.folder)

    def _ctr(
        self, node: Node, *args: str, timeout: float = 300
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["ctr", "--address", str(node.socket), "-n", "k8s.io", *args],
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    def _wait_containerd(self, node: Node, deadline: float) -> None:
        name = f"containerd-{node.index}"
        while True:
            if node.socket.exists() and self._ctr(node, "version", timeout=10).returncode == 0:
                return
            if not pid_alive(self.state.pids[name]):
                tail = self.log(name).read_text(errors="replace")[-1500:]
                raise RuntimeError(f"{name} exited: {tail}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"{name} did not answer in time (log {self.log(name)})")
            time.sleep(0.2)

    def load_images(self, names: list[str]) -> None:
        """Images of the catalogue (built first if missing) into every running node's
        containerd: those that only some tests need (Spark's are 1.5 GB) come when asked."""
        self._import(dict(images.archives(names)))

    def _import(self, archives: dict[str, Path]) -> None:
        """Every archive into every node's containerd, the nodes in parallel."""

        def load(node: Node) -> None:
            for archive in sorted(set(archives.values())):
                result = self._ctr(node, "images", "import", str(archive))
                if result.returncode != 0:
                    raise RuntimeError(f"importing {archive} into {node.name}: {result.stderr}")

        with concurrent.futures.ThreadPoolExecutor(len(self.nodes)) as pool:
            for done in [pool.submit(load, node) for node in self.nodes]:
                done.result()

    # -- DNS --------------------------------------------------------------------------------

    async def deploy_dns(self, api: Api, image: str, within: float) -> None:
        """CoreDNS's objects, then wait until its pod is Ready."""
        for path, obj in nodeconfig.coredns_objects(image):
            await api.ensure(path, obj)
        deadline = time.monotonic() + within
        path = "/apis/apps/v1/namespaces/kube-system/deployments/coredns"
        while True:
            with contextlib.suppress(ApiError):
                found = await api.get(path)
                if found and (found.get("status") or {}).get("readyReplicas", 0) >= 1:
                    return
            if time.monotonic() > deadline:
                raise TimeoutError(f"CoreDNS not Ready in {within} s")
            await asyncio.sleep(0.5)

    # -- down -------------------------------------------------------------------------------

    def down(self, timeout: float = 20.0) -> None:
        """Everything `up` made goes, whatever state it reached."""
        if not self.state.count and not self.state.pids:
            return
        all_nodes = nodeconfig.nodes(self.folder, self.state.count or nodeconfig.MAX_NODES)
        steps: list[Callable[[], object]] = []
        for prefix in ("kube-proxy", "kubelet", "containerd"):
            if prefix == "containerd":
                steps += [functools.partial(self._kill_cgroup, node) for node in all_nodes]
            steps += [
                functools.partial(stop_session, pid, timeout)
                for name, pid in self.state.pids.items()
                if name.startswith(prefix)
            ]
        steps += [functools.partial(self._kill_shims, node) for node in all_nodes]
        steps += [self._unmount, self._remove_contents]
        steps += [
            functools.partial(_run, command, check=False)
            for command in nodeconfig.network_down(all_nodes)
        ]
        steps += [functools.partial(self._remove_cgroups, node) for node in all_nodes]
        steps += [self._remove_host_entries, self._restore_sysctls]
        # Every step runs whatever became of the ones before it; the first failure is raised.
        failures = []
        for step in steps:
            try:
                step()
            except Exception as exc:
                failures.append(exc)
        if failures:
            # Kept: `down` again tries what is left.
            raise failures[0]
        self.state = NodesState()
        self.save_state()

    def _restore_sysctls(self) -> None:
        for name, value in self.state.sysctls.items():
            with contextlib.suppress(OSError):
                _sysctl_path(name).write_text(value)

    def _kill_cgroup(self, node: Node) -> None:
        """Every process in the node's cgroups (its containers), killed."""
        for _ in range(20):
            pids = set()
            for hierarchy in _hierarchies():
                for folder in _cgroup_folders(hierarchy / node.cgroup_root.lstrip("/")):
                    with contextlib.suppress(OSError):
                        pids |= {int(p) for p in (folder / "cgroup.procs").read_text().split()}
            pids.discard(os.getpid())
            if not pids:
                return
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.1)

    def _kill_shims(self, node: Node) -> None:
        """containerd's shims outlive it: the ones started for this node's socket."""
        marker = str(node.socket).encode()
        for proc in Path("/proc").iterdir():
            if not proc.name.isdigit():
                continue
            with contextlib.suppress(OSError):
                command = (proc / "cmdline").read_bytes().split(b"\0")
                if b"containerd-shim" in command[0] and marker in command:
                    os.kill(int(proc.name), signal.SIGKILL)

    def _mounts(self) -> list[str]:
        """The mount points under the nodes' folder."""
        points = []
        for line in Path("/proc/self/mountinfo").read_text().splitlines():
            point = line.split(" ")[4].replace("\\040", " ")
            if point == str(self.folder) or point.startswith(f"{self.folder}/"):
                points.append(point)
        return points

    def _unmount(self) -> None:
        """Mounts under the nodes' folder (the kubelet's volumes and rshared root dirs,
        containerd's rootfs and sandbox namespaces), deepest first."""
        for _ in range(5):
            points = self._mounts()
            if not points:
                return
            for point in sorted(points, key=len, reverse=True):
                if _run(["umount", point], check=False).returncode != 0:
                    _run(["umount", "-l", point], check=False)

    def _remove_contents(self) -> None:
        """The nodes' images, containers and pods' volumes (gigabytes with Spark's images:
        a test run's temporary folder kept them all); their logs stay. Only once nothing is
        mounted under the nodes' folder, so that nothing mounted there is removed."""
        if self._mounts():
            raise RuntimeError(f"still mounted under {self.folder}: {self._mounts()[:3]}")
        for node in nodeconfig.nodes(self.folder, self.state.count or nodeconfig.MAX_NODES):
            for contents in ("containerd", "kubelet"):
                shutil.rmtree(node.path(contents), ignore_errors=True)

    def _remove_cgroups(self, node: Node) -> None:
        for hierarchy in _hierarchies():
            for folder in _cgroup_folders(hierarchy / node.cgroup_root.lstrip("/")):
                with contextlib.suppress(OSError):
                    folder.rmdir()

    def _remove_host_entries(self) -> None:
        """What the nodes left in host folders (nodeconfig.HOST_FOLDERS): a folder they made
        goes whole, except /run/containerd while another containerd runs (containerd 1.6
        puts its shims' sockets and fifos there whatever its state directory); in one that
        was there, their container log links and CNI results go."""
        others = False
        for proc in Path("/proc").iterdir():
            with contextlib.suppress(OSError):
                if not proc.name.isdigit():
                    continue
                name, _, rest = (proc / "stat").read_text().partition(") ")
                # A zombie (ours, not reaped yet) runs nothing.
                if name.split("(", 1)[1].startswith("containerd") and not rest.startswith("Z"):
                    others = True
        for folder in self.state.made:
            if folder != "/run/containerd" or not others:
                shutil.rmtree(folder, ignore_errors=True)
        if CONTAINER_LOGS.is_dir():
            for link in CONTAINER_LOGS.iterdir():
                with contextlib.suppress(OSError):
                    if link.is_symlink() and str(os.readlink(link)).startswith(str(self.folder)):
                        link.unlink()
        results = Path("/var/lib/cni/results")
        if results.is_dir():
            for entry in results.glob(f"{nodeconfig.CNI_NETWORK}-*"):
                entry.unlink(missing_ok=True)
