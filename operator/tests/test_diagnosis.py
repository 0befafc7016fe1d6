"""Which cause a stuck cluster's status names, from objects shaped as Kubernetes 1.34 writes
them (the PersistentVolume and StatefulSet controllers' events, the scheduler's condition,
the kubelet's container states)."""

from __future__ import annotations

import datetime
from typing import Any

from samsa_operator import diagnosis, resources, status
from samsa_operator.diagnosis import Cause, Workload, diagnose
from samsa_operator.models import KafkaClusterSpec
from samsa_operator.reconcile import Broker, ClusterInfo

NOW = datetime.datetime(2026, 11, 28, 12, 0, 0, tzinfo=datetime.UTC)


def at(seconds_ago: float) -> str:
    return (NOW - datetime.timedelta(seconds=seconds_ago)).strftime("%Y-%m-%dT%H:%M:%SZ")


def sts(name: str = "demo-kafka", replicas: int = 3, written: float = 300) -> dict[str, Any]:
    return {
        "kind": "StatefulSet",
        "metadata": {
            "name": name,
            "uid": "sts-uid",
            "managedFields": [
                {"manager": "samsa-operator", "operation": "Update", "time": at(written)},
                {
                    "manager": "kube-controller-manager",
                    "operation": "Update",
                    "subresource": "status",
                    "time": at(1),
                },
            ],
        },
        "spec": {"replicas": replicas},
    }


def pod(name: str, *, ready: bool = False, **status_fields: Any) -> dict[str, Any]:
    conditions = [{"type": "Ready", "status": "True" if ready else "False"}]
    conditions += status_fields.pop("conditions", [])
    return {
        "kind": "Pod",
        "metadata": {"name": name, "uid": f"{name}-uid"},
        "spec": {
            "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": f"data-{name}"}}]
        },
        "status": {"conditions": conditions, **status_fields},
    }


def claim(name: str, phase: str = "Pending", age: float = 10) -> dict[str, Any]:
    return {
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name, "uid": f"{name}-uid", "creationTimestamp": at(age)},
        "status": {"phase": phase},
    }


def event(
    kind: str, name: str, reason: str, message: str, ago: float = 5, **extra: Any
) -> dict[str, Any]:
    return {
        "involvedObject": {"kind": kind, "name": name, "uid": extra.pop("uid", f"{name}-uid")},
        "reason": reason,
        "message": message,
        "type": extra.pop("type", "Warning"),
        "lastTimestamp": at(ago),
        **extra,
    }


def ready_pods(n: int = 3) -> list[dict[str, Any]]:
    return [pod(f"demo-kafka-{i}", ready=True) for i in range(n)]


def test_ready_pods_and_pods_on_their_way_name_no_cause() -> None:
    assert diagnose(Workload(sts(), ready_pods()), NOW) is None
    # Just created: not scheduled yet, its claim waiting for it (WaitForFirstConsumer).
    fresh = [pod("demo-kafka-0"), *ready_pods()[1:]]
    waiting = event(
        "PersistentVolumeClaim",
        "data-demo-kafka-0",
        "WaitForFirstConsumer",
        "waiting for first consumer to be created before binding",
        type="Normal",
    )
    claims = {"data-demo-kafka-0": claim("data-demo-kafka-0")}
    assert diagnose(Workload(sts(), fresh, claims, [waiting]), NOW) is None


def test_a_claim_with_no_storage_class_names_the_claims_own_event() -> None:
    no_class = "no persistent volumes available for this claim and no storage class is set"
    pods = [
        pod(
            "demo-kafka-0",
            conditions=[
                {
                    "type": "PodScheduled",
                    "status": "False",
                    "reason": "Unschedulable",
                    "message": "0/3 nodes are available: pod has unbound immediate "
                    "PersistentVolumeClaims.",
                }
            ],
        )
    ]
    claims = {"data-demo-kafka-0": claim("data-demo-kafka-0")}
    events = [
        event(
            "PersistentVolumeClaim", "data-demo-kafka-0", "FailedBinding", no_class, type="Normal"
        )
    ]
    cause = diagnose(Workload(sts(replicas=1), pods, claims, events), NOW)
    assert cause == Cause(
        "ClaimPending", f"PersistentVolumeClaim data-demo-kafka-0 is Pending: {no_class}"
    )


