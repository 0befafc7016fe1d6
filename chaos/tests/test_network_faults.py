"""The network fault kinds on real namespaces: each cuts or slows what it says, its
description names it, healing removes it, a seed reproduces the choices, and without
namespaces the kinds are not applicable."""

from __future__ import annotations

import json
import random
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

from chaos.faults import network as network_faults
from chaos.faults.base import Network
from chaos.netns import Netns
from chaos.tests.test_netns import require_netns


class Env:
    """Just what the network kinds read of the campaign's environment; there is no broker
    behind it, only the namespaces."""

    def __init__(self, network: Network | None) -> None:
        self._network = network

    @property
    def brokers(self) -> list[int]:
        return [0, 1, 2]

    def controller(self) -> int:
        return 1

    @property
    def network(self) -> Network | None:
        return self._network

    # Unused by network faults.
    def broker_pid(self, broker: int) -> int | None:
        return None

    def kill_broker(self, broker: int) -> None: ...

    def start_broker(self, broker: int) -> None: ...

    def data_dir(self, broker: int) -> Path:
        return Path()

    def clock_file(self, broker: int) -> Path:
        return Path()

    @property
    def zookeeper_pid(self) -> int:
        return 0

    def restart_zookeeper(self) -> None: ...

    @property
    def timeouts(self) -> Mapping[str, int]:
        return {}


@pytest.fixture(scope="module")
def net() -> Iterator[Netns]:
    require_netns()
    with Netns(["zk", "b0", "b1", "b2"]) as network:
        yield network


KIND_NAMES = [k.name for k in network_faults.KINDS]


@pytest.mark.parametrize("name", KIND_NAMES)
def test_each_kind_cuts_or_slows_then_heals(net: Netns, name: str):
    kind = next(k for k in network_faults.KINDS if k.name == name)
    env = Env(net)
    assert kind.applicable(env)
    fault = kind.inject(env, random.Random(7))
    described = fault.describe()
    json.dumps(described)
    assert described["kind"] == name == fault.kind
    cuts, delayed = net.cuts(), net.delayed()
    if name == "latency":
        assert delayed == [f"b{described['broker']}"] and not cuts
        assert 50 <= described["delay_ms"] <= 200
    elif name == "partition-one-way":
        assert cuts == {(described["source"], described["target"])}
    else:
        victim = f"b{described['broker']}"
        others = {
            "partition-brokers": {f"b{b}" for b in range(3)} - {victim},
            "partition-zookeeper": {"zk"},
            "partition-isolate": ({f"b{b}" for b in range(3)} - {victim}) | {"zk"},
        }[name]
        assert cuts == {(victim, o) for o in others} | {(o, victim) for o in others}
    fault.heal()
    fault.heal()  # safe twice
    assert net.cuts() == set() and net.delayed() == []


def test_a_seed_reproduces_the_choices(net: Netns):
    env = Env(net)
    runs = []
    for _ in range(2):
        rng = random.Random(42)
        described = []
        for kind in network_faults.KINDS:
            fault = kind.inject(env, rng)
            described.append(fault.describe())
            fault.heal()
        runs.append(described)
    assert runs[0] == runs[1]


def test_without_namespaces_no_kind_is_applicable():
    env = Env(None)
    assert not any(k.applicable(env) for k in network_faults.KINDS)
