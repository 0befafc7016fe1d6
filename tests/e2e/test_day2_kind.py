"""Day-2 operations on kind, as in tests/integration but with Kubernetes' own StatefulSet
controller, kubelet and ZooKeeper ensemble: a roll under an idempotent acks=all load (the
controller last, nothing lost, preferred leaders after), a roll that waits for a stopped
follower, the operator pod killed mid-roll, scaling 3 to 5 and back, and a scale-down below a
replication factor refused."""

from __future__ import annotations

import json
import sys
import time
from collections import Counter
from typing import Any

from e2e_support import BROKER_IMAGE, REPO, in_cluster, kubectl, run

# The scenarios' shared body lives with the local suite's.
sys.path.insert(0, str(REPO / "tests" / "integration"))
import day2_scenarios as scenarios

CLUSTER_YAML = json.dumps(
    scenarios.cluster(
        3,
        zookeeper={"replicas": 3, "storage": {"size": "1Gi", "deleteClaim": True}},
        delete_claim=True,
    )
)

TOPIC_YAML = """
apiVersion: kafka.samsa.dev/v1alpha1
kind: Topic
metadata:
  name: events
spec:
  clusterRef: day2
  partitions: 10
  replicationFactor: 3
  config:
    min.insync.replicas: 2
"""

BOOTSTRAP = "day2-kafka-bootstrap.default.svc:9092"
RECORDS = 6000


def status() -> dict[str, Any]:
    return dict(json.loads(kubectl("get", "kc", "day2", "-o", "json")).get("status") or {})


def wait_for(check: Any, what: str, within: float = 900) -> dict[str, Any]:
    deadline = time.monotonic() + within
    while True:
        current = status()
        if check(current):
            return current
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}: {current}")
        time.sleep(5)


roll_done = scenarios.roll_finished(3)


def pod_uids() -> dict[str, str]:
    pods = json.loads(
        kubectl("get", "pods", "-l", "app.kubernetes.io/component=kafka", "-o", "json")
    )
    return {p["metadata"]["name"]: p["metadata"]["uid"] for p in pods["items"]}


def created_order() -> list[str]:
    pods = json.loads(
        kubectl("get", "pods", "-l", "app.kubernetes.io/component=kafka", "-o", "json")
    )
    return [
        p["metadata"]["name"]
        for p in sorted(pods["items"], key=lambda p: p["metadata"]["creationTimestamp"])
    ]


def describe() -> list[dict[str, Any]]:
    out = samsa("describe", "topics", "describe", "--internal", "-o", "json", "-b", BOOTSTRAP)
    return list(json.loads(out))


def samsa(pod: str, *args: str, stdin: str | None = None) -> str:
    return in_cluster(f"samsa-{pod}-{int(time.time())}", *args, stdin=stdin)


def start_load() -> None:
    """RECORDS numbered records, ~50 a second, idempotent acks=all, in a pod of their own."""
    script = (
        f"i=0; while [ $i -lt {RECORDS} ]; do echo v$i; i=$((i+1)); sleep 0.02; done"
        f" | samsa produce events -b {BOOTSTRAP} -X enable.idempotence=true --acks all"
    )
    kubectl(
        "run",
        "load",
        "--restart=Never",
        f"--image={BROKER_IMAGE}",
        "--image-pull-policy=Never",
        "--command",
        "--",
        "sh",
        "-c",
        script,
    )


def check_load() -> None:
    kubectl(
        "wait",
        "--for=jsonpath={.status.phase}=Succeeded",
        "pod/load",
        "--timeout=900s",
        timeout=960,
    )
    out = samsa(
        "consume",
        "consume",
        "events",
        "-b",
        BOOTSTRAP,
        "--from-beginning",
        "--count",
        str(RECORDS),
        "--format",
        "%s\n",
    )
    values = [line for line in out.splitlines() if line.startswith("v")]
    assert sorted(values) == sorted(f"v{i}" for i in range(RECORDS)), "lost or duplicated"
    kubectl("delete", "pod", "load", "--wait=false")


