"""Network faults, on a cluster whose nodes run in network namespaces (``env.network``):
a broker partitioned from the other brokers, a broker (often the controller) partitioned from
ZooKeeper, a broker isolated from everyone, a one-way cut between two nodes, and added latency
on one broker. Without namespaces (``env.network`` is None) none of them is applicable.

Each fault heals by removing the network's cuts and delays (``Network.heal``), so network
faults are meant to be injected one at a time; other kinds (kills, pauses) may overlap them.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from chaos.faults.base import Environment, Fault, FaultKind, Network
from chaos.netns import ZOOKEEPER_NODE, broker_node


@dataclass
class NetworkFault:
    kind: str
    network: Network
    details: dict[str, Any] = field(default_factory=dict)
    healed: bool = False

    def describe(self) -> dict[str, Any]:
        return {"kind": self.kind, **self.details}

    def heal(self) -> None:
        if not self.healed:
            self.network.heal()
            self.healed = True


class _NetworkKind:
    name = ""

    def applicable(self, env: Environment) -> bool:
        return env.network is not None

    def _network(self, env: Environment) -> Network:
        network = env.network
        if network is None:
            raise RuntimeError(f"{self.name}: the brokers do not run in network namespaces")
        return network

    def inject(self, env: Environment, rng: random.Random) -> Fault:
        raise NotImplementedError


def _pick_broker(env: Environment, rng: random.Random, controller_share: float = 0.0) -> int:
    """A broker at random; the controller with probability ``controller_share``."""
    if controller_share and rng.random() < controller_share:
        controller = env.controller()
        if controller in env.brokers:
            return controller
    return rng.choice(env.brokers)


class BrokerPartition(_NetworkKind):
    """One broker cut off from the other brokers, both ways; ZooKeeper still reachable."""

    name = "partition-brokers"

    def inject(self, env: Environment, rng: random.Random) -> Fault:
        network = self._network(env)
        broker = _pick_broker(env, rng, controller_share=0.3)
        others = [broker_node(b) for b in env.brokers if b != broker]
        network.partition([broker_node(broker)], others)
        return NetworkFault(self.name, network, {"broker": broker, "from": others})


class ZooKeeperPartition(_NetworkKind):
    """One broker, the controller half of the time, cut off from ZooKeeper, both ways."""

    name = "partition-zookeeper"

    def inject(self, env: Environment, rng: random.Random) -> Fault:
        network = self._network(env)
        broker = _pick_broker(env, rng, controller_share=0.5)
        was_controller = broker == env.controller()
        network.partition([broker_node(broker)], [ZOOKEEPER_NODE])
        return NetworkFault(
            self.name, network, {"broker": broker, "was_controller": was_controller}
        )


class Isolation(_NetworkKind):
    """One broker cut off from the other brokers and from ZooKeeper: a zombie that clients
    can still reach."""

    name = "partition-isolate"

    def inject(self, env: Environment, rng: random.Random) -> Fault:
        network = self._network(env)
        broker = _pick_broker(env, rng, controller_share=0.3)
        others = [broker_node(b) for b in env.brokers if b != broker]
        network.partition([broker_node(broker)], [*others, ZOOKEEPER_NODE])
        return NetworkFault(self.name, network, {"broker": broker})


class OneWayPartition(_NetworkKind):
    """Packets from one node to another dropped, the other way untouched (a broker's to
    another broker, or between a broker and ZooKeeper)."""

    name = "partition-one-way"

    def inject(self, env: Environment, rng: random.Random) -> Fault:
        network = self._network(env)
        nodes = [broker_node(b) for b in env.brokers] + [ZOOKEEPER_NODE]
        source, target = rng.sample(nodes, 2)
        network.one_way(source, target)
        return NetworkFault(self.name, network, {"source": source, "target": target})


class Latency(_NetworkKind):
    """50 to 200 ms more on every packet one broker sends, with jitter up to a quarter."""

    name = "latency"

    def inject(self, env: Environment, rng: random.Random) -> Fault:
        network = self._network(env)
        broker = _pick_broker(env, rng)
        ms = rng.randint(50, 200)
        jitter = rng.randint(0, ms // 4)
        network.delay(broker_node(broker), ms, jitter)
        return NetworkFault(
            self.name, network, {"broker": broker, "delay_ms": ms, "jitter_ms": jitter}
        )


KINDS: list[FaultKind] = [
    BrokerPartition(),
    ZooKeeperPartition(),
    Isolation(),
    OneWayPartition(),
    Latency(),
]
