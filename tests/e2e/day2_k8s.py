"""Day-2 operations on a real Kubernetes under an idempotent acks=all load: one body of
scenario code for the real nodes (test_real_nodes) and kind (test_day2_kind), which differ
only in how they reach kubectl and a container's process (a ``Target``).

The load runs in a pod of the broker image (`samsa produce`, acks=all, idempotent) until it
is told to stop; it exits non-zero if any record it sent was not acknowledged, and every
record it sent is then read back, once, by an independent consumer. Meanwhile:

- a config change rolls the brokers, the controller last, the operator's own pod killed
  while the roll runs;
- a roll waits while a follower is frozen, and goes on once it runs again;
- the leader of a partition is deleted with `--grace-period=0 --force`;
- a broker process is killed inside its container, and the kubelet starts it again;
- 3 brokers become 5 (replicas and leaders spread over the 5) and then 3 again (drained
  first, their pods gone);
- a scale-down below the replication factor is refused.

What the status must say comes from tests/integration/day2_scenarios.py, shared with the
suite on the local control plane."""

from __future__ import annotations

import json
import re
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "integration"))
import day2_scenarios as scenarios
from e2e_support import pod_manifest

NAME = scenarios.NAME
TOPIC = "events"
Action = Literal["kill", "pause", "resume"]
BROKER_LABELS = f"app.kubernetes.io/instance={NAME},app.kubernetes.io/component=kafka"


@dataclass
class Target:
    """A Kubernetes the scenario runs on."""

    # kubectl(*args, stdin=...) -> its output; raises AssertionError when it fails.
    kubectl: Callable[..., str]
    namespace: str
    # Where the operator's pod runs.
    operator_namespace: str
    # The broker image, as the nodes have it.
    image: str
    # Kill (SIGKILL), freeze or thaw the broker container of a pod, from outside it (the
    # broker is its container's pid 1, which ignores a SIGKILL sent from within).
    signal: Callable[[str, Action], None]
    zookeepers: int = 1


# Numbered values until /tmp/stop exists, ~50 a second; then how many were sent. `samsa
# produce` exits non-zero if any record was not acknowledged. A leader can be gone for a
# ZooKeeper session and its election, so a record may wait longer than the CLI's 30 s.
LOAD_SCRIPT = """
(i=0
 while [ ! -e /tmp/stop ]; do echo "v$i"; i=$((i+1)); sleep 0.02; done
 echo "sent $i" >&2) |
samsa produce "$TOPIC" -b "$BOOTSTRAP" --acks all \
  -X enable.idempotence=true -X delivery.timeout.ms=240000
"""


