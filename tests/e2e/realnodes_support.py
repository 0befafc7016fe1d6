"""The real-nodes suite's fixture and helpers: the project's control plane with real nodes
(kubelet, containerd, kube-proxy, CoreDNS; samsa_dev.kube.realnodes) for a test module, kubectl
against it, and pods of the broker image made to pass the `restricted` Pod Security level.
Skipped, with the reason, where real nodes cannot run (not root, no containerd) or the
images are not built."""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import day2_k8s
import pytest
from e2e_support import pod_manifest, within

from samsa_dev.kube import node_images, nodeconfig, realnodes
from samsa_dev.kube.control_plane import ControlPlane
from samsa_dev.programs import ProgramUnavailable

REPO = Path(__file__).resolve().parents[2]
TOOLS = REPO / ".tools"
BROKER_IMAGE = "ghcr.io/samsa-dev/samsa:0.1.0"
OPERATOR_IMAGE = "ghcr.io/samsa-dev/samsa-operator:0.1.0"
ZOOKEEPER_IMAGE = "docker.io/library/zookeeper:3.9"
NODES = 3


def why_not() -> str | None:
    reason = realnodes.why_not()
    if reason:
        return reason
    if not (TOOLS / "kubectl").exists() or not (TOOLS / "helm").exists():
        return "helm and kubectl are missing: run `make tools`"
    try:
        images = node_images.archives()
    except ProgramUnavailable as exc:
        return str(exc)
    missing = [i for i in (BROKER_IMAGE, nodeconfig.COREDNS_IMAGE) if i not in images]
    if missing:
        return f"images {', '.join(missing)} are not built: run `make images`"
    return None


class Cluster:
    def __init__(self, plane: ControlPlane) -> None:
        self.plane = plane

    def kubectl(
        self, *args: str, stdin: str | None = None, check: bool = True, timeout: float = 120
    ) -> str:
        # A command with a --timeout of its own (kubectl wait, delete) is given that and more.
        own = [int(a[len("--timeout=") : -1]) for a in args if re.fullmatch(r"--timeout=\d+s", a)]
        result = subprocess.run(
            [str(TOOLS / "kubectl"), f"--kubeconfig={self.plane.kubeconfig}", *args],
            input=stdin,
            capture_output=True,
            text=True,
            timeout=max([timeout, *(t + 30 for t in own)]),
            # Its caches in the cluster's folder, not the home folder.
            env={"HOME": str(self.plane.folder), "PATH": "/usr/bin:/bin"},
        )
        if check and result.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed: {result.stderr}")
        return result.stdout

    def apply(self, *objects: dict[str, Any]) -> None:
        self.kubectl(
            "apply",
            "-f",
            "-",
            stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}),
        )

    def get(self, *args: str) -> Any:
        return json.loads(self.kubectl("get", "-o", "json", *args))

    def run_to_end(self, pod: dict[str, Any], seconds: float = 180) -> str:
        """Create a pod that runs once (restartPolicy Never); its log once it Succeeded."""
        self.apply(pod)
        name, ns = pod["metadata"]["name"], pod["metadata"]["namespace"]

        def finished() -> str | None:
            phase = self.get("pod", "-n", ns, name)["status"].get("phase")
            return str(phase) if phase in ("Succeeded", "Failed") else None

        phase = within(finished, seconds, f"the pod {name} to finish")
        logs = self.kubectl("logs", "-n", ns, name)
        assert phase == "Succeeded", logs
        return logs

    def namespace(self, name: str) -> str:
        """A namespace that enforces the `restricted` Pod Security level."""
        self.apply(
            {
                "apiVersion": "v1",
                "kind": "Namespace",
                "metadata": {
                    "name": name,
                    "labels": {"pod-security.kubernetes.io/enforce": "restricted"},
                },
            }
        )
        return name


def restricted_pod(
    name: str, namespace: str, command: list[str] | None = None, **spec: Any
) -> dict[str, Any]:
    """A pod of the broker image for the `restricted` level (e2e_support.pod_manifest)."""
    return pod_manifest(name, namespace, BROKER_IMAGE, command, **spec)


def helm(cluster: Cluster, *args: str) -> str:
    """The real helm against the cluster."""
    result = subprocess.run(
        [str(TOOLS / "helm"), f"--kubeconfig={cluster.plane.kubeconfig}", *args],
        capture_output=True,
        text=True,
        timeout=300,
        env={"HOME": str(cluster.plane.folder), "PATH": "/usr/bin:/bin"},
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def install_operator(cluster: Cluster, ns: str) -> str:
    """The chart by the real helm, watching `ns` only; the release's name (one a namespace:
    its ClusterRoles are cluster-wide)."""
    release = f"samsa-{ns}"
    values = {"watchNamespaces": [ns], "peering": {"enabled": False}}
    path = cluster.plane.folder / f"operator-values-{ns}.json"
    path.write_text(json.dumps(values))
    chart = REPO / "helm" / "samsa-operator"
    helm(cluster, "-n", ns, "install", release, str(chart), "-f", str(path))
    return release


def condition(obj: dict[str, Any], kind: str) -> dict[str, Any] | None:
    for c in (obj.get("status") or {}).get("conditions") or []:
        if c["type"] == kind:
            return dict(c)
    return None


# The module's: gone once its tests are, not idling (and keeping the kubelets' host sysctls)
# through the rest of make e2e.
@pytest.fixture(scope="module")
def real_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    reason = why_not()
    if reason:
        pytest.skip(reason)
    plane = ControlPlane(tmp_path_factory.mktemp("real") / "k8s")
    try:
        plane.up(timeout=300, real_nodes=NODES)
        yield Cluster(plane)
    finally:
        plane.down()


def container_task(cluster: Cluster, ns: str, pod: str, container: str) -> tuple[Path, str]:
    """The containerd socket of the node that runs `pod`, and its container's id there."""
    found = cluster.get("pod", "-n", ns, pod)
    node = found["spec"]["nodeName"]
    [status] = [c for c in found["status"]["containerStatuses"] if c["name"] == container]
    [socket] = [
        n.socket for n in nodeconfig.nodes(cluster.plane.folder / "nodes", NODES) if n.name == node
    ]
    return socket, status["containerID"].split("//", 1)[1]


CTR_ACTIONS = {
    "kill": ["kill", "--signal", "SIGKILL"],
    "pause": ["pause"],
    "resume": ["resume"],
}


def signal_container(
    cluster: Cluster, ns: str, pod: str, container: str, action: day2_k8s.Action
) -> None:
    """Kill (SIGKILL) or freeze or thaw (the cgroup freezer) a container's task in its node's
    containerd, from outside the container."""
    socket, task = container_task(cluster, ns, pod, container)
    ctr = ["ctr", "--address", str(socket), "-n", "k8s.io", "task", *CTR_ACTIONS[action]]
    subprocess.run([*ctr, task], check=True, capture_output=True, timeout=30)


def day2_target(cluster: Cluster, ns: str, operator_ns: str) -> day2_k8s.Target:
    """The day-2 scenarios' Target on the real nodes: kubectl, and the broker containers'
    tasks signalled in their nodes' containerd."""

    def signal(pod: str, action: day2_k8s.Action) -> None:
        signal_container(cluster, ns, pod, "broker", action)

    return day2_k8s.Target(cluster.kubectl, ns, operator_ns, BROKER_IMAGE, signal)
