"""The real Kubernetes control plane in tests (samsa_dev.kube), started once per test run.

``kube_control_plane`` (session): etcd, kube-apiserver, kube-controller-manager,
kube-scheduler and the Node keeper, shared by pytest-xdist's workers through a file lock in
the run's temporary folder: the first worker starts it, and it stops once every file of the
run that uses it is done (``release_when_done``, which samsa_dev.test_order makes early by
handing those files out first), or when the last worker finishes.

``KubeNamespace``: what one test gets: a namespace of its own labelled
``pod-security.kubernetes.io/enforce=restricted``, the StorageClass ``samsa-local`` (the
default), a node agent that runs that namespace's pods as local processes, and the
operator's chart installed by the real helm into the namespace (watching it only), so the
operator runs as its Deployment's pod, with the chart's ServiceAccount.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import secrets
import subprocess
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import pytest

from samsa_dev.cache import locked
from samsa_dev.kafka import pid_alive
from samsa_dev.kube.agent import NodeAgent
from samsa_dev.kube.api import Api
from samsa_dev.kube.control_plane import ControlPlane
from samsa_dev.kube.provisioner import STORAGE_CLASS, STORAGE_CLASSES
from samsa_dev.programs import ProgramUnavailable

RESTRICTED = "pod-security.kubernetes.io/enforce"
T = TypeVar("T")


async def eventually(probe: Callable[[], Awaitable[T]], within: float = 60.0, what: str = "") -> T:
    """Poll an async probe until it returns something truthy; fail after `within` seconds."""
    deadline = time.monotonic() + within
    last: Any = None
    while True:
        try:
            last = await probe()
        except AssertionError as exc:
            last = exc
        else:
            if last:
                return last
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {within}s waiting for {what}: last {last!r}")
        await asyncio.sleep(0.25)


def shared_folder(factory: pytest.TempPathFactory, worker: str) -> Path:
    """The run's folder: with xdist each worker has its own basetemp under a shared one."""
    base = factory.getbasetemp()
    return base.parent if worker != "master" else base


def _file_of(item: pytest.Item) -> str:
    return item.nodeid.split("::", 1)[0]


def _uses_plane(item: pytest.Item) -> bool:
    return "kube_control_plane" in getattr(item, "fixturenames", ())


def release_when_done(item: pytest.Item, nextitem: pytest.Item | None, plane: Any) -> None:
    """After `item`'s teardown: if it ended its file (xdist hands a worker its next test
    before it runs the last one, so `nextitem` is known), record the file done in the run's
    folder, and stop the control plane once every file of the run that uses it is (every
    worker collects the same tests, so each knows them all). It idled at about a fifth of a
    core, the apiserver, etcd, the controllers and the keeper together, for the rest of the
    run; nothing starts it again, as no test that needs it is left."""
    if not isinstance(plane, ControlPlane) or not _uses_plane(item):
        return
    if nextitem is not None and _file_of(nextitem) == _file_of(item):
        return
    folder = plane.folder.parent
    files = {_file_of(i).replace("/", "__") for i in item.session.items if _uses_plane(i)}
    done = folder / "k8s-done"
    with locked(folder / "k8s.lock"):
        done.mkdir(exist_ok=True)
        (done / _file_of(item).replace("/", "__")).touch()
        if files <= {p.name for p in done.iterdir()}:
            plane.down()


@contextlib.contextmanager
def control_plane(folder: Path) -> Iterator[ControlPlane]:
    users = folder / "k8s-users"
    with locked(folder / "k8s.lock"):
        try:
            plane = ControlPlane(folder / "k8s").up(timeout=240)
        except ProgramUnavailable as exc:
            pytest.fail(str(exc))
        users.mkdir(exist_ok=True)
        (users / str(os.getpid())).touch()
    try:
        yield plane
    finally:
        with locked(folder / "k8s.lock"):
            (users / str(os.getpid())).unlink(missing_ok=True)
            if not any(pid_alive(int(u.name)) for u in users.iterdir()):
                plane.down()


@pytest.fixture(scope="session")
def kube_control_plane(
    tmp_path_factory: pytest.TempPathFactory, request: Any
) -> Iterator[ControlPlane]:
    worker = getattr(request.config, "workerinput", {}).get("workerid", "master")
    with control_plane(shared_folder(tmp_path_factory, worker)) as plane:
        yield plane


