"""Day-2 operations on kind (tests/e2e/day2_k8s.py, the scenario code the real nodes run
too), with a three-server ZooKeeper ensemble: the brokers' processes are reached through
the kind node's container runtime (crictl) and signalled there."""

from __future__ import annotations

import day2_k8s
from e2e_support import BROKER_IMAGE, kubectl, run


def broker_pid(pod: str) -> tuple[str, str]:
    """The kind node running `pod`'s broker, and the broker's pid there."""
    spec = day2_k8s.Day2(TARGET).get("pod", pod)
    node = spec["spec"]["nodeName"]
    [container] = [c for c in spec["status"]["containerStatuses"] if c["name"] == "broker"]
    cid = container["containerID"].split("//", 1)[1]
    inspect = ["crictl", "inspect", "--output", "go-template", "--template", "{{.info.pid}}"]
    return node, run("docker", "exec", node, *inspect, cid).strip()


SIGNALS = {"kill": "-KILL", "pause": "-STOP", "resume": "-CONT"}


def signal(pod: str, action: day2_k8s.Action) -> None:
    node, pid = broker_pid(pod)
    run("docker", "exec", node, "kill", SIGNALS[action], pid)


TARGET = day2_k8s.Target(kubectl, "default", "samsa", BROKER_IMAGE, signal, zookeepers=3)


def test_day2_under_load_loses_nothing(kind_cluster: str) -> None:
    day2_k8s.run(TARGET)