class Day2:
    """The scenario's steps, against one Target."""

    def __init__(self, target: Target) -> None:
        self.t = target

    # -- views ----------------------------------------------------------------------------

    def kubectl(self, *args: str, stdin: str | None = None) -> str:
        return self.t.kubectl("-n", self.t.namespace, *args, stdin=stdin)

    def get(self, *args: str) -> Any:
        return json.loads(self.kubectl("get", "-o", "json", *args))

    def status(self) -> scenarios.Status:
        return dict(self.get("kc", NAME).get("status") or {})

    def wait_for(
        self, check: Callable[[scenarios.Status], Any], what: str, within: float = 600
    ) -> scenarios.Status:
        deadline = time.monotonic() + within
        while True:
            current = self.status()
            if check(current):
                return current
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out after {within} s waiting for {what}: {current}")
            time.sleep(2)

    def broker_pods(self) -> list[dict[str, Any]]:
        return list(self.get("pods", "-l", BROKER_LABELS)["items"])

    def uids(self) -> dict[str, str]:
        return {p["metadata"]["name"]: p["metadata"]["uid"] for p in self.broker_pods()}

    def created_order(self) -> list[str]:
        pods = sorted(self.broker_pods(), key=lambda p: p["metadata"]["creationTimestamp"])
        return [p["metadata"]["name"] for p in pods]

    def broker_container(self, pod: str) -> dict[str, Any]:
        """The broker container's status, in the pod of that name now ({} without one)."""
        [found] = [p for p in self.broker_pods() if p["metadata"]["name"] == pod] or [{}]
        statuses = (found.get("status") or {}).get("containerStatuses") or []
        return {"uid": found.get("metadata", {}).get("uid")} | next(
            (s for s in statuses if s["name"] == "broker"), {}
        )

    def restarts(self, pod: str) -> int:
        return int(self.broker_container(pod).get("restartCount", 0))

    @property
    def bootstrap(self) -> str:
        return str(self.status()["bootstrapServers"]["internal"])

    def samsa(self, *args: str) -> str:
        """The samsa CLI in a ready broker's container (the broker image has it)."""
        ready = [
            p["metadata"]["name"]
            for p in self.broker_pods()
            if all(s.get("ready") for s in p["status"].get("containerStatuses") or [{}])
        ]
        assert ready, "no broker pod is ready"
        return self.kubectl("exec", ready[0], "-c", "broker", "--", "samsa", *args)

    def describe(self) -> list[dict[str, Any]]:
        out = self.samsa("topics", "describe", "--internal", "-o", "json", "-b", self.bootstrap)
        return list(json.loads(out))

    def counts(self, brokers: int) -> tuple[Counter[int], Counter[int]]:
        parts = [(p["replicas"], p["leader"]) for t in self.describe() for p in t["partitions"]]
        return scenarios.per_broker(parts, brokers)

    def leader_of(self, partition: int) -> int:
        [topic] = [t for t in self.describe() if t["name"] == TOPIC]
        [found] = [p for p in topic["partitions"] if p["partition"] == partition]
        return int(found["leader"])

    # -- actions --------------------------------------------------------------------------

    def patch(self, spec: dict[str, Any]) -> None:
        self.kubectl("patch", "kc", NAME, "--type=merge", "-p", json.dumps({"spec": spec}))

    def up(self) -> None:
        body = scenarios.cluster(
            3,
            zookeeper={
                "replicas": self.t.zookeepers,
                "storage": {"size": "1Gi", "deleteClaim": True},
            },
            delete_claim=True,
        )
        body["metadata"]["namespace"] = self.t.namespace
        topic = {
            "apiVersion": "kafka.samsa.dev/v1alpha1",
            "kind": "Topic",
            "metadata": {"name": TOPIC, "namespace": self.t.namespace},
            "spec": {
                "clusterRef": NAME,
                "partitions": 10,
                "replicationFactor": 3,
                "config": {"min.insync.replicas": "2"},
            },
        }
        self.kubectl("apply", "-f", "-", stdin=json.dumps(body))
        self.kubectl("wait", "--for=condition=Ready", f"kc/{NAME}", "--timeout=600s")
        self.kubectl("apply", "-f", "-", stdin=json.dumps(topic))
        self.kubectl("wait", "--for=condition=Ready", f"topic/{TOPIC}", "--timeout=300s")

    def start_load(self) -> None:
        env = [{"name": "TOPIC", "value": TOPIC}, {"name": "BOOTSTRAP", "value": self.bootstrap}]
        pod = pod_manifest(
            "load",
            self.t.namespace,
            self.t.image,
            ["sh", "-c", LOAD_SCRIPT],
            restartPolicy="Never",
            container={"env": env},
        )
        self.kubectl("apply", "-f", "-", stdin=json.dumps(pod))
        self.kubectl("wait", "--for=condition=Ready", "pod/load", "--timeout=120s")

    def stop_load_and_check(self) -> int:
        """Stop the load; every record it sent, each acknowledged, is read back once."""
        self.kubectl("exec", "load", "--", "touch", "/tmp/stop")
        self.kubectl(
            "wait", "--for=jsonpath={.status.phase}=Succeeded", "pod/load", "--timeout=120s"
        )
        log = self.kubectl("logs", "load")
        [sent] = [int(n) for n in re.findall(r"^sent (\d+)$", log, re.M)]
        out = self.samsa(
            "consume",
            TOPIC,
            "-b",
            self.bootstrap,
            "--from-beginning",
            "--end",
            "--format",
            "%s\n",
        )
        values = Counter(line for line in out.splitlines() if line.startswith("v"))
        missing = [f"v{i}" for i in range(sent) if values[f"v{i}"] == 0]
        twice = [v for v, n in values.items() if n > 1]
        assert not missing, f"{len(missing)} of {sent} acknowledged records lost: {missing[:10]}"
        assert not twice, f"written twice: {twice[:10]}"
        assert len(values) == sent, (len(values), sent)
        self.kubectl("delete", "pod", "load", "--wait=false")
        return sent

    # -- the scenarios --------------------------------------------------------------------

    def config_roll_with_the_operator_killed(self) -> None:
        """A config change rolls every broker once, the controller last; the operator's pod,
        killed while the roll runs, finishes it from its status."""
        controller = f"{NAME}-kafka-{self.status()['controllerId']}"
        before = self.uids()
        self.patch({"config": {"log.roll.hours": 100}})
        self.wait_for(lambda s: (s.get("roll") or {}).get("restarted"), "the roll to begin")
        self.t.kubectl(
            "delete",
            "pod",
            "-n",
            self.t.operator_namespace,
            "-l",
            "app.kubernetes.io/name=samsa-operator",
            "--grace-period=0",
            "--force",
        )
        self.wait_for(scenarios.roll_finished(3), "the roll to finish")
        after = self.uids()
        assert all(after[name] != uid for name, uid in before.items()), "a broker not restarted"
        assert self.created_order()[-1] == controller, "the controller was not restarted last"
        self.wait_for(scenarios.ready(3), "every broker ready after the roll")

    def roll_waits_for_a_frozen_follower(self) -> None:
        controller = f"{NAME}-kafka-{self.status()['controllerId']}"
        follower = next(n for n in sorted(self.uids()) if n != controller)
        self.t.signal(follower, "pause")
        try:
            # Asked for once the follower is seen stopped (its readiness probe failed): a
            # roll asked for before restarts a broker that is not serving first.
            self.wait_for(
                lambda s: any(b["pod"] == follower and not b["ready"] for b in s["brokers"]),
                f"{follower} not ready",
                120,
            )
            self.kubectl("annotate", "kc", NAME, "kafka.samsa.dev/manual-rolling-update=true")
            blocked = self.wait_for(scenarios.roll_blocked, "the roll blocked", 300)
            assert blocked["roll"]["restarted"] == [], blocked["roll"]
        finally:
            self.t.signal(follower, "resume")
        self.wait_for(scenarios.roll_finished(3), "the roll to finish")
        self.wait_for(scenarios.ready(3), "every broker ready after the roll")

    def leader_force_deleted(self) -> None:
        leader = f"{NAME}-kafka-{self.leader_of(0)}"
        uid = self.uids()[leader]
        self.kubectl("delete", "pod", leader, "--grace-period=0", "--force")

        def back(status: scenarios.Status) -> bool:
            now = self.broker_container(leader)
            return now.get("uid") not in (None, uid) and now.get("ready") is True

        self.wait_for(back, f"{leader} back in a new pod and ready")
        self.wait_for(scenarios.ready(3), "every broker ready")

    def broker_killed_in_its_container(self) -> None:
        pod = f"{NAME}-kafka-{self.leader_of(1)}"
        restarts = self.restarts(pod)
        self.t.signal(pod, "kill")
        self.wait_for(
            lambda _: self.restarts(pod) > restarts and self.broker_container(pod)["ready"],
            f"{pod}'s broker restarted by the kubelet and ready",
        )
        self.wait_for(scenarios.ready(3), "every broker ready")

    def scale_out_and_in(self) -> None:
        self.patch({"brokers": {"replicas": 5}})
        self.wait_for(scenarios.scaled_to(5), "the rebalance over 5 brokers", 900)
        replicas, leaders = self.counts(5)
        assert scenarios.spread(replicas) <= 1, replicas
        assert scenarios.spread(leaders) <= 1, leaders
        self.patch({"brokers": {"replicas": 3}})
        self.wait_for(scenarios.scaled_to(3), "the drain to 3 brokers", 900)
        replicas, _ = self.counts(3)
        assert set(replicas) == {0, 1, 2}, replicas
        gone = [f"pod/{NAME}-kafka-4", f"pod/{NAME}-kafka-3"]
        self.kubectl("wait", "--for=delete", *gone, "--timeout=300s")

    def scale_below_the_replication_factor_refused(self) -> None:
        self.patch({"brokers": {"replicas": 2}})
        refused = self.wait_for(scenarios.scale_down_refused, "the refusal", 300)
        assert "below the replication factor 3" in json.dumps(refused["conditions"])
        assert self.get("sts", f"{NAME}-kafka")["spec"]["replicas"] == 3

    def down(self) -> None:
        self.kubectl("delete", "topic", TOPIC, "--timeout=120s")
        self.kubectl("delete", "kc", NAME, "--timeout=300s")


def run(target: Target, report: Callable[[str], None] = print) -> None:
    """Every scenario, in order, under one load; each step's time reported."""
    day2 = Day2(target)
    started = time.monotonic()

    def step(what: str, action: Callable[[], Any]) -> Any:
        begun = time.monotonic()
        result = action()
        report(f"{what}: {time.monotonic() - begun:.0f} s")
        return result

    step("cluster and topic ready", day2.up)
    step("load started", day2.start_load)
    step("config roll, operator killed", day2.config_roll_with_the_operator_killed)
    step("roll waits for a frozen follower", day2.roll_waits_for_a_frozen_follower)
    step("leader force-deleted", day2.leader_force_deleted)
    step("broker killed in its container", day2.broker_killed_in_its_container)
    step("3 to 5 to 3 brokers", day2.scale_out_and_in)
    sent = step("load checked", day2.stop_load_and_check)
    report(f"{sent} records, each acknowledged, each read back once")
    step(
        "scale-down below the replication factor refused",
        day2.scale_below_the_replication_factor_refused,
    )
    step("deleted", day2.down)
    report(f"day-2 in all: {time.monotonic() - started:.0f} s")
