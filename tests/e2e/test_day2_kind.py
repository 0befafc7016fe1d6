"""Day-2 operations on kind (tests/e2e/day2_k8s.py, the scenario code the real nodes run
too), with a three-server ZooKeeper ensemble: the brokers' processes are reached through
the kind node's container runtime (crictl) and signalled there (e2e_support.kind_signal)."""

from __future__ import annotations

import day2_k8s
from e2e_support import BROKER_IMAGE, kind_signal, kubectl

SIGNALS = {"kill": "-KILL", "pause": "-STOP", "resume": "-CONT"}


def signal(pod: str, action: day2_k8s.Action) -> None:
    kind_signal("default", pod, "broker", SIGNALS[action])


TARGET = day2_k8s.Target(kubectl, "default", "samsa", BROKER_IMAGE, signal, zookeepers=3)


def test_day2_under_load_loses_nothing(kind_cluster: str) -> None:
    day2_k8s.run(TARGET)
