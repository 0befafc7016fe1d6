"""Helpers shared by the operator's tests (a uniquely named module: every test folder of the
workspace has its own conftest.py, so tests import from here, never from conftest)."""

from __future__ import annotations

import asyncio
import contextlib
import copy
import functools
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pytest
import yaml
from kmock import Server
from kube_stand import KubeStand

REPO = Path(__file__).resolve().parents[2]
TOOLS = REPO / ".tools"
EXAMPLES = REPO / "examples"
CHART = REPO / "helm" / "samsa-operator"
CRDS = REPO / "crds"

T = TypeVar("T")
K8S_VERSIONS = ["1.29.0", "1.30.0", "1.31.0", "1.32.0", "1.33.0", "1.34.0"]


def tool(name: str) -> str:
    path = TOOLS / name
    if not path.exists():
        pytest.fail(f"{path} is missing: run `make tools` (part of `make setup`)")
    return str(path)


@pytest.fixture(scope="session")
def helm() -> str:
    return tool("helm")


@pytest.fixture(scope="session")
def kubectl_bin() -> str:
    return tool("kubectl")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


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


@dataclass
class Kubectl:
    binary: str
    kubeconfig: Path

    async def __call__(self, *args: str, stdin: str | None = None, check: bool = True) -> str:
        env = {
            **os.environ,
            "KUBECONFIG": str(self.kubeconfig),
            "KUBECACHEDIR": str(self.kubeconfig.parent / "kube-cache"),
        }
        proc = await asyncio.create_subprocess_exec(
            self.binary,
            *args,
            stdin=subprocess.PIPE if stdin is not None else None,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
        )
        out, err = await asyncio.wait_for(
            proc.communicate(stdin.encode() if stdin is not None else None), 60
        )
        if check and proc.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed: {err.decode()}")
        return out.decode() + ("" if check else err.decode())

    async def get(self, *args: str) -> Any:
        return json.loads(await self("get", "-o", "json", *args))

    async def maybe_get(self, *args: str) -> Any:
        out = await self("get", "-o", "json", "--ignore-not-found", *args)
        return json.loads(out) if out.strip() else None


def write_kubeconfig(path: Path, server: str) -> None:
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "stand", "cluster": {"server": server}}],
        "users": [{"name": "stand", "user": {"token": "stand"}}],
        "contexts": [
            {
                "name": "stand",
                "context": {"cluster": "stand", "user": "stand", "namespace": "default"},
            }
        ],
        "current-context": "stand",
    }
    path.write_text(yaml.safe_dump(config))


@pytest.fixture
async def stand(tmp_path: Path) -> AsyncIterator[KubeStand]:
    async with KubeStand() as api, Server(api):
        api.kubeconfig = tmp_path / "kubeconfig"
        write_kubeconfig(api.kubeconfig, str(api.url).rstrip("/"))
        yield api


@pytest.fixture
def kubectl(stand: KubeStand, kubectl_bin: str) -> Kubectl:
    assert stand.kubeconfig is not None
    return Kubectl(kubectl_bin, stand.kubeconfig)


@dataclass
class OperatorProcess:
    proc: asyncio.subprocess.Process
    log: Path

    def output(self) -> str:
        return self.log.read_text(errors="replace")


def helm_template(helm: str, *args: str) -> list[dict[str, Any]]:
    """The chart as `helm install` would send it (rendered once per set of arguments)."""
    return copy.deepcopy(_helm_template(helm, *args))