def test_a_claim_of_a_missing_class_and_a_silent_provisioner() -> None:
    claims = {"data-demo-kafka-0": claim("data-demo-kafka-0", age=120)}
    missing = event(
        "PersistentVolumeClaim",
        "data-demo-kafka-0",
        "ProvisioningFailed",
        'storageclass.storage.k8s.io "fast" not found',
    )
    cause = diagnose(Workload(sts(replicas=1), [pod("demo-kafka-0")], claims, [missing]), NOW)
    assert cause is not None and cause.reason == "ClaimPending"
    assert cause.message.endswith('"fast" not found')
    # A provisioner that has not answered for a minute is named; a young claim is not.
    silent = event(
        "PersistentVolumeClaim",
        "data-demo-kafka-0",
        "ExternalProvisioning",
        "Waiting for a volume to be created either by the external provisioner 'x' ...",
        type="Normal",
    )
    cause = diagnose(Workload(sts(replicas=1), [pod("demo-kafka-0")], claims, [silent]), NOW)
    assert cause is not None and cause.reason == "ClaimPending"
    young = {"data-demo-kafka-0": claim("data-demo-kafka-0", age=20)}
    assert diagnose(Workload(sts(replicas=1), [pod("demo-kafka-0")], young, [silent]), NOW) is None


def test_an_event_about_an_earlier_claim_of_the_same_name_is_not_this_ones() -> None:
    claims = {"data-demo-kafka-0": claim("data-demo-kafka-0")}
    old = event(
        "PersistentVolumeClaim",
        "data-demo-kafka-0",
        "ProvisioningFailed",
        "gone",
        uid="an-earlier-claim",
    )
    assert diagnose(Workload(sts(replicas=1), [pod("demo-kafka-0")], claims, [old]), NOW) is None


def test_an_unschedulable_pod_names_the_schedulers_reason() -> None:
    message = "0/3 nodes are available: 3 Insufficient cpu. preemption: 0/3 nodes are available"
    pods = [
        pod("demo-kafka-0", ready=True),
        pod(
            "demo-kafka-1",
            conditions=[
                {
                    "type": "PodScheduled",
                    "status": "False",
                    "reason": "Unschedulable",
                    "message": message,
                }
            ],
        ),
    ]
    bound = {"data-demo-kafka-1": claim("data-demo-kafka-1", phase="Bound")}
    cause = diagnose(Workload(sts(replicas=2), pods, bound), NOW)
    assert cause == Cause("Unschedulable", f"pod demo-kafka-1: {message}")


def test_an_image_that_cannot_be_pulled() -> None:
    waiting = {
        "reason": "ImagePullBackOff",
        "message": 'Back-off pulling image "ghcr.io/samsa-dev/samsa:nope"',
    }
    p = pod(
        "demo-kafka-0",
        initContainerStatuses=[
            {
                "name": "config",
                "image": "ghcr.io/samsa-dev/samsa:nope",
                "state": {"waiting": waiting},
            }
        ],
    )
    cause = diagnose(Workload(sts(replicas=1), [p]), NOW)
    assert cause is not None and cause.reason == "ImagePullFailed"
    assert "container config cannot pull image ghcr.io/samsa-dev/samsa:nope" in cause.message


def test_a_crash_loop_quotes_the_last_lines_of_the_log() -> None:
    log = "\n".join(f"line {i}" for i in range(20)) + "\nerror: invalid value for num.io.threads\n"
    p = pod(
        "demo-kafka-2",
        containerStatuses=[
            {
                "name": "broker",
                "image": "ghcr.io/samsa-dev/samsa:0.1.0",
                "restartCount": 4,
                "state": {
                    "waiting": {
                        "reason": "CrashLoopBackOff",
                        "message": "back-off 40s restarting failed container=broker",
                    }
                },
                "lastState": {"terminated": {"exitCode": 2, "reason": "Error", "message": log}},
            }
        ],
    )
    cause = diagnose(Workload(sts(), [*ready_pods(2), p]), NOW)
    assert cause is not None and cause.reason == "CrashLoopBackOff"
    assert cause.message.startswith(
        "pod demo-kafka-2, container broker keeps exiting (exit code 2, 4 restarts)"
    )
    quoted = cause.message.split("its last words:\n")[1].splitlines()
    assert quoted == [
        "line 16",
        "line 17",
        "line 18",
        "line 19",
        "error: invalid value for num.io.threads",
    ]


