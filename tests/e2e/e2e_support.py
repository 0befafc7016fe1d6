"""The e2e suites' shared helpers (the e2e mark, polling with a deadline, a pod of the
broker image for the `restricted` level) and the kind suite's fixture: a real Kubernetes in
Docker. Every kind test is skipped, with the reason, where there is no Docker engine or no
kind binary."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest

REPO = Path(__file__).resolve().parents[2]
TOOLS = REPO / ".tools"
CLUSTER = "samsa-e2e"
TAG = "e2e"
T = TypeVar("T")
BROKER_IMAGE = f"ghcr.io/samsa-dev/samsa:{TAG}"
OPERATOR_IMAGE = f"ghcr.io/samsa-dev/samsa-operator:{TAG}"


def why_not() -> str | None:
    if shutil.which("docker") is None:
        return "no docker command: the kind suite needs a Docker engine"
    if subprocess.run(["docker", "info"], capture_output=True, timeout=30).returncode != 0:
        return "no Docker engine answers (docker info failed): the kind suite needs one"
    if shutil.which("kind") is None:
        return "no kind binary on PATH (go install sigs.k8s.io/kind@latest)"
    if not (TOOLS / "helm").exists() or not (TOOLS / "kubectl").exists():
        return "helm and kubectl are missing: run `make tools`"
    return None


@pytest.hookimpl(tryfirst=True)  # before -m deselects by the mark
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test here is an e2e test (`make e2e` selects them by that mark); the kind tests
    (those on `kind_cluster`) are skipped where kind cannot run."""
    reason = why_not()
    for item in items:
        if Path(item.path).parent == Path(__file__).parent:
            item.add_marker(pytest.mark.e2e)
            if reason and "kind_cluster" in getattr(item, "fixturenames", ()):
                item.add_marker(pytest.mark.skip(reason=reason))


def within(probe: Callable[[], T | None], seconds: float, what: str, every: float = 0.5) -> T:
    """Poll `probe` until it returns something truthy; fail after `seconds`."""
    deadline = time.monotonic() + seconds
    while True:
        found = probe()
        if found:
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {seconds} s waiting for {what}")
        time.sleep(every)


def run(*cmd: str, timeout: float = 600, stdin: str | None = None) -> str:
    result = subprocess.run(
        cmd, input=stdin, capture_output=True, text=True, timeout=timeout, cwd=REPO
    )
    if result.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} failed:\n{result.stdout}\n{result.stderr}")
    return result.stdout


def kubectl(*args: str, stdin: str | None = None, timeout: float = 600) -> str:
    return run(
        str(TOOLS / "kubectl"), "--context", f"kind-{CLUSTER}", *args, stdin=stdin, timeout=timeout
    )


@pytest.fixture(scope="session")
def kind_cluster() -> Iterator[str]:
    """A kind cluster with both images loaded and the operator installed by helm."""
    run("docker", "build", "-f", "broker_image/Dockerfile", "-t", BROKER_IMAGE, ".", timeout=1200)
    run("docker", "build", "-f", "operator/Dockerfile", "-t", OPERATOR_IMAGE, ".", timeout=1200)
    run("kind", "create", "cluster", "--name", CLUSTER, "--wait", "120s")
    try:
        for image in (BROKER_IMAGE, OPERATOR_IMAGE):
            run("kind", "load", "docker-image", "--name", CLUSTER, image)
        run(
            str(TOOLS / "helm"),
            "install",
            "samsa-operator",
            "helm/samsa-operator",
            "--kube-context",
            f"kind-{CLUSTER}",
            "--namespace",
            "samsa",
            "--create-namespace",
            "--set",
            f"image.tag={TAG}",
            "--set",
            f"brokerImage.tag={TAG}",
            "--set",
            "image.pullPolicy=Never",
            "--wait",
        )
        yield CLUSTER
    finally:
        run("kind", "delete", "cluster", "--name", CLUSTER)


def in_cluster(pod: str, *samsa_args: str, stdin: str | None = None) -> str:
    """Run the samsa command line in a pod of the broker image, inside the cluster."""
    return kubectl(
        "run",
        pod,
        "--rm",
        "-i",
        "--restart=Never",
        f"--image={BROKER_IMAGE}",
        "--image-pull-policy=Never",
        "--command",
        "--",
        "samsa",
        *samsa_args,
        stdin=stdin,
    )


def pod_manifest(
    name: str, namespace: str, image: str, command: list[str] | None = None, **spec: Any
) -> dict[str, Any]:
    """A pod of the broker image as the `restricted` Pod Security level wants it: non-root,
    no capabilities, the runtime's seccomp profile, a read-only root with emptyDirs where
    the image writes. Without `command`, the image's own (a broker)."""
    container: dict[str, Any] = {
        "name": "main",
        "image": image,
        "imagePullPolicy": "IfNotPresent",
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,
            "runAsNonRoot": True,
            "capabilities": {"drop": ["ALL"]},
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "volumeMounts": [
            {"name": "data", "mountPath": "/var/lib/samsa"},
            {"name": "tmp", "mountPath": "/tmp"},
        ],
    }
    if command:
        container["command"] = command
    container.update(spec.pop("container", {}))
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": {"app": name}},
        "spec": {
            "containers": [container],
            "volumes": [{"name": "data", "emptyDir": {}}, {"name": "tmp", "emptyDir": {}}],
            "terminationGracePeriodSeconds": 5,
            **spec,
        },
    }


def kind_signal(namespace: str, pod: str, container: str, signal: str) -> None:
    """Send a signal (`-KILL`, `-STOP`, `-CONT`) to a container's process from its kind node,
    found through the node's runtime (crictl): the container's pid 1 ignores a SIGKILL sent
    from inside its own namespace."""
    spec = json.loads(kubectl("get", "pod", "-n", namespace, pod, "-o", "json"))
    node = spec["spec"]["nodeName"]
    [status] = [c for c in spec["status"]["containerStatuses"] if c["name"] == container]
    cid = status["containerID"].split("//", 1)[1]
    inspect = ["crictl", "inspect", "--output", "go-template", "--template", "{{.info.pid}}"]
    pid = run("docker", "exec", node, *inspect, cid).strip()
    run("docker", "exec", node, "kill", signal, pid)
