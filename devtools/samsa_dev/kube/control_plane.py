"""The control plane's processes on 127.0.0.1 free ports: etcd, kube-apiserver (serving
certificates, RBAC, ServiceAccount tokens, the default admission plugins with PodSecurity),
kube-controller-manager (every controller) and kube-scheduler, and the Node keeper
(`keeper`: Nodes kept Ready, the local volume provisioner). Each runs in its own session so
it outlives the command that started it; their pids and ports are kept in ``state.json`` so
``down`` stops exactly them. ``kubeconfig`` is the admin's, for kubectl and helm.

With ``real_nodes`` (`samsa-dev k8s up --nodes real`), real nodes (kube/realnodes.py) join
instead of the keeper's Nodes: the API server then listens on every address and advertises
the nodes' bridge address, so that pods reach it through the `kubernetes` Service, and calls
the kubelets with a client certificate of its own; the provisioner runs alone."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import ssl
import subprocess
import sys
import time
import urllib.request
from dataclasses import asdict, dataclass, field
from pathlib import Path

from samsa.local_cluster.cluster import pid_alive
from samsa_dev.kafka import free_port
from samsa_dev.kube import build, certs
from samsa_dev.kube.api import Api, kubeconfig
from samsa_dev.kube.nodeconfig import SERVICE_CIDR

ISSUER = "https://kubernetes.default.svc.cluster.local"
NODES = 3


@dataclass
class State:
    ports: dict[str, int] = field(default_factory=dict)
    pids: dict[str, int] = field(default_factory=dict)
    real_nodes: int = 0


class ControlPlane:
    def __init__(self, folder: Path) -> None:
        self.folder = Path(folder).resolve()
        self.pki = certs.Pki(self.folder / "pki")
        self.state = self.load_state() or State()

    @property
    def kubeconfig(self) -> Path:
        return self.folder / "kubeconfig"

    @property
    def server(self) -> str:
        return f"https://127.0.0.1:{self.state.ports['apiserver']}"

    def log(self, name: str) -> Path:
        return self.folder / "logs" / f"{name}.log"

    def load_state(self) -> State | None:
        path = self.folder / "state.json"
        if not path.exists():
            return None
        data = json.loads(path.read_text())
        return State(data["ports"], data["pids"], data.get("real_nodes", 0))

    def save_state(self) -> None:
        path = self.folder / "state.json"
        path.write_text(json.dumps(asdict(self.state), indent=1))

    def running(self) -> dict[str, bool]:
        return {name: pid_alive(pid) for name, pid in self.state.pids.items()}

    # -- up --------------------------------------------------------------------------------

    def up(self, timeout: float = 180.0, pods: bool = False, real_nodes: int = 0) -> ControlPlane:
        """Start what is not running (a running control plane is kept) and wait until the
        API serves, the controllers and the scheduler run and every Node is Ready; with
        `real_nodes`, that many real nodes, and CoreDNS Ready on them."""
        running = self.running()
        same = self.state.real_nodes == real_nodes
        if running and all(running.values()) and same and self.ready():
            return self
        self.down()
        # A new start is a new cluster: etcd's member would not match its new ports.
        shutil.rmtree(self.folder / "etcd", ignore_errors=True)
        self.folder.mkdir(parents=True, exist_ok=True)
        (self.folder / "logs").mkdir(exist_ok=True)
        certs.make(self.pki.folder)
        ports = {n: free_port() for n in ("etcd", "etcd-peer", "apiserver", "kcm", "scheduler")}
        self.state = State(ports=ports, real_nodes=real_nodes)
        admin = kubeconfig(
            self.server,
            str(self.pki.ca_cert),
            cert=str(self.pki.admin_cert),
            key=str(self.pki.admin_key),
        )
        self.kubeconfig.write_text(json.dumps(admin))
        deadline = time.monotonic() + timeout
        try:
            self._spawn("etcd", self._etcd())
            self._spawn("kube-apiserver", self._apiserver())
            self.save_state()
            self._wait(self.ready, deadline, "kube-apiserver")
            self._spawn("kube-controller-manager", self._controller_manager())
            self._spawn("kube-scheduler", self._scheduler())
            if real_nodes:
                self._real_nodes(deadline)
            else:
                keeper = [sys.executable, "-m", "samsa_dev.kube.keeper", str(self.folder)]
                self._spawn("keeper", keeper + (["--pods"] if pods else []), python=True)
                self.save_state()
                self._wait(self.nodes_ready, deadline, f"{NODES} Nodes Ready")
        except BaseException:
            self.down()
            raise
        return self

    def _real_nodes(self, deadline: float) -> None:
        from samsa_dev.kube import node_images, nodeconfig
        from samsa_dev.kube.realnodes import RealNodes

        provisioner = [
            sys.executable,
            "-m",
            "samsa_dev.kube.keeper",
            str(self.folder),
            "--no-nodes",
        ]
        self._spawn("provisioner", provisioner)
        self.save_state()
        archives = node_images.archives()
        nodes = RealNodes(self, self.state.real_nodes)
        nodes.up(self.state.ports["apiserver"], archives, deadline)
        self._wait(self.nodes_ready, deadline, f"{self.state.real_nodes} real Nodes Ready")
        if nodeconfig.COREDNS_IMAGE in archives:

            async def dns() -> None:
                api = Api(self.kubeconfig, agent="samsa-dev-k8s")
                try:
                    await nodes.deploy_dns(
                        api, nodeconfig.COREDNS_IMAGE, deadline - time.monotonic()
                    )
                finally:
                    await api.close()

            asyncio.run(dns())

    def _spawn(self, name: str, command: list[str], python: bool = False) -> None:
        self.state.pids[name] = spawn(command, self.log(name), self.folder)

    def _wait(self, ready: object, deadline: float, what: str) -> None:
        assert callable(ready)
        while not ready():
            dead = [n for n, alive in self.running().items() if not alive]
            if dead:
                tails = {n: self.log(n).read_text(errors="replace")[-1500:] for n in dead}
                raise RuntimeError(f"{', '.join(dead)} exited: {tails}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"{what} not ready in time (logs in {self.folder}/logs)")
            time.sleep(0.25)

    def _etcd(self) -> list[str]:
        p = self.state.ports
        client, peer = f"http://127.0.0.1:{p['etcd']}", f"http://127.0.0.1:{p['etcd-peer']}"
        return [
            str(build.binary("etcd")),
            "--name=samsa",
            f"--data-dir={self.folder / 'etcd'}",
            f"--listen-client-urls={client}",
            f"--advertise-client-urls={client}",
            f"--listen-peer-urls={peer}",
            f"--initial-advertise-peer-urls={peer}",
            f"--initial-cluster=samsa={peer}",
            "--listen-metrics-urls=",
            # A test cluster: durability across power loss is not wanted, speed is.
            "--unsafe-no-fsync",
            "--quota-backend-bytes=2147483648",
            "--log-level=warn",
        ]

    def _apiserver(self) -> list[str]:
        p, pki = self.state.ports, self.pki
        return [
            str(build.binary("kube-apiserver")),
            f"--etcd-servers=http://127.0.0.1:{p['etcd']}",
            *self._apiserver_addresses(),
            f"--secure-port={p['apiserver']}",
            f"--cert-dir={self.folder / 'apiserver-certs'}",
            f"--tls-cert-file={pki.server_cert}",
            f"--tls-private-key-file={pki.server_key}",
            f"--client-ca-file={pki.ca_cert}",
            "--authorization-mode=Node,RBAC",
            f"--service-account-issuer={ISSUER}",
            f"--service-account-key-file={pki.sa_pub}",
            f"--service-account-signing-key-file={pki.sa_key}",
            f"--service-cluster-ip-range={SERVICE_CIDR}",
            "--allow-privileged=false",
            "--profiling=false",
            "--v=0",
        ]

    def _apiserver_addresses(self) -> list[str]:
        if not self.state.real_nodes:
            return ["--bind-address=127.0.0.1", "--advertise-address=127.0.0.1"]
        from samsa_dev.kube import nodeconfig

        cert, key = certs.client(
            self.pki.folder, "apiserver-kubelet-client", "kube-apiserver", "system:masters"
        )
        return [
            "--bind-address=0.0.0.0",
            f"--advertise-address={nodeconfig.HOST_IP}",
            f"--kubelet-client-certificate={cert}",
            f"--kubelet-client-key={key}",
            # The kubelets' Node addresses: the hostname resolves nowhere.
            "--kubelet-preferred-address-types=InternalIP",
            # Webhooks (the spark-operator's) by their Service's endpoints: the host routes
            # to the pods' addresses, while Service addresses are kube-proxy's rules inside
            # the nodes, as on a control plane that runs no kube-proxy of its own.
            "--enable-aggregator-routing=true",
        ]

    def _controller_manager(self) -> list[str]:
        config = str(self.kubeconfig)
        return [
            str(build.binary("kube-controller-manager")),
            f"--kubeconfig={config}",
            f"--authentication-kubeconfig={config}",
            f"--authorization-kubeconfig={config}",
            "--bind-address=127.0.0.1",
            f"--secure-port={self.state.ports['kcm']}",
            f"--cert-dir={self.folder / 'kcm-certs'}",
            "--controllers=*",
            "--use-service-account-credentials=true",
            f"--service-account-private-key-file={self.pki.sa_key}",
            f"--root-ca-file={self.pki.ca_cert}",
            f"--cluster-signing-cert-file={self.pki.ca_cert}",
            f"--cluster-signing-key-file={self.pki.ca_key}",
            f"--service-cluster-ip-range={SERVICE_CIDR}",
            "--leader-elect=false",
            # Claims bind within seconds (the default resync is 15 s).
            "--pvclaimbinder-sync-period=2s",
            "--profiling=false",
        ]

    def _scheduler(self) -> list[str]:
        config = str(self.kubeconfig)
        return [
            str(build.binary("kube-scheduler")),
            f"--kubeconfig={config}",
            f"--authentication-kubeconfig={config}",
            f"--authorization-kubeconfig={config}",
            "--bind-address=127.0.0.1",
            f"--secure-port={self.state.ports['scheduler']}",
            f"--cert-dir={self.folder / 'scheduler-certs'}",
            "--leader-elect=false",
            "--profiling=false",
        ]

    # -- probes ----------------------------------------------------------------------------

    def _get(self, path: str) -> tuple[int, bytes]:
        tls = ssl.create_default_context(cafile=str(self.pki.ca_cert))
        tls.load_cert_chain(str(self.pki.admin_cert), str(self.pki.admin_key))
        try:
            with urllib.request.urlopen(self.server + path, context=tls, timeout=5) as r:
                return r.status, r.read()
        except urllib.error.HTTPError as exc:
            return exc.code, b""
        except (OSError, KeyError):
            return 0, b""

    def ready(self) -> bool:
        return self._get("/readyz")[0] == 200

    def nodes_ready(self) -> bool:
        status, body = self._get("/api/v1/nodes")
        if status != 200:
            return False
        nodes = json.loads(body).get("items", [])
        return len(nodes) >= (self.state.real_nodes or NODES) and all(
            any(
                c["type"] == "Ready" and c["status"] == "True"
                for c in (n.get("status") or {}).get("conditions", [])
            )
            for n in nodes
        )

    # -- down ------------------------------------------------------------------------------

    def down(self, timeout: float = 20.0) -> None:
        """Stop every process this control plane started (and remove the real nodes)."""
        try:
            if (self.folder / "nodes").exists():
                from samsa_dev.kube.realnodes import RealNodes

                RealNodes(self).down()
        finally:
            order = ["keeper", "provisioner", "kube-scheduler", "kube-controller-manager"]
            order += ["kube-apiserver", "etcd"]
            for name in order:
                pid = self.state.pids.get(name)
                if pid is not None:
                    stop_session(pid, timeout)
            self.state.pids = {}
            if self.folder.exists():
                self.save_state()


def spawn(command: list[str], log: Path, cwd: Path) -> int:
    """A process in a session of its own (it outlives its starter), output to `log`."""
    with log.open("ab") as out:
        proc = subprocess.Popen(
            command,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            cwd=cwd,
        )
    return proc.pid


def stop_session(pid: int, timeout: float) -> None:
    """SIGTERM to a session `spawn` started, SIGKILL if it outlives `timeout`."""
    if not pid_alive(pid):
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while pid_alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    if pid_alive(pid):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGKILL)