@functools.cache
def _helm_template(helm: str, *args: str) -> list[dict[str, Any]]:
    result = subprocess.run(
        [helm, "template", "samsa-operator", str(CHART), "--namespace", "samsa", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return [d for d in yaml.safe_load_all(result.stdout) if d]


@pytest.fixture
async def operator(
    stand: KubeStand, kubectl: Kubectl, helm: str, tmp_path: Path
) -> AsyncIterator[Callable[..., Awaitable[OperatorProcess]]]:
    """Run the operator as the chart's Deployment runs its image: `python -m samsa_operator`
    with the Deployment's arguments and environment."""
    started: list[OperatorProcess] = []

    async def start(**env: str) -> OperatorProcess:
        assert stand.kubeconfig is not None
        # What the chart installs that the stand can hold: the CRDs (ours and kopf's peering)
        # and the peering object. The stand has no controllers to run a Deployment.
        chart = helm_template(helm, "--include-crds")
        for kind in ("CustomResourceDefinition", "ClusterKopfPeering"):
            docs = yaml.safe_dump_all([d for d in chart if d["kind"] == kind])
            await kubectl("apply", "--validate=false", "-f", "-", stdin=docs)
        [deployment] = [d for d in chart if d["kind"] == "Deployment"]
        [container] = deployment["spec"]["template"]["spec"]["containers"]
        log = tmp_path / f"operator-{len(started)}.log"
        full_env = {
            **os.environ,
            **{e["name"]: e["value"] for e in container["env"]},
            "KUBECONFIG": str(stand.kubeconfig),
            # Quicker than a cluster's defaults, so the tests wait less.
            "SAMSA_OPERATOR_RESYNC_SECONDS": "1",
            "SAMSA_OPERATOR_KAFKA_TIMEOUT": "5",
            "SAMSA_OPERATOR_HEALTH_PORT": str(free_port()),
            **env,
        }
        with log.open("wb") as out:
            proc = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "samsa_operator",
                *container.get("args", []),
                "--verbose",
                stdout=out,
                stderr=subprocess.STDOUT,
                env=full_env,
                start_new_session=True,
            )
        op = OperatorProcess(proc, log)
        started.append(op)
        return op

    yield start
    for op in started:
        if op.proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(op.proc.pid, signal.SIGTERM)
            try:  # graceful stop waits for Kafka calls in flight: do not wait for long
                await asyncio.wait_for(op.proc.wait(), 2)
            except TimeoutError:
                os.killpg(op.proc.pid, signal.SIGKILL)
                await op.proc.wait()


@dataclass
class BrokerProcess:
    port: int
    http_port: int
    proc: subprocess.Popen[bytes]

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"


@pytest.fixture
def broker_process(tmp_path: Path) -> Iterator[BrokerProcess]:
    """A real Samsa broker process (standalone) on free 127.0.0.1 ports."""
    port, http_port = free_port(), free_port()
    log = (tmp_path / "broker.log").open("wb")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "samsa.cli",
            "broker",
            "--data-dir",
            str(tmp_path / "broker-data"),
            "--listen",
            f"127.0.0.1:{port}",
            "--http",
            f"127.0.0.1:{http_port}",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 1):
                break
            if proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(
                    f"broker did not start: {(tmp_path / 'broker.log').read_text()}"
                )
            time.sleep(0.05)
        yield BrokerProcess(port, http_port, proc)
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


def load_yaml_documents(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def verbs_used(
    stand: KubeStand, others: tuple[str, ...] = ("kubectl",)
) -> set[tuple[str, str, str]]:
    """(API group, resource[/subresource], verb) of every request but those whose User-Agent
    names one of `others` (kubectl, the tests' kubelet)."""
    used = set()
    for request in stand._requests:
        resource = request.resource
        agent = request.headers.get("User-Agent", "")
        if resource is None or not resource.plural or any(o in agent for o in others):
            continue
        method = request.method.value
        if method == "GET":
            verb = (
                "watch"
                if request.params.get("watch") == "true"
                else ("get" if request.name else "list")
            )
        else:
            verb = {"POST": "create", "PATCH": "patch", "DELETE": "delete", "PUT": "update"}[method]
        name = resource.plural + (f"/{request.subresource}" if request.subresource else "")
        used.add((resource.group or "", name, verb))
    return used


def rbac_gaps(used: set[tuple[str, str, str]], rules: list[dict[str, Any]]) -> set[Any]:
    """What was used that no rule grants."""
    return {
        (group, resource, verb)
        for group, resource, verb in used
        if not any(
            group in r["apiGroups"] and resource in r["resources"] and verb in r["verbs"]
            for r in rules
        )
    }