def test_a_pod_security_refusal_of_the_current_spec() -> None:
    refusal = (
        'create Pod demo-kafka-0 in StatefulSet demo-kafka failed error: pods "demo-kafka-0" is '
        'forbidden: violates PodSecurity "restricted:latest": runAsUser=0 (pod must not set '
        "runAsUser=0)"
    )
    events = [event("StatefulSet", "demo-kafka", "FailedCreate", refusal, uid="sts-uid", ago=2)]
    cause = diagnose(Workload(sts(written=30), [], {}, events), NOW)
    assert cause == Cause("PodSecurityRefused", f"StatefulSet demo-kafka: {refusal}")
    # The spec has changed since: the refusal was of a spec that is gone.
    assert diagnose(Workload(sts(written=1), [], {}, events), NOW) is None
    quota = event(
        "StatefulSet", "demo-kafka", "FailedCreate", "exceeded quota: pods", uid="sts-uid"
    )
    cause = diagnose(Workload(sts(written=30), [], {}, [quota]), NOW)
    assert cause is not None and cause.reason == "PodCreateFailed"


def test_the_first_pod_by_ordinal_is_named() -> None:
    crash = {"waiting": {"reason": "CrashLoopBackOff", "message": ""}}
    pull = {"waiting": {"reason": "ErrImagePull", "message": "not found"}}
    pods = [
        pod("demo-kafka-2", containerStatuses=[{"name": "broker", "state": crash}]),
        pod("demo-kafka-1", containerStatuses=[{"name": "broker", "state": pull}]),
        pod("demo-kafka-0", ready=True),
    ]
    cause = diagnose(Workload(sts(), pods), NOW)
    assert cause is not None and cause.reason == "ImagePullFailed"
    assert "demo-kafka-1" in cause.message


def test_conditions_name_zookeepers_cause_before_the_brokers() -> None:
    cluster = resources.Cluster("demo", "ns", "uid", KafkaClusterSpec())
    zk = Cause("ClaimPending", "PersistentVolumeClaim data-demo-zookeeper-0 is Pending: x")
    broker = Cause("Unschedulable", "pod demo-kafka-0: y")
    _, conditions = status.cluster_status(
        cluster,
        generation=1,
        broker_pods=[],
        zookeeper_sts=None,
        info=None,
        zookeeper_cause=zk,
        broker_cause=broker,
    )
    by_type = {c["type"]: c for c in conditions}
    assert by_type["Ready"]["reason"] == "ClaimPending"
    assert by_type["Ready"]["message"] == f"0/3 ZooKeeper servers ready: {zk.message}"
    assert by_type["ZooKeeperReady"]["reason"] == "ClaimPending"
    assert (by_type["BrokersReady"]["status"], by_type["BrokersReady"]["reason"]) == (
        "False",
        "Unschedulable",
    )
    # With nothing found, the counts alone, as before.
    _, conditions = status.cluster_status(
        cluster, generation=1, broker_pods=[], zookeeper_sts=None, info=None
    )
    assert {c["type"]: c["reason"] for c in conditions} == {
        "Ready": "ZooKeeperNotReady",
        "ZooKeeperReady": "NotReady",
        "BrokersReady": "NotReady",
    }


def test_ready_pods_are_not_ready_brokers_until_the_cluster_s_metadata_lists_them() -> None:
    cluster = resources.Cluster("demo", "ns", "uid", KafkaClusterSpec())
    pods = [pod(f"demo-kafka-{i}", ready=True) for i in range(3)]
    zk = {"status": {"readyReplicas": 3, "replicas": 3}}

    def conditions(known: int) -> dict[str, dict[str, str]]:
        info = ClusterInfo("id", 0, [Broker(i) for i in range(known)])
        _, found = status.cluster_status(
            cluster, generation=1, broker_pods=pods, zookeeper_sts=zk, info=info
        )
        return {c["type"]: c for c in found}

    two = conditions(2)
    assert (two["Ready"]["status"], two["Ready"]["reason"]) == ("False", "BrokersNotReady")
    assert two["Ready"]["message"] == "3/3 brokers ready, 2 in the cluster's metadata"
    assert conditions(3)["Ready"]["status"] == "True"


def test_every_reason_is_one_word_a_user_can_grep_for() -> None:
    assert all(r.isalnum() for r in diagnosis.REASONS)
    assert len(set(diagnosis.REASONS)) == len(diagnosis.REASONS)
