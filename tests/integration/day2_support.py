"""Helpers and fixtures of the day-2 tests: the real operator against the API stand-in, the
kubelet harness running its broker pods, one real ZooKeeper, and views of the cluster.

(Uniquely named, as every test folder's helpers are: tests import from here, not conftest.)
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import pytest
from cluster_support import FAST, LoadProducer, admin
from confluent_kafka.admin import ConfigResource, ResourceType
from kube_stand import KubeStand
from kubelet import Api, Kubelet
from op_support import Kubectl, OperatorProcess, eventually

from samsa.local import ZooKeeperServer

T = TypeVar("T")
Start = Callable[..., Awaitable[OperatorProcess]]
NAME = "day2"
KC_PATH = f"/apis/kafka.samsa.dev/v1alpha1/namespaces/default/kafkaclusters/{NAME}"
# How the tests run the operator: a step a second, short Kafka timeouts, and standalone (with
# kopf peering, an operator replacing a killed one waits a minute for the dead one's lease).
OPERATOR_ENV = {
    "SAMSA_OPERATOR_PEERING": "",
    "SAMSA_OPERATOR_OPERATION_SECONDS": "1",
    "SAMSA_OPERATOR_RESYNC_SECONDS": "3",
    "SAMSA_OPERATOR_KAFKA_TIMEOUT": "5",
    "PYTHONFAULTHANDLER": "1",  # a crash in a client library shows where it happened
}


@pytest.fixture
def zookeeper(tmp_path: Path) -> Iterator[ZooKeeperServer]:
    """One real ZooKeeper: it stands in for the ensemble (the clusters name it externally)."""
    with ZooKeeperServer(tmp_path / "zookeeper") as zk:
        yield zk


@pytest.fixture
async def kubelet(stand: KubeStand, tmp_path: Path) -> AsyncIterator[Kubelet]:
    harness = Kubelet(Api(str(stand.url)), tmp_path / "kubelet").start()
    try:
        yield harness
    finally:
        await harness.stop()
        print_logs(tmp_path)
        ticks = sorted(harness.tick_seconds) or [0.0]
        median = ticks[len(ticks) // 2]
        print(f"--- kubelet: {len(ticks)} ticks, median {median:.2f}s, max {ticks[-1]:.2f}s")
        t0 = harness.events[0].at if harness.events else 0
        print(*(f"{e.at - t0:7.2f} {e.kind} {e.ordinal}" for e in harness.events), sep="\n")
    harness.check()


def print_logs(tmp_path: Path) -> None:
    """What the brokers and the operator said last (pytest shows it when a test failed)."""
    logs = sorted(tmp_path.glob("kubelet/logs/*.log")) + sorted(tmp_path.glob("operator-*.log"))
    for log in logs:
        lines = log.read_text(errors="replace").splitlines()
        print(f"--- {log.relative_to(tmp_path)} (last 40 of {len(lines)} lines)")
        print("\n".join(lines[-40:]))


@dataclass
class Brokers:
    """The brokers' client addresses (what cluster_support's helpers bootstrap from)."""

    bootstrap_servers: str


def manifest(
    zk: ZooKeeperServer,
    kubelet: Kubelet,
    brokers: int = 3,
    *,
    addresses: int = 5,
    delete_claim: bool = False,
    throttle: int = 50 << 20,
    **config: Any,
) -> str:
    """The KafkaCluster the tests apply: an external ZooKeeper (the local one), and the
    brokers' local addresses for the operator, which runs outside the cluster."""
    props = {
        **FAST,
        "min.insync.replicas": "2",
        "default.replication.factor": "3",
        "offsets.topic.replication.factor": "3",
        "auto.leader.rebalance.enable": "false",  # preferred leaders are the operator's job
        **config,
    }
    body = {
        "apiVersion": "kafka.samsa.dev/v1alpha1",
        "kind": "KafkaCluster",
        "metadata": {
            "name": NAME,
            "annotations": {"kafka.samsa.dev/bootstrap-servers": kubelet.bootstrap(addresses)},
        },
        "spec": {
            "brokers": {
                "replicas": brokers,
                "storage": {"size": "1Gi", "deleteClaim": delete_claim},
                "terminationGracePeriodSeconds": 30,
            },
            "zookeeper": {"connect": zk.connect_string},
            "config": props,
            "operations": {"reassignmentThrottleBytesPerSecond": throttle},
        },
    }
    return json.dumps(body)