@dataclass
class KubeNamespace:
    plane: ControlPlane
    name: str
    folder: Path
    kubectl_bin: str
    helm_bin: str
    agent: NodeAgent
    release: str = ""
    operator_values: dict[str, Any] = field(default_factory=dict)

    @property
    def api(self) -> Api:
        return self.agent.api

    def env(self) -> dict[str, str]:
        return {
            **os.environ,
            "KUBECONFIG": str(self.plane.kubeconfig),
            "KUBECACHEDIR": str(self.folder / "kube-cache"),
            "HELM_CACHE_HOME": str(self.folder / "helm-cache"),
            "HELM_CONFIG_HOME": str(self.folder / "helm-config"),
            "HELM_DATA_HOME": str(self.folder / "helm-data"),
        }

    async def run(
        self,
        binary: str,
        *args: str,
        stdin: str | None = None,
        check: bool = True,
        within: float = 120,
    ) -> str:
        proc = await asyncio.create_subprocess_exec(
            binary,
            *args,
            stdin=subprocess.PIPE if stdin is not None else None,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=self.env(),
        )
        out, err = await asyncio.wait_for(
            proc.communicate(stdin.encode() if stdin is not None else None), within
        )
        if check and proc.returncode != 0:
            raise AssertionError(f"{Path(binary).name} {' '.join(args)} failed: {err.decode()}")
        return out.decode() + ("" if check else err.decode())

    async def kubectl(
        self, *args: str, stdin: str | None = None, check: bool = True, within: float = 120
    ) -> str:
        return await self.run(
            self.kubectl_bin, "-n", self.name, *args, stdin=stdin, check=check, within=within
        )

    async def get(self, *args: str) -> Any:
        return json.loads(await self.kubectl("get", "-o", "json", *args))

    async def maybe_get(self, *args: str) -> Any:
        out = await self.kubectl("get", "-o", "json", "--ignore-not-found", *args)
        return json.loads(out) if out.strip() else None

    async def helm(self, *args: str, within: float = 180) -> str:
        return await self.run(self.helm_bin, "-n", self.name, *args, within=within)

    def run_only_the_operator(self) -> None:
        """The node agent runs the operator's pod and leaves the others Pending."""
        self.agent.runs = lambda pod: (
            (pod["metadata"].get("labels") or {}).get("app.kubernetes.io/name") == "samsa-operator"
        )

    async def install_operator(self, chart: Path, **env: str) -> str:
        """The chart, as a user installs it, watching this namespace; `env` goes to the
        operator's container (extraEnv). Returns what helm said (the NOTES)."""
        self.release = f"samsa-{self.name}"
        values = {
            "watchNamespaces": [self.name],
            "peering": {"enabled": False},
            "resyncSeconds": 3,
            "extraEnv": [{"name": k, "value": v} for k, v in env.items()],
            **self.operator_values,
        }
        path = self.folder / "values.json"
        path.write_text(json.dumps(values))
        # CRDs come with the first install; installs of other workers wait for it.
        with locked(self.plane.folder.parent / "helm-crds.lock"):
            return await self.helm("install", self.release, str(chart), "-f", str(path))

    def operator_logs(self) -> str:
        logs = sorted(self.agent.workdir.glob(f"{self.name}/{self.release}-*/operator.log"))
        return "\n".join(p.read_text(errors="replace") for p in logs)

    async def start(self) -> KubeNamespace:
        # The keeper's provisioner installs it too; a namespace may come first.
        await self.api.ensure(STORAGE_CLASSES, STORAGE_CLASS)
        namespace = {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": self.name, "labels": {RESTRICTED: "restricted"}},
        }
        await self.api.create("/api/v1/namespaces", namespace)
        self.agent.start()
        return self

    async def close(self) -> None:
        """Pods go with the agent; the namespace and the release's cluster objects after."""
        with contextlib.suppress(Exception):
            await self.kubectl(
                "delete",
                "pods",
                "--all",
                "--grace-period=0",
                "--force",
                "--wait=false",
                check=False,
            )
        await self.agent.stop()
        with contextlib.suppress(Exception):
            if self.release:
                await self.run(
                    self.kubectl_bin,
                    "delete",
                    "clusterrole,clusterrolebinding",
                    "-l",
                    f"app.kubernetes.io/instance={self.release}",
                    "--wait=false",
                    check=False,
                )
            await self.run(
                self.kubectl_bin, "delete", "namespace", self.name, "--wait=false", check=False
            )
        await self.agent.api.close()


def namespace_name(prefix: str = "t") -> str:
    return f"{prefix}-{secrets.token_hex(3)}"
