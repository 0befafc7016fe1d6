"""Helpers of the day-2 tests: the real operator, installed by its chart, on the real control
plane, its broker pods run by the node agent against one real ZooKeeper, and views of the
cluster.

(Uniquely named, as every test folder's helpers are: tests import from here, not conftest.)
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import day2_scenarios as scenarios
from cluster_support import FAST, LoadProducer, admin
from confluent_kafka.admin import ConfigResource, ResourceType
from kube_support import CHART, OPERATOR_ENV

from samsa.local_cluster import ZooKeeperServer
from samsa_dev.kube.agent import NodeAgent, ordinal
from samsa_dev.kube.harness import KubeNamespace, eventually

T = TypeVar("T")
NAME = "day2"
BROKER_POD = f"{NAME}-kafka-"


@dataclass
class Brokers:
    """The brokers' client addresses, as their pods have them now (a restarted pod has a new
    IP): what cluster_support's helpers bootstrap from."""

    agent: NodeAgent

    @property
    def bootstrap_servers(self) -> str:
        runs = sorted(
            (r for r in self.agent.pods.values() if r.name.startswith(BROKER_POD)),
            key=lambda r: r.name,
        )
        return ",".join(f"{r.ip}:9092" for r in runs if r.terminating is None)


def broker_pid(kube: KubeNamespace, broker: int) -> int | None:
    return kube.agent.pid(f"{BROKER_POD}{broker}")


def starts(kube: KubeNamespace, since: float = 0.0) -> list[int]:
    """Ordinals of the brokers started after `since`, in order."""
    return [ordinal(p) for p in kube.agent.starts(since) if p.startswith(BROKER_POD)]


def manifest(
    zk: ZooKeeperServer,
    brokers: int = 3,
    *,
    delete_claim: bool = False,
    throttle: int = 50 << 20,
    **config: Any,
) -> str:
    """The day-2 KafkaCluster with an external ZooKeeper (the local one) and quick settings."""
    body = scenarios.cluster(
        brokers,
        zookeeper={"connect": zk.connect_string},
        delete_claim=delete_claim,
        throttle=throttle,
        **{**FAST, **config},
    )
    body["spec"]["brokers"]["terminationGracePeriodSeconds"] = 30
    return json.dumps(body)


async def start_cluster(
    kube: KubeNamespace, zk: ZooKeeperServer, brokers: int = 3, **spec: Any
) -> tuple[dict[str, Any], Brokers]:
    """The operator installed by its chart, a KafkaCluster applied, and its brokers ready:
    (the cluster's status, the brokers' addresses)."""
    await kube.install_operator(CHART, **OPERATOR_ENV)
    await apply(kube, manifest(zk, brokers, **spec))
    status = await wait_ready(kube, brokers)
    return status, Brokers(kube.agent)


def operator_pod(kube: KubeNamespace) -> str:
    [run] = [r for r in kube.agent.pods.values() if r.name.startswith(kube.release)]
    return run.name


async def acked(load: LoadProducer, n: int) -> bool:
    return load.oracle.count() > n


async def apply(kube: KubeNamespace, text: str) -> None:
    await kube.kubectl("apply", "-f", "-", stdin=text)


async def merge(kube: KubeNamespace, patch: dict[str, Any]) -> None:
    await kube.kubectl("patch", "kc", NAME, "--type=merge", "-p", json.dumps(patch))


async def cluster_status(kube: KubeNamespace) -> dict[str, Any]:
    path = f"/apis/kafka.samsa.dev/v1alpha1/namespaces/{kube.name}/kafkaclusters/{NAME}"
    return dict(((await kube.api.get(path)) or {}).get("status") or {})


condition = scenarios.condition


async def wait_ready(kube: KubeNamespace, brokers: int, within: float = 120) -> dict[str, Any]:
    async def ready() -> dict[str, Any] | None:
        status = await cluster_status(kube)
        return status if scenarios.ready(brokers)(status) else None

    return await eventually(ready, within, f"{brokers} brokers ready")


async def wait_status(
    kube: KubeNamespace, check: Callable[[dict[str, Any]], Any], what: str, within: float = 120
) -> dict[str, Any]:
    async def probe() -> dict[str, Any] | None:
        status = await cluster_status(kube)
        return status if check(status) else None

    return await eventually(probe, within, what)


async def in_thread(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """Blocking client calls run off the event loop: the node agent lives on it."""
    return await asyncio.to_thread(fn, *args, **kwargs)


def layout(brokers: Brokers) -> dict[str, dict[int, Any]]:
    """Every partition's metadata (replicas, isrs, leader), by topic."""
    md = admin(brokers).list_topics(timeout=10)
    return {t: dict(m.partitions) for t, m in md.topics.items() if m.error is None}


def per_broker(brokers: Brokers, ids: range) -> tuple[Counter[int], Counter[int]]:
    """Replicas and leaders per broker, over every topic."""
    parts = [(p.replicas, p.leader) for ps in layout(brokers).values() for p in ps.values()]
    return scenarios.per_broker(parts, len(ids))


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
