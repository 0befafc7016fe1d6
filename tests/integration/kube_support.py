"""The fixtures and helpers of the tests on the real control plane (uniquely named, as every
test folder's helpers are: tests import from here, not from conftest)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from samsa.local_cluster import ZooKeeperServer
from samsa_dev.kube.agent import NodeAgent
from samsa_dev.kube.api import Api
from samsa_dev.kube.control_plane import ControlPlane
from samsa_dev.kube.harness import KubeNamespace, namespace_name

REPO = Path(__file__).resolve().parents[2]
TOOLS = REPO / ".tools"
CHART = REPO / "helm" / "samsa-operator"
EXAMPLES = REPO / "examples"
# How the tests run the operator: a step a second, short Kafka timeouts.
OPERATOR_ENV = {
    "SAMSA_OPERATOR_OPERATION_SECONDS": "1",
    "SAMSA_OPERATOR_KAFKA_TIMEOUT": "5",
    "PYTHONFAULTHANDLER": "1",
}


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


@pytest.fixture
async def kube(
    kube_control_plane: ControlPlane, tmp_path: Path, kubectl_bin: str, helm: str
) -> AsyncIterator[KubeNamespace]:
    name = namespace_name()
    agent = NodeAgent(
        Api(kube_control_plane.kubeconfig, "samsa-node-agent"),
        tmp_path / "agent",
        namespaces={name},
    )
    ns = KubeNamespace(kube_control_plane, name, tmp_path, kubectl_bin, helm, agent)
    await ns.start()
    try:
        yield ns
    finally:
        print_logs(ns)
        await ns.close()
    agent.check()
    forbidden = [line for line in ns.operator_logs().splitlines() if "Forbidden" in line]
    assert not forbidden, f"the chart's RBAC refused the operator: {forbidden[:3]}"


def print_logs(ns: KubeNamespace) -> None:
    """What the pods said last (pytest shows it when a test failed)."""
    for log in sorted(ns.agent.workdir.glob("*/*/*.log")):
        lines = log.read_text(errors="replace").splitlines()
        print(f"--- {log.relative_to(ns.agent.workdir)} (last 30 of {len(lines)} lines)")
        print("\n".join(lines[-30:]))
    t0 = ns.agent.events[0].at if ns.agent.events else 0
    print(*(f"{e.at - t0:7.2f} {e.kind} {e.pod}" for e in ns.agent.events), sep="\n")


@pytest.fixture
def zookeeper(tmp_path: Path) -> Iterator[ZooKeeperServer]:
    """One real ZooKeeper on 127.0.0.1 for clusters that name an external one."""
    with ZooKeeperServer(tmp_path / "zookeeper") as zk:
        yield zk


def condition(obj: dict[str, Any] | None, kind: str = "Ready") -> dict[str, Any]:
    for c in ((obj or {}).get("status") or {}).get("conditions") or []:
        if c["type"] == kind:
            return dict(c)
    return {}