async def start_cluster(
    kubectl: Kubectl,
    operator: Start,
    kubelet: Kubelet,
    zk: ZooKeeperServer,
    brokers: int = 3,
    **spec: Any,
) -> tuple[dict[str, Any], Brokers, OperatorProcess]:
    """The operator started as its Deployment runs it, a KafkaCluster applied, and its brokers
    ready: (the cluster's status, the brokers' addresses, the operator)."""
    process = await operator(**OPERATOR_ENV)
    await apply(kubectl, manifest(zk, kubelet, brokers, **spec))
    status = await wait_ready(kubelet.api, brokers)
    return status, Brokers(kubelet.bootstrap(brokers)), process


async def acked(load: LoadProducer, n: int) -> bool:
    return load.oracle.count() > n


async def apply(kubectl: Kubectl, text: str) -> None:
    await kubectl("apply", "--validate=false", "-f", "-", stdin=text)


async def merge(kubectl: Kubectl, patch: dict[str, Any]) -> None:
    await kubectl("patch", "kc", NAME, "--type=merge", "-p", json.dumps(patch))


async def cluster_status(api: Api) -> dict[str, Any]:
    return dict(((await api.get(KC_PATH)) or {}).get("status") or {})


def condition(status: dict[str, Any], kind: str) -> dict[str, Any]:
    for c in status.get("conditions", []):
        if c["type"] == kind:
            return dict(c)
    return {}


async def wait_ready(api: Api, brokers: int, within: float = 90) -> dict[str, Any]:
    async def ready() -> dict[str, Any] | None:
        status = await cluster_status(api)
        ok = condition(status, "Ready").get("status") == "True"
        every = [b["ready"] for b in status.get("brokers", [])] == [True] * brokers
        return status if ok and every and status.get("controllerId") is not None else None

    return await eventually(ready, within, f"{brokers} brokers ready")


async def wait_status(
    api: Api, check: Callable[[dict[str, Any]], Any], what: str, within: float = 120
) -> dict[str, Any]:
    async def probe() -> dict[str, Any] | None:
        status = await cluster_status(api)
        return status if check(status) else None

    return await eventually(probe, within, what)


async def in_thread(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """Blocking client calls run off the event loop: the API stand-in and the kubelet live
    on it."""
    return await asyncio.to_thread(fn, *args, **kwargs)


def layout(brokers: Brokers) -> dict[str, dict[int, Any]]:
    """Every partition's metadata (replicas, isrs, leader), by topic."""
    md = admin(brokers).list_topics(timeout=10)
    return {t: dict(m.partitions) for t, m in md.topics.items() if m.error is None}


def per_broker(brokers: Brokers, ids: range) -> tuple[Counter[int], Counter[int]]:
    """Replicas and leaders per broker, over every topic."""
    replicas: Counter[int] = Counter({i: 0 for i in ids})
    leaders: Counter[int] = Counter({i: 0 for i in ids})
    for parts in layout(brokers).values():
        for p in parts.values():
            replicas.update(p.replicas)
            leaders[p.leader] += 1
    return replicas, leaders


def not_led_by_preferred(brokers: Brokers) -> list[str]:
    return [
        f"{t}-{n}"
        for t, parts in layout(brokers).items()
        for n, p in parts.items()
        if p.leader != p.replicas[0]
    ]


def broker_config(brokers: Brokers, broker_id: int, name: str) -> tuple[str, int]:
    """(value, source) of one of a broker's configs, as it reports them."""
    resource = ConfigResource(ResourceType.BROKER, str(broker_id))
    client = admin(brokers)  # kept until the answer comes: a dropped client cancels it
    entries = client.describe_configs([resource])[resource].result(10)
    entry = entries[name]
    return entry.value, int(getattr(entry.source, "value", entry.source))


@dataclass
class IsrWatch:
    """Polls the metadata while an operation runs: the smallest ISR each partition had."""

    brokers: Brokers
    topic: str
    smallest: dict[int, int] = field(default_factory=dict)
    polls: int = 0
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> IsrWatch:
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        client = admin(self.brokers)
        while not self._stop.is_set():
            try:
                md = client.list_topics(self.topic, timeout=2)
            except Exception:  # a broker going away: ask again
                continue
            t = md.topics.get(self.topic)
            if t is not None and t.error is None:
                for n, p in t.partitions.items():
                    self.smallest[n] = min(self.smallest.get(n, len(p.isrs)), len(p.isrs))
                self.polls += 1
            self._stop.wait(0.1)

    def stop(self) -> dict[int, int]:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)
        return self.smallest


def hosted(brokers: Brokers, broker_id: int) -> list[str]:
    """The partitions with a replica on `broker_id`, internal topics included."""
    return [
        f"{t}-{n}"
        for t, parts in layout(brokers).items()
        for n, p in parts.items()
        if broker_id in p.replicas
    ]