def node_pid(pod: str) -> tuple[str, str]:
    """The kind node running `pod`'s broker and the broker's pid there (PID 1 in its own
    namespace cannot be stopped from inside the container)."""
    spec = json.loads(kubectl("get", "pod", pod, "-o", "json"))
    node = spec["spec"]["nodeName"]
    [container] = [c for c in spec["status"]["containerStatuses"] if c["name"] == "broker"]
    cid = container["containerID"].split("//", 1)[1]
    pid = run(
        "docker",
        "exec",
        node,
        "crictl",
        "inspect",
        "--output",
        "go-template",
        "--template",
        "{{.info.pid}}",
        cid,
    ).strip()
    return node, pid


def counts(topics: list[dict[str, Any]], brokers: int) -> tuple[Counter[int], Counter[int]]:
    parts = [(p["replicas"], p["leader"]) for t in topics for p in t["partitions"]]
    return scenarios.per_broker(parts, brokers)


def test_day2_roll_scale_and_refusal(kind_cluster: str) -> None:
    kubectl("apply", "-f", "-", stdin=CLUSTER_YAML)
    kubectl("wait", "--for=condition=Ready", "kc/day2", "--timeout=900s", timeout=960)
    kubectl("apply", "-f", "-", stdin=TOPIC_YAML)
    kubectl("wait", "--for=condition=Ready", "kt/events", "--timeout=300s", timeout=360)

    # A roll under load, the operator pod killed once it has begun: every broker restarted
    # once, the controller last, nothing lost, preferred leaders after.
    controller = f"day2-kafka-{status()['controllerId']}"
    before = pod_uids()
    start_load()
    kubectl("annotate", "kc", "day2", "kafka.samsa.dev/manual-rolling-update=true")
    wait_for(lambda s: (s.get("roll") or {}).get("restarted"), "the roll to begin", 300)
    kubectl(
        "delete",
        "pod",
        "-n",
        "samsa",
        "-l",
        "app.kubernetes.io/name=samsa-operator",
        "--grace-period=0",
        "--force",
    )
    wait_for(roll_done, "the roll to finish")
    after = pod_uids()
    assert all(after[name] != uid for name, uid in before.items()), "a broker was not restarted"
    assert created_order()[-1] == controller, "the controller restarted last"
    check_load()
    topics = describe()
    assert all(p["leader"] == p["replicas"][0] for t in topics for p in t["partitions"])

    # The roll waits while a follower is stopped, and goes on once it runs again.
    controller = f"day2-kafka-{status()['controllerId']}"  # it moved in the roll
    follower = next(n for n in sorted(after) if n != controller)
    node, pid = node_pid(follower)
    run("docker", "exec", node, "kill", "-STOP", pid)
    try:
        kubectl("annotate", "kc", "day2", "kafka.samsa.dev/manual-rolling-update=true")
        blocked = wait_for(scenarios.roll_blocked, "the roll blocked", 300)
        assert blocked["roll"]["restarted"] == []
    finally:
        run("docker", "exec", node, "kill", "-CONT", pid)
    wait_for(roll_done, "the roll to finish")

    # 3 to 5: replicas and leaders balanced over the 5.
    kubectl("patch", "kc", "day2", "--type=merge", "-p", '{"spec":{"brokers":{"replicas":5}}}')
    wait_for(scenarios.scaled_to(5), "the rebalance")
    replicas, leaders = counts(describe(), 5)
    assert scenarios.spread(replicas) <= 1, replicas
    assert scenarios.spread(leaders) <= 1, leaders

    # 5 to 3: drained first; the pods and (deleteClaim) their claims go.
    kubectl("patch", "kc", "day2", "--type=merge", "-p", '{"spec":{"brokers":{"replicas":3}}}')
    wait_for(scenarios.scaled_to(3), "the drain")
    replicas, _ = counts(describe(), 3)
    assert set(replicas) == {0, 1, 2}
    kubectl(
        "wait",
        "--for=delete",
        "pod/day2-kafka-4",
        "pod/day2-kafka-3",
        "--timeout=300s",
        timeout=360,
    )

    # Below the replication factor: refused, nothing changes.
    kubectl("patch", "kc", "day2", "--type=merge", "-p", '{"spec":{"brokers":{"replicas":2}}}')
    refused = wait_for(scenarios.scale_down_refused, "the refusal", 300)
    assert "below the replication factor 3" in json.dumps(refused["conditions"])
    sts = json.loads(kubectl("get", "sts", "day2-kafka", "-o", "json"))
    assert sts["spec"]["replicas"] == 3
    kubectl("delete", "kt", "events", "--timeout=120s")
    kubectl("delete", "kc", "day2", "--timeout=300s")
